package tunnel

import (
	"fmt"
	"sync"
	"testing"

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
