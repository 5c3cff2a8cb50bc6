package node

import (
	"net/netip"
	"sync/atomic"

	"github.com/fasthttp/router"

	"peerdns/http/admin"
	"peerdns/http/proxy"
	"peerdns/internal/certs"
	"peerdns/messages"
)

// edgeRef is the running edge proxy, for health (read from the admin
// server's goroutines).
type edgeRef = atomic.Pointer[proxy.Server]

// startEdge starts the edge proxy on the HTTP and
// HTTPS addresses; it stops before the admin server and the actors.
func (n *Node) startEdge() error {
	adm := n.admin.Handler()
	p := proxy.New(proxy.Deps{
		HTTPAddr: n.cfg.HTTPAddr, HTTPSAddr: n.cfg.HTTPSAddr, AdminDomain: n.cfg.AdminDomain, Admin: adm,
		View: n.pub, Plugins: pluginSites{n.pluginTable}, PluginWeb: n.pluginWeb, Dialer: n.dialer, CA: n.ca,
		Log: n.logs["proxy"], Access: n.files["httpProxy"], UpstreamTimeout: n.orig.edgeUpstreamTimeout,
		ReadTimeout: n.orig.edgeReadTimeout, WriteTimeout: n.orig.edgeWriteTimeout, MaxUploads: n.orig.edgeMaxUploads,
		MaxConns: n.cfg.EdgeMaxConns, MaxConnsPerAddr: n.cfg.EdgeConnsPerAddr,
		AccessBatch: func(b *messages.LogBatch) {
			n.root.System.Root.Send(n.channels["httpProxy"], b)
		},
	})
	if err := p.Start(); err != nil {
		return err
	}
	n.edge.Store(p)
	n.closers = append(n.closers, func() {
		n.edge.Store(nil)
		p.Shutdown()
	})
	h, hs := p.Addrs()
	n.announce("http", h)
	n.announce("https", hs)
	return nil
}

// certRoutes registers the certificate routes.
func (n *Node) certRoutes(r *router.Router) {
	admin.RegisterCerts(r, admin.CertDeps{CA: n.ca, Root: n.root.System.Root, Log: n.logs["core"],
		IP: func(domain string) netip.Addr {
			if s := n.pub.Load(); s != nil {
				if d, ok := s.Lookup(domain); ok {
					return d.IP
				}
				return s.Internal[domain]
			}
			return netip.Addr{}
		}})
}

// edgeHealth is health's proxy service: enabled once started, healthy
// while both listeners serve.
func (n *Node) edgeHealth() (enabled, healthy bool) {
	p := n.edge.Load()
	if p == nil {
		return false, false
	}
	return true, p.Healthy()
}

// EdgeAddrs are the edge proxy's HTTP and HTTPS addresses.
func (n *Node) EdgeAddrs() (httpAddr, httpsAddr string) {
	p := n.edge.Load()
	if p == nil {
		return "", ""
	}
	h, hs := p.Addrs()
	return h.String(), hs.String()
}

// CA is the node's certificate authority.
func (n *Node) CA() *certs.CA { return n.ca }
