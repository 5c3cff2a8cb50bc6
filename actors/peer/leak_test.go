package peer

import (
	"fmt"
	"runtime"
	"testing"
	"time"

	"peerdns/internal/testutil"
	"peerdns/messages"
)

func TestStopLeavesNoGoroutines(t *testing.T) {
	base := runtime.NumGoroutine()
	a := newTestNode(t, "A", nodeOpts{})
	b := joinNode(t, "B", a)
	// C keeps dialing an address where nobody answers.
	c := newTestNode(t, "C", nodeOpts{bootstrap: []string{"127.0.0.1:9"}})
	waitMesh(t, 15*time.Second, a, b)
	a.stop()
	b.stop()
	c.stop()
	testutil.Eventually(t, 10*time.Second, func() error {
		if n := runtime.NumGoroutine(); n > base {
			buf := make([]byte, 1<<16)
			return fmt.Errorf("%d goroutines left:\n%s", n-base, buf[:runtime.Stack(buf, true)])
		}
		return nil
	})
}

func TestPeerHintsPublished(t *testing.T) {
	a := newTestNode(t, "A", nodeOpts{})
	hints := make(chan string, 64)
	a.sys.EventStream.Subscribe(func(evt any) {
		if h, ok := evt.(*messages.Hint); ok && h.Type == messages.HintPeers {
			select {
			case hints <- h.Type:
			default:
			}
		}
	})
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
