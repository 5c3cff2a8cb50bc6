package node

import (
	"net/netip"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"golang.org/x/net/publicsuffix"

	"peerdns/internal/certs"
	"peerdns/internal/view"
	"peerdns/messages"
)

// The root CA's scope: what the node serves, which a new root is
// constrained to (internal/certs, scope.go).
//
//   - DNS: the p2p suffix ("p2p"), every internal domain (admin, profile,
//     plugins), and the suffix of every local record: the record's name
//     without its first label (nas.home → home, www.dev.lan → dev.lan),
//     or the name itself when that parent is empty or a public suffix
//     (example.com → example.com, never com; the public suffix list of
//     golang.org/x/net/publicsuffix tells). p2p domains claimed outside
//     .p2p are not covered: such a name is also public, and a root that
//     could sign for it is what the constraints are there to prevent;
//     the edge serves them over HTTP only.
//   - IP: the configured subnets and each internal domain's address.
//
// scopeWatch follows the view and the local records and, when the node
// starts serving a suffix or range the root does not cover, logs once
// per new gap how to get a root that does (regenerate-ca) and sends
// update-certs so the panel's certificate tab shows it.

// caScope is what the node serves now.
func (n *Node) caScope() certs.Scope {
	s := certs.Scope{Suffixes: []string{"p2p", n.cfg.AdminDomain, n.cfg.ProfileDomain}}
	// The admin and profile domains' addresses, known before the ledger
	// publishes its first view (the first root is made at start).
	for _, ip := range []netip.Addr{n.edgeAnswer(), n.adminAnswer()} {
		if ip.IsValid() {
			s.Ranges = append(s.Ranges, netip.PrefixFrom(ip.Unmap(), ip.Unmap().BitLen()))
		}
	}
	if v := n.pub.Load(); v != nil {
		for name, ip := range v.Internal {
			s.Suffixes = append(s.Suffixes, name)
			if ip.IsValid() {
				s.Ranges = append(s.Ranges, netip.PrefixFrom(ip.Unmap(), ip.Unmap().BitLen()))
			}
		}
	}
	if n.records != nil {
		if r := n.records.Load(); r != nil {
			for _, rec := range r.Records {
				if sfx := recordSuffix(rec.Name); sfx != "" {
					s.Suffixes = append(s.Suffixes, sfx)
				}
			}
		}
	}
	for _, sub := range n.subnets() {
		if a, err := netip.ParseAddr(sub.Base); err == nil {
			s.Ranges = append(s.Ranges, netip.PrefixFrom(a, sub.CIDR).Masked())
		}
	}
	return s.Normalize()
}

// adminAnswer is the admin domain's address (invalid before the admin
// socket is open).
func (n *Node) adminAnswer() netip.Addr {
	if n.adminLn == nil {
		return netip.Addr{}
	}
	return answerAddr(n.adminLn.Addr())
}

// subnets asks the ledger for the configured subnets (nil when it does
// not answer in time: the scope then lacks them, which Missing shows).
func (n *Node) subnets() []messages.Subnet {
	if n.root == nil || n.ledger == nil {
		return nil
	}
	res, err := n.root.System.Root.RequestFuture(n.ledger, &messages.GetSubnets{}, 2*time.Second).Result()
	if err != nil {
		return nil
	}
	if rep, ok := res.(*messages.GetSubnetsReply); ok {
		return rep.Subnets
	}
	return nil
}

// recordSuffix is the suffix a local record name asks the root to cover.
func recordSuffix(name string) string {
	name = strings.Trim(strings.ToLower(strings.TrimSpace(name)), ".")
	name = strings.TrimPrefix(name, "*.")
	if name == "" || name == "*" {
		return ""
	}
	_, parent, ok := strings.Cut(name, ".")
	if !ok || parent == "" {
		return name
	}
	if ps, icann := publicsuffix.PublicSuffix(parent); icann && ps == parent {
		return name
	}
	return parent
}

// openCA opens the node's certificate authority (DATA/ca); a root it
// makes is constrained to caScope.
func (n *Node) openCA() error {
	ca, err := certs.OpenScoped(filepath.Join(n.orig.Data, "ca"), nil, n.caScope)
	if err != nil {
		return err
	}
	n.ca = ca
	n.watchScope()
	return nil
}

// watchScope starts the scope watcher; it stops with the node.
func (n *Node) watchScope() {
	log := n.logs["core"]
	var mu sync.Mutex
	told := map[string]bool{}
	check := func() {
		mu.Lock()
		defer mu.Unlock()
		root := n.ca.Root()
		if !certs.Constrained(root) {
			if !told["unconstrained"] {
				told["unconstrained"] = true
				log.Warn("the root CA has no name constraints: once trusted it can vouch for any site; " +
					"POST /api/regenerate-ca makes a root limited to the names this node serves (then install-ca again)")
			}
			return
		}
		miss := certs.Missing(root, n.caScope())
		var fresh []string
		for _, s := range miss.Suffixes {
			fresh = appendNew(told, fresh, s)
		}
		for _, p := range miss.Ranges {
			fresh = appendNew(told, fresh, p.String())
		}
		if len(fresh) == 0 {
			return
		}
		log.Warn("the node serves names the root CA may not sign for: POST /api/regenerate-ca (or Certificates in the panel) "+
			"makes a root that covers them, then install-ca again", "new", strings.Join(fresh, ","), "root", certs.RootScope(root).String())
		n.root.System.EventStream.Publish(&messages.Hint{Type: messages.HintCerts})
	}
	stopView := n.pub.Subscribe(func(*view.Snapshot) { check() })
	var stopRecs func()
	if n.records != nil {
		stopRecs = n.records.Subscribe(func(*messages.LocalSnapshot) { check() })
	}
	n.closers = append(n.closers, func() {
		stopView()
		if stopRecs != nil {
			stopRecs()
		}
	})
}

// appendNew appends k to out the first time it is seen.
func appendNew(seen map[string]bool, out []string, k string) []string {
	if seen[k] {
		return out
	}
	seen[k] = true
	return append(out, k)
}
