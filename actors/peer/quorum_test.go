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
// peers, as peers leave and come back, with no recalculation asked for:
// a peer-set change alone re-evaluates every domain.
func TestQuorumFollowsConnectedPeers(t *testing.T) {
	a := newTestNode(t, "A", nodeOpts{})
	b := joinNode(t, "B", a)
	c := joinNode(t, "C", a)
	waitMesh(t, 15*time.Second, a, b, c)
	a.addDomain("q.p2p", hash('a'))
	state := func(n *testNode) *messages.ConsensusState {
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
