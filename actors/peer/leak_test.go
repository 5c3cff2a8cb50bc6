package peer

import (
	"fmt"
	"slices"
	"sync/atomic"
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

// A node publishes a peers hint when a peer connects and when it goes,
// and once B has gone from A's list, a hint has come since it was last
// listed. (As B stops, A may see a second session to B come up as the
// first ends, for the moment before that one ends too: the check is on
// where the list ends, not on its first change.)
func TestPeerHintsPublished(t *testing.T) {
	a := newTestNode(t, "A", nodeOpts{})
	var hints atomic.Int64
	sub := a.sys.EventStream.Subscribe(func(evt any) {
		if h, ok := evt.(*messages.Hint); ok && h.Type == messages.HintPeers {
			hints.Add(1)
		}
	})
	t.Cleanup(func() { a.sys.EventStream.Unsubscribe(sub) })
	before := hints.Load()
	b := joinNode(t, "B", a)
	waitMesh(t, 15*time.Second, a, b)
	testutil.Eventually(t, 5*time.Second, func() error {
		if hints.Load() == before {
			return fmt.Errorf("no %s hint on connect", messages.HintPeers)
		}
		return nil
	})
	// B is listed now; the hints published so far tell of that.
	listed := hints.Load()
	b.stop()
	testutil.Eventually(t, 10*time.Second, func() error {
		seen := hints.Load() // read before asking: a hint after the answer counts past it
		if slices.Contains(a.peerIDs(), b.id.ID()) {
			listed = seen
			return fmt.Errorf("B still listed")
		}
		if hints.Load() == listed {
			return fmt.Errorf("no %s hint since B was last listed", messages.HintPeers)
		}
		return nil
	})
}
