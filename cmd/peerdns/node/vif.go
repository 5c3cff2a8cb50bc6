package node

import (
	"net/netip"

	"peerdns/internal/view"
	"peerdns/internal/vif"
)

// startVIF makes the virtual interface manager (internal/vif) and keeps
// it in step with the view: every domain's local IP outside loopback is
// on the interface while the domain is in the view (it has claims), and
// taken off when the domain is freed. The manager closes (removing the
// interface) after the tunnels have stopped: started before them, its
// closer runs after theirs.
func (n *Node) startVIF() {
	m := vif.New(vif.Config{Log: n.logs["core"]})
	n.vif = m
	for _, sub := range n.subnets() {
		if a, err := netip.ParseAddr(sub.Base); err == nil && !netip.PrefixFrom(a, sub.CIDR).Masked().Addr().IsLoopback() {
			_ = m.Up() // a failure is logged once and kept for Explain
			break
		}
	}
	stop := n.pub.Subscribe(func(s *view.Snapshot) {
		var want []netip.Addr
		for _, d := range s.Domains {
			if vif.Needs(d.IP) {
				want = append(want, d.IP)
			}
		}
		_ = m.Sync(want) // the manager logs and keeps its failure (Explain, Status)
	})
	n.closers = append(n.closers, func() {
		stop()
		if err := m.Close(); err != nil {
			n.logs["core"].Error("virtual interface", "err", err)
		}
	})
}
