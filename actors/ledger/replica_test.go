package ledger

import (
	"fmt"
	"testing"
	"time"

	"peerdns/actors/consensus"
	"peerdns/internal/testutil"
	"peerdns/messages"
	"peerdns/transport/identity"
)

// Beyond R writers a domain is voted on by its replica set only: the
// node auto-votes on the domains whose replica set holds it and on no
// other, and ConsensusState counts the replica set's active members.
func TestReplicaSetBeyondR(t *testing.T) {
	const r = 3
	l := newTestLedgerWith(t, t.TempDir(), func(d *Deps) { d.Replicas = r; d.VoteGap = -1; d.EvalGap = -1 })
	var peers []*identity.Identity
	var connected []string
	for range 4 {
		p, _ := identity.Generate()
		if rep := ask[*messages.AddWriterReply](t, l, &messages.AddWriter{ID: p.ID()}); rep.Err != nil {
			t.Fatal(rep.Err)
		}
		peers = append(peers, p)
		connected = append(connected, p.ID())
	}
	l.sys.Root.Send(l.pid, &messages.PeerSetChanged{Connected: connected})

	sc := ask[*messages.GetSidecarStatusReply](t, l, &messages.GetSidecarStatus{}).Status
	if sc.Key == nil {
		t.Fatal("the ledger has no network id")
	}
	network := *sc.Key
	writers := []string{l.id.ID()}
	writers = append(writers, connected...)
	members := consensus.NewMembership(network, writers, r)

	claimant := peers[0]
	in, out := 0, 0
	for i := 0; in < 3 || out < 3; i++ {
		if i > 200 {
			t.Fatalf("200 names and the node is in %d replica sets, out of %d", in, out)
		}
		name := fmt.Sprintf("d%d.p2p", i)
		reps := members.Replicas(name)
		if len(reps) != r {
			t.Fatalf("replica set of %s = %v, want %d writers", name, reps, r)
		}
		op := sign(t, claimant, &messages.Op{Seq: uint64(i + 1), HLC: messages.HLC{Wall: int64(i + 1)}, Key: messages.ClaimKey(name, claimant.ID()), Value: `{"hash":"` + hashA + `"}`})
		if rep := ask[*messages.ApplyOpsReply](t, l, &messages.ApplyOps{From: "test", Ops: []*messages.Op{op}}); rep.Applied != 1 {
			t.Fatalf("claim %s: %+v", name, rep)
		}
		voteKey := messages.VoteKey(name, l.id.ID(), claimant.ID())
		if reps[l.id.ID()] {
			in++
			testutil.Eventually(t, 5*time.Second, func() error {
				for _, e := range ask[*messages.GetEntriesReply](t, l, &messages.GetEntries{}).Entries {
					if e.Key == voteKey {
						return nil
					}
				}
				return fmt.Errorf("no vote by the node on %s, whose replica set holds it", name)
			})
		} else {
			out++
		}
		st := ask[*messages.GetConsensusReply](t, l, &messages.GetConsensus{Domain: name}).State
		if st.ActivePeers != r || st.MinVotes != r/2+1 {
			t.Fatalf("%s: activePeers %d minVotes %d, want the replica set's %d and %d", name, st.ActivePeers, st.MinVotes, r, r/2+1)
		}
	}
	// The node never voted outside its replica sets (checked after the
	// last claim, so a late vote would show).
	for _, e := range ask[*messages.GetEntriesReply](t, l, &messages.GetEntries{}).Entries {
		pk, err := messages.ParseKey(e.Key)
		if err != nil || pk.Kind != messages.KeyVote || pk.Writer != l.id.ID() {
			continue
		}
		if !members.Replicas(pk.Domain)[l.id.ID()] {
			t.Fatalf("the node voted on %s, whose replica set %v does not hold it", pk.Domain, members.Replicas(pk.Domain))
		}
	}
}
