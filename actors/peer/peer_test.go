package peer

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"peerdns/internal/testutil"
	"peerdns/messages"
)

func hash(c byte) string { return "hs://" + strings.Repeat(string(c), 64) }

func TestThreeNodesJoinDiscoverAndReplicate(t *testing.T) {
	a := newTestNode(t, "A", nodeOpts{})
	b := joinNode(t, "B", a)
	// C is invited by B (not the master) and only knows B's address: it
	// must find A by peer exchange.
	c := joinNode(t, "C", b)
	waitMesh(t, 20*time.Second, a, b, c)

	st := ask[*messages.GetPeerStatusReply](t, a.sys, a.peers, &messages.GetPeerStatus{})
	if !st.IsMaster || !st.IsConnected || st.PeersCount != 2 {
		t.Fatalf("A status = %+v, want master, connected, 2 peers", st)
	}
	if st := ask[*messages.GetPeerStatusReply](t, c.sys, c.peers, &messages.GetPeerStatus{}); st.IsMaster || st.PeersCount != 2 {
		t.Fatalf("C status = %+v, want non-master with 2 peers", st)
	}

	a.addDomain("alpha.p2p", hash('a'))
	c.addDomain("gamma.p2p", hash('c'))
	waitConverged(t, 20*time.Second, a, b, c)
	testutil.Eventually(t, 20*time.Second, func() error {
		for _, n := range []*testNode{a, b, c} {
			ds := n.domains()
			for name, want := range map[string]string{"alpha.p2p": hash('a'), "gamma.p2p": hash('c')} {
				d, ok := ds[name]
				if !ok || d.ConsensusState == nil || d.ConsensusState.Status != "resolved" || d.Hash != want {
					return fmt.Errorf("%s sees %s as %+v", n.name, name, d)
				}
				if d.ConsensusState.ActivePeers != 3 || d.ConsensusState.MinVotes != 2 {
					return fmt.Errorf("%s %s activePeers=%d minVotes=%d", n.name, name, d.ConsensusState.ActivePeers, d.ConsensusState.MinVotes)
				}
			}
		}
		return nil
	})
}
