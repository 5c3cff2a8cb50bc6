package ledger

import (
	"fmt"
	"maps"
	"testing"
	"time"

	"peerdns/internal/testutil"
	"peerdns/internal/view"
	"peerdns/messages"
)

const hashB = "hs://bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"

// The incrementally published view (only changed domains rebuilt) equals
// the view a restarted ledger builds from scratch, after claims sent in
// bursts, removals and hash changes.
func TestIncrementalPublishMatchesFullBuild(t *testing.T) {
	dir := t.TempDir()
	l := newTestLedger(t, dir)
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
	for i := range 10 {
		if r := ask[*messages.RemoveDomainReply](t, l, &messages.RemoveDomain{Domain: fmt.Sprintf("d%02d.p2p", i)}); r.Err != nil {
			t.Fatal(r.Err)
		}
	}
	for i := 10; i < 15; i++ {
		if r := ask[*messages.AddDomainReply](t, l, &messages.AddDomain{Domain: fmt.Sprintf("d%02d.p2p", i), Hash: hashB, SSL: true}); r.Err != nil {
			t.Fatal(r.Err)
		}
	}
	incremental := domainsOf(l.pub.Load())
	if len(incremental) != 50 || incremental["d12.p2p"].Hash != hashB || !incremental["d12.p2p"].SSL {
		t.Fatalf("incremental view: %d domains, d12 = %+v", len(incremental), incremental["d12.p2p"])
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
