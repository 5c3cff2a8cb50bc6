package ledger

import (
	"fmt"
	"testing"
	"time"

	"peerdns/actors/consensus"
	"peerdns/internal/testutil"
	"peerdns/messages"
)

// A domain whose every claim and vote is deleted and that is claimed
// again within one batch of peers' ops comes back as a new index. Its
// version must not repeat one its domain actor cached: the actor would
// answer the old claimant's result (cached by version and epoch) for
// the new claims, and this node would serve the old hash while a node
// that applied the same ops one at a time serves the new one.
func TestDomainClaimedAgainInOneBatchIsEvaluatedAgain(t *testing.T) {
	const r = 3
	l := newTestLedgerWith(t, t.TempDir(), func(d *Deps) { d.Replicas = r; d.VoteGap = -1; d.EvalGap = -1 })
	peers, connected := addConnectedWriters(t, l, 4)
	network := *ask[*messages.GetSidecarStatusReply](t, l, &messages.GetSidecarStatus{}).Status.Key
	members := consensus.NewMembership(network, append([]string{l.id.ID()}, connected...), r)

	// A name we do not vote on (so nothing of ours keeps its index
	// alive), whose replica set holds two of the peers.
	var name string
	var p, q int
	for i := 0; name == ""; i++ {
		if i > 400 {
			t.Fatal("no name in 400 with two peers and not us as replicas")
		}
		n := fmt.Sprintf("d%d.p2p", i)
		reps := members.Replicas(n)
		if reps[l.id.ID()] {
			continue
		}
		var in []int
		for j, pr := range peers {
			if reps[pr.ID()] {
				in = append(in, j)
			}
		}
		if len(in) >= 2 {
			name, p, q = n, in[0], in[1]
		}
	}
	P, Q := peers[p], peers[q]
	apply := func(ops ...*messages.Op) {
		t.Helper()
		if rep := ask[*messages.ApplyOpsReply](t, l, &messages.ApplyOps{From: "test", Ops: ops}); rep.Applied != len(ops) {
			t.Fatalf("apply: %+v", rep)
		}
	}
	resolved := func(claimant, hash string) func() error {
		return func() error {
			st := ask[*messages.GetConsensusReply](t, l, &messages.GetConsensus{Domain: name}).State
			if st.ResolvedClaimant == nil || *st.ResolvedClaimant != claimant || *st.Hash != hash {
				got := "none"
				if st.ResolvedClaimant != nil {
					got = fmt.Sprintf("%.8s with %s", *st.ResolvedClaimant, *st.Hash)
				}
				return fmt.Errorf("consensus of %s: %s resolved (votes %v), want %.8s with %s", name, got, st.VoteCounts, claimant, hash)
			}
			s := l.pub.Load()
			if s == nil {
				return fmt.Errorf("no snapshot")
			}
			if d, ok := s.Lookup(name); !ok || d.Claimant != claimant || d.Hash != hash {
				return fmt.Errorf("snapshot serves %s as %+v, want %.8s with %s", name, d, claimant, hash)
			}
			return nil
		}
	}
	now := time.Now().UnixMilli()
	// P claims and both vote for P: three writes to the domain's index.
	apply(
		sign(t, P, &messages.Op{Seq: 1, HLC: messages.HLC{Wall: now}, Batch: []messages.Write{
			{Key: messages.ClaimKey(name, P.ID()), Value: `{"hash":"` + hashA + `"}`},
			{Key: messages.VoteKey(name, P.ID(), P.ID()), Value: messages.VoteMarker},
		}}),
		sign(t, Q, &messages.Op{Seq: 1, HLC: messages.HLC{Wall: now + 1}, Key: messages.VoteKey(name, Q.ID(), P.ID()), Value: messages.VoteMarker}),
	)
	testutil.Eventually(t, 5*time.Second, resolved(P.ID(), hashA))

	// In one batch: P drops its claim and vote and Q its vote (the
	// domain is empty), then Q claims with another hash and both vote
	// for Q: again three writes to the new index.
	apply(
		sign(t, P, &messages.Op{Seq: 2, HLC: messages.HLC{Wall: now + 2}, Batch: []messages.Write{
			{Key: messages.ClaimKey(name, P.ID()), Delete: true},
			{Key: messages.VoteKey(name, P.ID(), P.ID()), Delete: true},
		}}),
		sign(t, Q, &messages.Op{Seq: 2, HLC: messages.HLC{Wall: now + 3}, Key: messages.VoteKey(name, Q.ID(), P.ID()), Delete: true}),
		sign(t, Q, &messages.Op{Seq: 3, HLC: messages.HLC{Wall: now + 4}, Batch: []messages.Write{
			{Key: messages.ClaimKey(name, Q.ID()), Value: `{"hash":"` + hashB + `"}`},
			{Key: messages.VoteKey(name, Q.ID(), Q.ID()), Value: messages.VoteMarker},
		}}),
		sign(t, P, &messages.Op{Seq: 3, HLC: messages.HLC{Wall: now + 5}, Key: messages.VoteKey(name, P.ID(), Q.ID()), Value: messages.VoteMarker}),
	)
	testutil.Eventually(t, 3*time.Second, resolved(Q.ID(), hashB))
}
