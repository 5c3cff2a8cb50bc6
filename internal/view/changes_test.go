package view

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"testing"
)

// publisher derives snapshots as the ledger does: a copy of the previous
// map with some entries replaced or removed.
type publisher struct {
	last *Snapshot
	all  []*Snapshot
}

func (p *publisher) publish(set map[string]bool, del []string) *Snapshot {
	version := uint64(1)
	if p.last != nil {
		version = p.last.Version + 1
	}
	changes := map[string]*Domain{}
	for _, name := range del {
		changes[name] = nil
	}
	for name := range set {
		changes[name] = &Domain{Name: name}
	}
	p.last = Next(p.last, version, changes)
	p.all = append(p.all, p.last)
	return p.last
}

// differ is the whole comparison ChangedSince stands in for.
func differ(a, b *Snapshot) map[string]bool {
	out := map[string]bool{}
	for name, d := range b.Domains {
		if a.Domains[name] != d {
			out[name] = true
		}
	}
	for name := range a.Domains {
		if _, ok := b.Domains[name]; !ok {
			out[name] = true
		}
	}
	return out
}

// TestChangedSinceCoversEveryDifference publishes random changes and
// checks, for every pair of snapshots, that the names ChangedSince gives
// hold every domain whose entry differs, and nothing that was not
// changed in between.
func TestChangedSinceCoversEveryDifference(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	var p publisher
	for range 300 {
		set := map[string]bool{}
		var del []string
		for range r.IntN(6) {
			set[fmt.Sprintf("d%d.p2p", r.IntN(40))] = true
		}
		if p.last != nil && r.IntN(3) == 0 {
			for name := range p.last.Domains {
				if !set[name] {
					del = append(del, name)
				}
				break
			}
		}
		p.publish(set, del)
	}
	for i, a := range p.all {
		for _, b := range p.all[i:] {
			names, ok := b.ChangedSince(a)
			if !ok {
				t.Fatalf("v%d since v%d: not told, with the log whole", b.Version, a.Version)
			}
			got := map[string]bool{}
			for _, n := range names {
				got[n] = true
			}
			for name := range differ(a, b) {
				if !got[name] {
					t.Fatalf("v%d since v%d: %s differs and is not named (named %v)", b.Version, a.Version, name, names)
				}
			}
			if a == b && len(names) > 0 {
				t.Fatalf("v%d since itself: %v", a.Version, names)
			}
		}
	}
}

// TestChangedNamesEachDifferenceOnce: from the log or by a walk (views
// without their names), Changed names every domain that differs, each
// once; the walk names nothing else.
func TestChangedNamesEachDifferenceOnce(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	var p publisher
	for range 100 {
		set := map[string]bool{}
		for range r.IntN(6) {
			set[fmt.Sprintf("d%d.p2p", r.IntN(20))] = true
		}
		var del []string
		if r.IntN(3) == 0 {
			del = []string{fmt.Sprintf("d%d.p2p", r.IntN(20))}
		}
		p.publish(set, del)
	}
	bare := func(s *Snapshot) *Snapshot { return &Snapshot{Version: s.Version, Domains: s.Domains} }
	for range 500 {
		i := r.IntN(len(p.all))
		a, b := p.all[i], p.all[i+r.IntN(len(p.all)-i)]
		want := differ(a, b)
		fromLog, walked := b.Changed(a), bare(b).Changed(bare(a))
		if len(walked) != len(want) {
			t.Fatalf("v%d since v%d: walked %v, want %v", b.Version, a.Version, walked, want)
		}
		for _, names := range [][]string{fromLog, walked} {
			sorted := slices.Sorted(slices.Values(names))
			if len(slices.Compact(sorted)) != len(names) {
				t.Fatalf("v%d since v%d: a name twice in %v", b.Version, a.Version, names)
			}
			for name := range want {
				if !slices.Contains(names, name) {
					t.Fatalf("v%d since v%d: %s differs, not in %v", b.Version, a.Version, name, names)
				}
			}
		}
	}
	if got := p.last.Changed(nil); len(got) != len(p.last.Domains) {
		t.Fatalf("since nothing: %d names for %d domains", len(got), len(p.last.Domains))
	}
}

func TestChangedSinceRefuses(t *testing.T) {
	var p, q publisher
	a1 := p.publish(map[string]bool{"a.p2p": true}, nil)
	a2 := p.publish(map[string]bool{"b.p2p": true}, nil)
	b1 := q.publish(map[string]bool{"a.p2p": true}, nil)
	q.publish(map[string]bool{"c.p2p": true}, nil)
	plain := &Snapshot{Version: 1}
	for _, tc := range []struct {
		name    string
		s, prev *Snapshot
	}{
		{"no previous snapshot", a2, nil},
		{"another lineage", a2, b1},
		{"a snapshot not derived", a2, plain},
		{"a newer previous", a1, a2},
		{"from a snapshot not derived", plain, a1},
	} {
		if names, ok := tc.s.ChangedSince(tc.prev); ok {
			t.Errorf("%s: told %v", tc.name, names)
		}
	}
	// A ledger that starts again starts a lineage: versions may repeat.
	restarted := &Snapshot{Version: 1, Domains: map[string]*Domain{}}
	Derive(nil, restarted, nil)
	if names, ok := restarted.ChangedSince(a1); ok {
		t.Errorf("a new lineage told %v since an old one's snapshot", names)
	}
}

// TestChangedSinceAfterTheLogStartsAgain publishes past the log's size:
// a subscriber that far behind compares whole, a recent one is told.
func TestChangedSinceAfterTheLogStartsAgain(t *testing.T) {
	var p publisher
	first := p.publish(map[string]bool{"first.p2p": true}, nil)
	for i := range 3 * logKeep / 100 {
		set := map[string]bool{}
		for j := range 100 {
			set[fmt.Sprintf("d%d-%d.p2p", i, j)] = true
		}
		p.publish(set, nil)
	}
	if names, ok := p.last.ChangedSince(first); ok {
		t.Fatalf("told %d names since a version the log dropped", len(names))
	}
	recent := p.all[len(p.all)-3]
	names, ok := p.last.ChangedSince(recent)
	if !ok {
		t.Fatal("not told since a recent version")
	}
	want := slices.Sorted(maps.Keys(differ(recent, p.last)))
	slices.Sort(names)
	if !slices.Equal(names, want) {
		t.Fatalf("names %d, want %d", len(names), len(want))
	}
	// Every version the log says it holds is whole.
	for _, s := range p.all {
		if s.Version+1 < p.last.log.from {
			continue
		}
		if _, ok := p.last.ChangedSince(s); !ok {
			t.Fatalf("v%d within the log (from %d) not told", s.Version, p.last.log.from)
		}
	}
}

// TestDeriveFromAnOlderSnapshot: of two snapshots derived from one
// parent, the second starts a lineage of its own: it does not write over
// the first's names, and neither tells the other "nothing changed".
func TestDeriveFromAnOlderSnapshot(t *testing.T) {
	var p publisher
	p.publish(map[string]bool{"a.p2p": true}, nil)
	p.publish(map[string]bool{"b.p2p": true}, nil)
	p.publish(map[string]bool{"c.p2p": true}, nil)
	base := p.publish(map[string]bool{"d.p2p": true}, nil) // three names logged: room for a fourth
	if cap(base.log.entries) == len(base.log.entries) {
		t.Fatalf("the log has no room to append in place (len %d): the test needs it", len(base.log.entries))
	}
	x := &Snapshot{Version: base.Version + 1, Domains: map[string]*Domain{}}
	Derive(base, x, []string{"x.p2p"})
	y := &Snapshot{Version: base.Version + 1, Domains: map[string]*Domain{}}
	Derive(base, y, []string{"y.p2p"})
	if names, _ := x.ChangedSince(base); !slices.Equal(names, []string{"x.p2p"}) {
		t.Fatalf("x: %v", names)
	}
	if names, ok := y.ChangedSince(base); ok {
		t.Fatalf("y, a branch, told %v since its parent", names)
	}
	if names, ok := y.ChangedSince(x); ok {
		t.Fatalf("y told %v since x, of the same version", names)
	}
	if names, _ := x.ChangedSince(base); !slices.Equal(names, []string{"x.p2p"}) {
		t.Fatalf("x after y: %v", names)
	}
}
