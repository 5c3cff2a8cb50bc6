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
	"peerdns/messages"
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
	r.run(func(c actor.Context) { r.a.onSilent(c, &peerSilent{pid: pids[quiet], id: quiet, silent: true}) })
	for _, id := range kept {
		if l := latest(id, 4); names(l, quiet) {
			t.Fatalf("while %.8s is silent, the list to %.8s names it: %v", quiet, id, l)
		}
	}
	r.run(func(c actor.Context) { r.a.onSilent(c, &peerSilent{pid: pids[quiet], id: quiet, silent: false}) })
	for _, id := range kept {
		if l := latest(id, 5); !names(l, quiet) {
			t.Fatalf("once %.8s is heard again, the list to %.8s does not name it: %v", quiet, id, l)
		}
	}
}

// A node left with one neighbour still tells it so: the list it sent
// while it had two named the other, and a neighbour relays to us
// neither the ops of a writer our last list named nor answers our
// vectors with them. Unsent because one neighbour "gains nothing from
// hearing about itself", the old list kept the writer's ops from us for
// as long as the session lasted (and our withholding check then dropped
// the honest neighbour).
func TestLoneNeighbourRelaysOpsOfAWriterWeLost(t *testing.T) {
	nodes := memMesh(t, "A", "B", "C")
	a, b, c := nodes[0], nodes[1], nodes[2]
	cid := c.id.ID()
	seq := b.vv()[cid] + 1
	c.stop()
	testutil.Eventually(t, 10*time.Second, func() error {
		if got := a.peerIDs(); len(got) != 1 || got[0] != b.id.ID() {
			return fmt.Errorf("A peers %v, want B alone", shortAll(got))
		}
		return nil
	})
	// An op C signed before it went that reached B alone.
	op := &messages.Op{Writer: cid, Seq: seq, HLC: messages.HLC{Wall: time.Now().UnixMilli()},
		Key: messages.ClaimKey("lost.p2p", cid), Value: `{"hash":"` + hash('c') + `"}`}
	sb, err := op.SigningBytes()
	if err != nil {
		t.Fatal(err)
	}
	op.Sig = c.id.Sign(sb)
	if r := ask[*messages.ApplyOpsReply](t, b.sys, b.ledger, &messages.ApplyOps{Ops: []*messages.Op{op}}); r.Rejected != 0 || r.Gaps != 0 {
		t.Fatalf("B did not apply C's op: %+v", r)
	}
	testutil.Eventually(t, 10*time.Second, func() error {
		if got := a.vv()[cid]; got < seq {
			return fmt.Errorf("A holds C's ops up to %d, want %d (withholding drops %d)", got, seq, diag(t, a).Summary.Overlay.Withholding)
		}
		return nil
	})
	if w := diag(t, a).Summary.Overlay.Withholding; w != 0 {
		t.Fatalf("A dropped %d neighbours as withholding", w)
	}
}
