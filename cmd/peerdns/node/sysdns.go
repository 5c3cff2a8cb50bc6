package node

import (
	"github.com/fasthttp/router"

	"peerdns/http/admin"
)

// sysDNSRoutes registers POST /api/install-dns and /api/uninstall-dns
// over the DNS server's bound address and the names the node answers.
func (n *Node) sysDNSRoutes(r *router.Router) {
	admin.RegisterSysDNS(r, admin.SysDNSDeps{Log: n.logs["core"], Addr: n.dns.Addr, Names: n.answeredNames})
}

// answeredNames are the claimed p2p domains and the internal domains of
// the published view.
func (n *Node) answeredNames() []string {
	s := n.pub.Load()
	if s == nil {
		return nil
	}
	out := make([]string, 0, len(s.Domains)+len(s.Internal))
	for name := range s.Domains {
		out = append(out, name)
	}
	for name := range s.Internal {
		out = append(out, name)
	}
	return out
}
