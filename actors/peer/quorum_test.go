package peer

import (
	"fmt"
	"testing"
	"time"

	"peerdns/internal/testutil"
	"peerdns/messages"
)

// TestQuorumFollowsConnectedPeers checks that the connected set the
// supervisor reports (PeerSetChanged) is what consensus counts as active
// peers, as peers leave and come back.
//
// Each check asks the ledger to recalculate first: as of this writing the
// ledger re-evaluates domains on PeerSetChanged but the domain actors
// answer from a cache keyed by the ops version only, so activePeers would
// stay stale until the next op on the domain (reported to the lead).
func TestQuorumFollowsConnectedPeers(t *testing.T) {
	a := newTestNode(t, "A", nodeOpts{})
	b := joinNode(t, "B", a)
	c := joinNode(t, "C", a)
	waitMesh(t, 15*time.Second, a, b, c)
	a.addDomain("q.p2p", hash('a'))
	state := func(n *testNode) *messages.ConsensusState {
		if r := ask[*messages.RecalculateReply](t, n.sys, n.ledger, &messages.Recalculate{Domain: "q.p2p"}); r.Err != nil {
			t.Fatalf("%s recalculate: %v", n.name, r.Err)
		}
		return n.domains()["q.p2p"].ConsensusState
	}
	want := func(n *testNode, active int) func() error {
		return func() error {
			s := state(n)
			if s == nil || s.ActivePeers != active || s.Status != "resolved" {
				return fmt.Errorf("%s: %+v, want %d active and resolved", n.name, s, active)
			}
			return nil
		}
	}
	for _, n := range []*testNode{a, b, c} {
		testutil.Eventually(t, 15*time.Second, want(n, 3))
	}
	b.stop()
	testutil.Eventually(t, 15*time.Second, want(a, 2))
	c.stop()
	testutil.Eventually(t, 15*time.Second, want(a, 1))
	b.restart()
	c.restart()
	waitMesh(t, 15*time.Second, a, b, c)
	for _, n := range []*testNode{a, b, c} {
		testutil.Eventually(t, 15*time.Second, want(n, 3))
	}
}
