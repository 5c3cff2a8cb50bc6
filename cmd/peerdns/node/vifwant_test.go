package node

import (
	"maps"
	"math/rand/v2"
	"net/netip"
	"testing"

	"peerdns/internal/view"
	"peerdns/internal/view/viewtest"
	"peerdns/internal/vif"
)

// TestVIFWantFollowsTheView: the set kept from the names each view
// changed is the set a walk of every domain finds, and a sync is asked
// for exactly when that set changed (or the last sync failed), for views
// derived one from another and for views that are not.
func TestVIFWantFollowsTheView(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	addr := func() netip.Addr {
		if r.IntN(3) == 0 {
			return netip.AddrFrom4([4]byte{127, 77, 0, byte(r.IntN(8) + 2)}) // loopback: no interface
		}
		return netip.AddrFrom4([4]byte{10, 77, 0, byte(r.IntN(8) + 2)})
	}
	whole := func(s *view.Snapshot) map[string]netip.Addr {
		out := map[string]netip.Addr{}
		for name, d := range s.Domains {
			if vif.Needs(d.IP) {
				out[name] = d.IP
			}
		}
		return out
	}
	var w vifWant
	var last *view.Snapshot
	prevSet := map[string]netip.Addr(nil)
	for v := uint64(1); v <= 500; v++ {
		changes := viewtest.Changes(r, r.IntN(4), 12, func(name string) *view.Domain {
			return &view.Domain{Name: name, Status: "resolved", IP: addr()}
		})
		next := view.Next(last, v, changes)
		if r.IntN(10) == 0 { // now and then a view that is not derived: compared whole
			next = &view.Snapshot{Version: v, Domains: next.Domains}
		}
		last = next
		w.failed = r.IntN(8) == 0
		failed := w.failed
		sync := w.update(next)
		want := whole(next)
		if !maps.Equal(w.addrs, want) {
			t.Fatalf("v%d: kept %v, want %v", v, w.addrs, want)
		}
		if wantSync := failed || prevSet == nil || !maps.Equal(want, prevSet); sync != wantSync {
			t.Fatalf("v%d: sync %v, want %v (failed before %v)", v, sync, wantSync, failed)
		}
		prevSet = want
	}
}
