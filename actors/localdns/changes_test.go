package localdns

import (
	"net/netip"
	"slices"
	"testing"

	"peerdns/internal/view"
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
