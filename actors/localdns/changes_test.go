package localdns

import (
	"math/rand/v2"
	"net/netip"
	"slices"
	"testing"

	"peerdns/internal/view"
	"peerdns/internal/view/viewtest"
)

func TestP2PChanges(t *testing.T) {
	ip := netip.MustParseAddr("127.77.0.9")
	res := func(name string) *view.Domain { return &view.Domain{Name: name, Status: "resolved", IP: ip} }
	a, b, tie := res("a.p2p"), res("b.p2p"), &view.Domain{Name: "c.p2p", Status: "tie"}
	prev := &view.Snapshot{Domains: map[string]*view.Domain{"a.p2p": a, "b.p2p": b, "c.p2p": tie}}
	for _, tt := range []struct {
		name           string
		prev, next     *view.Snapshot
		added, removed []string
	}{
		{"first view", nil, prev, []string{"a.p2p", "b.p2p"}, nil},
		{"same pointers", prev, &view.Snapshot{Domains: map[string]*view.Domain{"a.p2p": a, "b.p2p": b, "c.p2p": tie}}, nil, nil},
		{"new entry, still resolved", prev, &view.Snapshot{Domains: map[string]*view.Domain{"a.p2p": res("a.p2p"), "b.p2p": b, "c.p2p": tie}}, nil, nil},
		{"resolved, lost, gone", prev, &view.Snapshot{Domains: map[string]*view.Domain{
			"a.p2p": {Name: "a.p2p", Status: "insufficient_quorum"}, "c.p2p": res("c.p2p"), "d.p2p": res("d.p2p")}},
			[]string{"c.p2p", "d.p2p"}, []string{"a.p2p", "b.p2p"}},
		{"no address", prev, &view.Snapshot{Domains: map[string]*view.Domain{"a.p2p": a, "b.p2p": b, "c.p2p": {Name: "c.p2p", Status: "resolved"}}}, nil, nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			added, removed := p2pChanges(tt.prev, tt.next)
			slices.Sort(added)
			slices.Sort(removed)
			if !slices.Equal(added, tt.added) || !slices.Equal(removed, tt.removed) {
				t.Fatalf("p2pChanges = +%v -%v, want +%v -%v", added, removed, tt.added, tt.removed)
			}
		})
	}
}

// TestP2PChangesFromTheNamedChanges: for views derived one from another
// (view.Derive, as the ledger publishes them), looking only at the names
// they changed finds what a walk of every domain finds.
func TestP2PChangesFromTheNamedChanges(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	statuses := []string{"resolved", "conflict", "tie", "insufficient_quorum"}
	var views []*view.Snapshot
	var last *view.Snapshot
	for v := uint64(1); v <= 200; v++ {
		changes := viewtest.Changes(r, r.IntN(5), 30, func(name string) *view.Domain {
			d := &view.Domain{Name: name, Status: statuses[r.IntN(len(statuses))]}
			if r.IntN(5) > 0 {
				d.IP = netip.AddrFrom4([4]byte{127, 77, 0, byte(r.IntN(200) + 2)})
			}
			return d
		})
		last = view.Next(last, v, changes)
		views = append(views, last)
	}
	whole := func(s *view.Snapshot) *view.Snapshot { // the same view, without its named changes
		return &view.Snapshot{Version: s.Version, Domains: s.Domains}
	}
	for range 2000 {
		i := r.IntN(len(views))
		j := i + r.IntN(len(views)-i)
		prev, next := views[i], views[j]
		if _, ok := next.ChangedSince(prev); !ok {
			t.Fatalf("v%d since v%d not told", next.Version, prev.Version)
		}
		added, removed := p2pChanges(prev, next)
		wantAdded, wantRemoved := p2pChanges(whole(prev), whole(next))
		for _, l := range [][]string{added, removed, wantAdded, wantRemoved} {
			slices.Sort(l)
		}
		if !slices.Equal(added, wantAdded) || !slices.Equal(removed, wantRemoved) {
			t.Fatalf("v%d since v%d: +%v -%v, whole +%v -%v", next.Version, prev.Version, added, removed, wantAdded, wantRemoved)
		}
	}
}
