package node

import (
	"maps"
	"net/netip"
	"slices"

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
	var w vifWant
	stop := n.pub.Subscribe(func(s *view.Snapshot) {
		if w.update(s) {
			// The manager logs and keeps its failure (Explain, Status);
			// a failed sync is tried again with the next view.
			w.failed = m.Sync(slices.Collect(maps.Values(w.addrs))) != nil
		}
	})
	n.closers = append(n.closers, func() {
		stop()
		if err := m.Close(); err != nil {
			n.logs["core"].Error("virtual interface", "err", err)
		}
	})
}

// vifWant is the subscriber's set of the view's addresses that need the
// interface, kept from view to view by the domains each view changed
// (view.Snapshot.Changed) rather than by a walk of every domain.
type vifWant struct {
	seen   *view.Snapshot
	addrs  map[string]netip.Addr // domain → its address, for those that need the interface
	failed bool                  // the last sync failed: sync again
}

// update takes s in and reports whether the manager should sync: the set
// changed, or the last sync failed (or s is the first view).
func (w *vifWant) update(s *view.Snapshot) bool {
	changed := w.failed || w.seen == nil
	if w.addrs == nil {
		w.addrs = map[string]netip.Addr{}
	}
	for _, name := range s.Changed(w.seen) {
		d, had := s.Domains[name], w.addrs[name]
		switch {
		case d != nil && vif.Needs(d.IP):
			if d.IP != had {
				w.addrs[name], changed = d.IP, true
			}
		case had.IsValid():
			delete(w.addrs, name)
			changed = true
		}
	}
	w.seen = s
	return changed
}
