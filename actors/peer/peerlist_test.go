package peer

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"peerdns/internal/testutil"
)

// A neighbour does not relay to us the ops of writers our last peer list
// named, so the list goes out again as soon as a session ends (its peer
// failed, left, or we dropped it) or goes silent, not at the next
// exchange tick: until then nobody would relay that writer's new ops to
// us.
func TestPeerListSentWhenALinkEndsOrGoesSilent(t *testing.T) {
	r := newSessionsRig(t)
	r.a.d.ExchangeInterval = time.Hour // only the change can send a list in this test

	// Each neighbour's session records the peer lists it is asked to send.
	var mu sync.Mutex
	lists := map[string][][]string{}
	ids := []string{strings.Repeat("1", 64), strings.Repeat("2", 64), strings.Repeat("5", 64), strings.Repeat("3", 64), strings.Repeat("4", 64)}
	pids := map[string]*actor.PID{}
	for _, id := range ids {
		pids[id] = r.sys.Root.Spawn(actor.PropsFromFunc(func(c actor.Context) {
			if m, ok := c.Message().(*sendPeers); ok {
				var names []string
				for _, p := range m.peers {
					names = append(names, p.ID)
				}
				mu.Lock()
				lists[id] = append(lists[id], names)
				mu.Unlock()
			}
		}))
	}
	// latest is the last list id's session was asked to send, once it
	// has been asked n times.
	latest := func(id string, n int) []string {
		t.Helper()
		var last []string
		testutil.Eventually(t, 5*time.Second, func() error {
			mu.Lock()
			defer mu.Unlock()
			if got := lists[id]; len(got) < n {
				return fmt.Errorf("%.8s was asked to send %d peer lists, want %d", id, len(got), n)
			}
			last = lists[id][len(lists[id])-1]
			return nil
		})
		return last
	}
	names := slices.Contains[[]string]

	failed, dropped, quiet, kept := ids[0], ids[1], ids[2], ids[3:]
	r.run(func(c actor.Context) {
		for _, id := range ids {
			r.a.sessions[id] = &sessionEntry{up: true, pid: pids[id]}
		}
		r.a.exchange(c)
	})
	for _, id := range kept {
		if l := latest(id, 1); !names(l, failed) || !names(l, dropped) {
			t.Fatalf("first list to %.8s: %v, want both other neighbours named", id, l)
		}
	}

	// A session that ends: the others hear at once that we lost it.
	r.run(func(c actor.Context) { r.a.onTerminated(c, pids[failed]) })
	for _, id := range kept {
		if l := latest(id, 2); names(l, failed) {
			t.Fatalf("after its session ended, the list to %.8s still names %.8s: %v", id, failed, l)
		}
	}

	// A neighbour we drop from the view: the same.
	r.run(func(c actor.Context) { r.a.sendLeave(c, dropped) })
	for _, id := range kept {
		if l := latest(id, 3); names(l, dropped) {
			t.Fatalf("after we dropped it, the list to %.8s: %v, want %.8s gone", id, l, dropped)
		}
	}

	// A silent neighbour is left out while silent, and named again once
	// heard.
	r.run(func(c actor.Context) { r.a.onSilent(c, &peerSilent{id: quiet, silent: true}) })
	for _, id := range kept {
		if l := latest(id, 4); names(l, quiet) {
			t.Fatalf("while %.8s is silent, the list to %.8s names it: %v", quiet, id, l)
		}
	}
	r.run(func(c actor.Context) { r.a.onSilent(c, &peerSilent{id: quiet, silent: false}) })
	for _, id := range kept {
		if l := latest(id, 5); !names(l, quiet) {
			t.Fatalf("once %.8s is heard again, the list to %.8s does not name it: %v", quiet, id, l)
		}
	}
}
