package ledger

import (
	"cmp"
	"fmt"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"

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
	peers, connected := addConnectedWriters(t, l, 4)

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

// Beyond R a writer that joins or leaves the connected set is a voter of
// the domains whose replica set holds it, and only those are evaluated
// again: the others keep their result (and their evaluation count).
func TestPeerSetChangeReevaluatesOnlyItsReplicaSets(t *testing.T) {
	const r = 3
	var evals evaluations
	evaluated := evals.of
	l := newTestLedgerWith(t, t.TempDir(), func(d *Deps) {
		d.Replicas = r
		d.VoteGap, d.EvalGap = -1, -1
		d.DomainMiddleware = []actor.ReceiverMiddleware{evals.middleware}
	})
	peers, connected := addConnectedWriters(t, l, 8)
	network := *ask[*messages.GetSidecarStatusReply](t, l, &messages.GetSidecarStatus{}).Status.Key
	members := consensus.NewMembership(network, append([]string{l.id.ID()}, connected...), r)

	// Claims by peers[0] on names of both kinds for peers[7], the writer
	// that will leave: in its replica set, and not (and not in ours
	// either: no vote of ours evaluates those again later).
	leaver := peers[7].ID()
	var in, out []string
	for i := 0; len(in) < 3 || len(out) < 3; i++ {
		if i > 400 {
			t.Fatalf("400 names: %d with the leaver as a replica, %d without it or us", len(in), len(out))
		}
		name := fmt.Sprintf("d%d.p2p", i)
		op := sign(t, peers[0], &messages.Op{Seq: uint64(i + 1), HLC: messages.HLC{Wall: int64(i + 1)}, Key: messages.ClaimKey(name, peers[0].ID()), Value: `{"hash":"` + hashA + `"}`})
		if rep := ask[*messages.ApplyOpsReply](t, l, &messages.ApplyOps{From: "test", Ops: []*messages.Op{op}}); rep.Applied != 1 {
			t.Fatalf("claim %s: %+v", name, rep)
		}
		switch reps := members.Replicas(name); {
		case reps[leaver]:
			in = append(in, name)
		case !reps[l.id.ID()]:
			out = append(out, name)
		}
	}
	// Settled: every name's evaluation answered and recorded (the
	// metrics list the domains with a result).
	active := func(name string) int {
		return ask[*messages.GetConsensusReply](t, l, &messages.GetConsensus{Domain: name}).State.ActivePeers
	}
	testutil.Eventually(t, 5*time.Second, func() error {
		done := map[string]bool{}
		for _, d := range ask[*messages.GetConsensusMetricsReply](t, l, &messages.GetConsensusMetrics{}).Metrics.DomainResolutions {
			done[d.Domain] = true
		}
		for _, name := range append(append([]string{}, in...), out...) {
			if !done[name] || evaluated(name) == 0 {
				return fmt.Errorf("%s: no evaluation recorded yet", name)
			}
		}
		return nil
	})
	before := map[string]int{}
	for _, name := range append(append([]string{}, in...), out...) {
		before[name] = evaluated(name)
	}

	l.sys.Root.Send(l.pid, &messages.PeerSetChanged{Connected: connected[:7]})
	testutil.Eventually(t, 5*time.Second, func() error {
		for _, name := range in {
			if evaluated(name) == before[name] || active(name) != r-1 {
				return fmt.Errorf("%s (replica set holds the leaver): evaluations %d → %d, activePeers %d, want a new evaluation at %d", name, before[name], evaluated(name), active(name), r-1)
			}
		}
		return nil
	})
	for _, name := range out {
		if got := evaluated(name); got != before[name] {
			t.Errorf("%s (replica set without the leaver) evaluated again: %d → %d", name, before[name], got)
		}
		if got := active(name); got != r {
			t.Errorf("%s: activePeers %d, want %d", name, got, r)
		}
	}
}

// addConnectedWriters adds n new writers to l's network and reports them
// all connected.
func addConnectedWriters(t testing.TB, l *testLedger, n int) (peers []*identity.Identity, connected []string) {
	t.Helper()
	for range n {
		p, _ := identity.Generate()
		if rep := ask[*messages.AddWriterReply](t, l, &messages.AddWriter{ID: p.ID()}); rep.Err != nil {
			t.Fatal(rep.Err)
		}
		peers = append(peers, p)
		connected = append(connected, p.ID())
	}
	l.sys.Root.Send(l.pid, &messages.PeerSetChanged{Connected: connected})
	return peers, connected
}

// A connected peer counts as active from the moment it is a writer: a
// peer the node was connected to before the op that made it a writer
// (a joiner's inviter, a writer whose invite is still replicating)
// changes every domain's quorum when that op is applied.
func TestConnectedPeerBecomingWriterReevaluates(t *testing.T) {
	l := newTestLedger(t, t.TempDir())
	p, _ := identity.Generate()
	l.sys.Root.Send(l.pid, &messages.PeerSetChanged{Connected: []string{p.ID()}})
	const name = "quorum.p2p"
	if r := ask[*messages.AddDomainReply](t, l, &messages.AddDomain{Domain: name, Hash: hashA}); r.Err != nil {
		t.Fatal(r.Err)
	}
	if st := ask[*messages.GetConsensusReply](t, l, &messages.GetConsensus{Domain: name}).State; st.ActivePeers != 1 || st.Status != "resolved" {
		t.Fatalf("before: %+v, want resolved by our vote alone", st)
	}
	if rep := ask[*messages.AddWriterReply](t, l, &messages.AddWriter{ID: p.ID()}); rep.Err != nil {
		t.Fatal(rep.Err)
	}
	testutil.Eventually(t, 5*time.Second, func() error {
		st := ask[*messages.GetConsensusReply](t, l, &messages.GetConsensus{Domain: name}).State
		if st.ActivePeers != 2 || st.MinVotes != 2 || st.Status != "insufficient_quorum" {
			return fmt.Errorf("after the peer became a writer: status %s, activePeers %d, minVotes %d; want insufficient_quorum, 2, 2", st.Status, st.ActivePeers, st.MinVotes)
		}
		return nil
	})
}

// Beyond R a claim on a domain whose replica set does not hold us owes
// no vote of ours (AutoVote plans none): its evaluations are paced like
// any other change, not sent at once as for a claim we still vote on.
func TestNoVoteOwedOutsideTheReplicaSet(t *testing.T) {
	a := listingActor(0)
	a.d.Replicas = 2
	a.st.network = "net"
	writers := []string{a.st.self}
	var claimant *identity.Identity
	for range 4 {
		id, _ := identity.Generate()
		a.st.writers[id.ID()] = true
		writers = append(writers, id.ID())
		claimant = id
	}
	members := consensus.NewMembership("net", writers, 2)
	var in, out string
	for i := 0; in == "" || out == ""; i++ {
		if i > 400 {
			t.Fatal("no names in and out of our replica sets in 400")
		}
		name := fmt.Sprintf("n%d.p2p", i)
		if members.Replicas(name)[a.st.self] {
			in = cmp.Or(in, name)
		} else {
			out = cmp.Or(out, name)
		}
	}
	c := claimant.ID()
	for i, name := range []string{in, out} {
		op := &messages.Op{Writer: c, Seq: uint64(i + 1), HLC: messages.HLC{Wall: int64(i + 1)}, Key: messages.ClaimKey(name, c), Value: `{"hash":"` + hashA + `"}`}
		pk, _ := messages.ParseKey(op.Key)
		a.st.apply(op, []messages.ParsedKey{pk})
	}
	a.members() // as flush builds it before a round
	v := stateView{a}
	if !v.needsVote(in) {
		t.Errorf("%s (our replica set): no vote owed", in)
	}
	if v.needsVote(out) {
		t.Errorf("%s (not our replica set): a vote owed", out)
	}
}

// Beyond R our first claim of a domain carries our vote only when we are
// one of the domain's replicas: elsewhere AutoVote plans none (it would
// not count, and every node would store it for nothing).
func TestFirstClaimVotesOnlyInOurReplicaSet(t *testing.T) {
	l := newTestLedgerWith(t, t.TempDir(), func(d *Deps) { d.Replicas = 2 })
	_, connected := addConnectedWriters(t, l, 4)
	sc := ask[*messages.GetSidecarStatusReply](t, l, &messages.GetSidecarStatus{}).Status
	members := consensus.NewMembership(*sc.Key, append([]string{l.id.ID()}, connected...), 2)
	var in, out string
	for i := 0; in == "" || out == ""; i++ {
		if i > 400 {
			t.Fatal("no names in and out of our replica sets in 400")
		}
		name := fmt.Sprintf("f%d.p2p", i)
		if members.Replicas(name)[l.id.ID()] {
			in = cmp.Or(in, name)
		} else {
			out = cmp.Or(out, name)
		}
	}
	for _, name := range []string{in, out} {
		if r := ask[*messages.AddDomainReply](t, l, &messages.AddDomain{Domain: name, Hash: hashA}); r.Err != nil {
			t.Fatalf("AddDomain(%s): %v", name, r.Err)
		}
	}
	votes := map[string]bool{}
	for _, e := range ask[*messages.GetEntriesReply](t, l, &messages.GetEntries{}).Entries {
		if pk, err := messages.ParseKey(e.Key); err == nil && pk.Kind == messages.KeyVote && pk.Writer == l.id.ID() {
			votes[pk.Domain] = true
		}
	}
	if !votes[in] {
		t.Errorf("%s (our replica set): no vote of ours with our claim", in)
	}
	if votes[out] {
		t.Errorf("%s (not our replica set): our claim carried our vote", out)
	}
}
