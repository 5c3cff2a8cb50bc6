package ledger

import (
	"fmt"
	"maps"
	"slices"
	"sync"
	"testing"
	"time"

	"peerdns/internal/testutil"
	"peerdns/internal/view"
	"peerdns/messages"
)

const hashB = "hs://bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"

// The incrementally published view (only changed domains rebuilt) equals
// the view a restarted ledger builds from scratch, after claims sent in
// bursts, removals and hash changes; and every view a subscriber gets
// names the domains that changed since the one it got before.
func TestIncrementalPublishMatchesFullBuild(t *testing.T) {
	dir := t.TempDir()
	l := newTestLedger(t, dir)
	var mu sync.Mutex
	var got []*view.Snapshot
	unsub := l.pub.Subscribe(func(s *view.Snapshot) {
		mu.Lock()
		got = append(got, s)
		mu.Unlock()
	})
	// The views at each step, as a reader loads them (the subscriber's
	// may be fewer: it gets the newest when it runs).
	var steps []*view.Snapshot
	step := func() {
		if s := l.pub.Load(); s != nil {
			steps = append(steps, s)
		}
	}
	step()
	var futures []func()
	for i := range 60 {
		f := l.sys.Root.RequestFuture(l.pid, &messages.AddDomain{Domain: fmt.Sprintf("d%02d.p2p", i), Hash: hashA}, 5*time.Second)
		futures = append(futures, func() {
			if r, err := f.Result(); err != nil || r.(*messages.AddDomainReply).Err != nil {
				t.Fatalf("add d%02d: %v %+v", i, err, r)
			}
		})
	}
	for _, wait := range futures {
		wait()
	}
	step()
	for i := range 10 {
		if r := ask[*messages.RemoveDomainReply](t, l, &messages.RemoveDomain{Domain: fmt.Sprintf("d%02d.p2p", i)}); r.Err != nil {
			t.Fatal(r.Err)
		}
	}
	step()
	for i := 10; i < 15; i++ {
		if r := ask[*messages.AddDomainReply](t, l, &messages.AddDomain{Domain: fmt.Sprintf("d%02d.p2p", i), Hash: hashB, SSL: true}); r.Err != nil {
			t.Fatal(r.Err)
		}
	}
	incremental := domainsOf(l.pub.Load())
	if len(incremental) != 50 || incremental["d12.p2p"].Hash != hashB || !incremental["d12.p2p"].SSL {
		t.Fatalf("incremental view: %d domains, d12 = %+v", len(incremental), incremental["d12.p2p"])
	}
	testutil.Eventually(t, 5*time.Second, func() error {
		mu.Lock()
		defer mu.Unlock()
		if len(got) == 0 || got[len(got)-1] != l.pub.Load() {
			return fmt.Errorf("the subscriber has not had the last view yet")
		}
		return nil
	})
	unsub()
	step()
	checkNamedChanges(t, steps)
	if len(got) > 1 { // one when the subscriber first ran after the last publish
		checkNamedChanges(t, got)
	}
	l.stop()

	l2 := newTestLedger(t, dir)
	testutil.Eventually(t, 5*time.Second, func() error {
		full := domainsOf(l2.pub.Load())
		if !maps.Equal(full, incremental) {
			return fmt.Errorf("full build after restart differs:\n full %v\n incr %v", full, incremental)
		}
		return nil
	})
}

// checkNamedChanges checks that each view names every domain whose entry
// differs from the view before it, and the last every one since the first:
// what a walk of both finds (the views' copies without their names).
func checkNamedChanges(t *testing.T, views []*view.Snapshot) {
	t.Helper()
	if len(views) < 2 {
		t.Fatalf("%d views: too few to check", len(views))
	}
	check := func(a, b *view.Snapshot) {
		names, ok := b.ChangedSince(a)
		if !ok {
			t.Fatalf("v%d does not name its changes since v%d", b.Version, a.Version)
		}
		walked := (&view.Snapshot{Domains: b.Domains}).Changed(&view.Snapshot{Domains: a.Domains})
		for _, name := range walked {
			if !slices.Contains(names, name) {
				t.Fatalf("v%d since v%d: %s changed, not named", b.Version, a.Version, name)
			}
		}
	}
	for i := 1; i < len(views); i++ {
		check(views[i-1], views[i])
	}
	check(views[0], views[len(views)-1])
}

func domainsOf(s *view.Snapshot) map[string]view.Domain {
	out := map[string]view.Domain{}
	if s == nil {
		return out
	}
	for name, d := range s.Domains {
		out[name] = *d
	}
	return out
}
