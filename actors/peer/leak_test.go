package peer

import (
	"fmt"
	"testing"
	"time"

	"peerdns/internal/testutil"
	"peerdns/messages"
)

// Every test that starts a node checks for leaked goroutines when its
// nodes stopped (checkLeaks in the harness); this one stops them inside
// the test, with sessions up and a dialer retrying, so a leak fails here.
func TestStopLeavesNoGoroutines(t *testing.T) {
	checkLeaks(t)
	a := newTestNode(t, "A", nodeOpts{})
	b := joinNode(t, "B", a)
	// C keeps dialing an address where nobody answers.
	c := newTestNode(t, "C", nodeOpts{bootstrap: []string{"127.0.0.1:9"}})
	waitMesh(t, 15*time.Second, a, b)
	a.stop()
	b.stop()
	c.stop()
}

func TestPeerHintsPublished(t *testing.T) {
	a := newTestNode(t, "A", nodeOpts{})
	hints := make(chan string, 64)
	sub := a.sys.EventStream.Subscribe(func(evt any) {
		if h, ok := evt.(*messages.Hint); ok && h.Type == messages.HintPeers {
			select {
			case hints <- h.Type:
			default:
			}
		}
	})
	t.Cleanup(func() { a.sys.EventStream.Unsubscribe(sub) })
	drain := func() int {
		n := 0
		for {
			select {
			case <-hints:
				n++
			default:
				return n
			}
		}
	}
	b := joinNode(t, "B", a)
	waitMesh(t, 15*time.Second, a, b)
	testutil.Eventually(t, 5*time.Second, func() error {
		if drain() == 0 {
			return fmt.Errorf("no %s hint on connect", messages.HintPeers)
		}
		return nil
	})
	b.stop()
	testutil.Eventually(t, 10*time.Second, func() error {
		if drain() == 0 {
			return fmt.Errorf("no %s hint on disconnect", messages.HintPeers)
		}
		return nil
	})
	if len(a.peerIDs()) != 0 {
		t.Fatal("B still listed after the hint")
	}
}
