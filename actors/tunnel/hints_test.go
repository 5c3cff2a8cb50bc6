package tunnel

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"peerdns/internal/testutil"
	"peerdns/messages"
)

// hintLog records the hints published on a node's event stream.
type hintLog struct {
	mu    sync.Mutex
	types map[string]int
}

func subscribeHints(t testing.TB, n *testNode) *hintLog {
	h := &hintLog{types: map[string]int{}}
	sub := n.sys.EventStream.Subscribe(func(evt any) {
		if m, ok := evt.(*messages.Hint); ok {
			h.mu.Lock()
			h.types[m.Type]++
			h.mu.Unlock()
		}
	})
	t.Cleanup(func() { n.sys.EventStream.Unsubscribe(sub) })
	return h
}

func (h *hintLog) has(typ string) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.types[typ] == 0 {
		return fmt.Errorf("no %s hint in %v", typ, h.types)
	}
	return nil
}

func (h *hintLog) count(typ string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.types[typ]
}

// subscribe-all and unsubscribe-all broadcast update-tunnel-clients (the
// spec's Broadcast column) whether or not they made or deleted a client:
// the subscribe-all domains are listed with the clients.
func TestSubscribeAllHints(t *testing.T) {
	testutil.NoLeaks(t)
	tn := newTestNet(t, false)
	// The test ledger does not answer GetDomainTargets: the domain's
	// services are not learnt, and no client is made.
	n := tn.node(func(d *Deps) { d.ClaimTimeout = 50 * time.Millisecond })
	hints := subscribeHints(t, n)
	for i, req := range []any{&messages.SubscribeAll{Domain: "quiet.p2p"}, &messages.UnsubscribeAll{Domain: "quiet.p2p"}} {
		if r := ask[*messages.SubscriptionReply](t, n, req); r.Err != nil {
			t.Fatalf("%T: %v", req, r.Err)
		}
		testutil.Eventually(t, 5*time.Second, func() error {
			if got := hints.count(messages.HintTunnelClients); got <= i {
				return fmt.Errorf("after %T: %d update-tunnel-clients hints, want %d", req, got, i+1)
			}
			return nil
		})
	}
}
