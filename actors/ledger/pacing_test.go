package ledger

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"peerdns/actors/consensus"
	"peerdns/actors/domain"
	"peerdns/internal/testutil"
	"peerdns/messages"
	"peerdns/transport/identity"
)

// ownSeq is the last seq of the ledger's own ops, read with a peer
// request (which neither waits for nor triggers anything).
func ownSeq(t *testing.T, l *testLedger) uint64 {
	return ask[*messages.GetVersionVectorReply](t, l, &messages.GetVersionVector{}).VV[l.id.ID()]
}

// ownOps are the ledger's own ops after seq.
func ownOps(t *testing.T, l *testLedger, after uint64) []*messages.Op {
	var out []*messages.Op
	for _, op := range ask[*messages.GetOpsSinceReply](t, l, &messages.GetOpsSince{VV: messages.VersionVector{l.id.ID(): after}}).Ops {
		if op.Writer == l.id.ID() {
			out = append(out, op)
		}
	}
	return out
}

// withGap runs a pacing scenario with gap, and again with twice the gap
// while the machine was too slow for it: a scenario returns false when
// what it must do within one gap (measured from an instant no later
// than the one the ledger's gap counts from) took longer, so its outcome
// says nothing about pacing. A scenario is only ever judged on a run
// whose premise held; past 16 times the first gap the test fails.
func withGap(t *testing.T, gap time.Duration, scenario func(gap time.Duration) bool) {
	t.Helper()
	for g := gap; g <= 16*gap; g *= 2 {
		if scenario(g) {
			return
		}
		t.Logf("the machine was too slow for the scenario within %v; again with twice the gap", g)
	}
	t.Fatalf("the machine was too slow for the scenario even within %v", 16*gap)
}

// A claim that follows the previous commit by less than ClaimGap waits
// for the rest of the gap, and the claims that arrive meanwhile join its
// op: here the second claim is handled (and, unpaced, would be committed)
// before the third is even sent, and both go out in one op.
func TestClaimCommitsPaced(t *testing.T) {
	withGap(t, time.Second, func(gap time.Duration) bool {
		l := newTestLedgerWith(t, t.TempDir(), func(d *Deps) { d.ClaimGap = gap })
		defer l.stop()
		// The commit of "first" is no earlier than this: the gap the
		// later claims wait for ends no earlier than start+gap.
		start := time.Now()
		if r := ask[*messages.AddDomainReply](t, l, &messages.AddDomain{Domain: "first.p2p", Hash: hashA}); r.Err != nil {
			t.Fatal(r.Err)
		}
		before := ownSeq(t, l)
		second := l.sys.Root.RequestFuture(l.pid, &messages.AddDomain{Domain: "second.p2p", Hash: hashA}, gap+10*time.Second)
		// Two round trips: an unpaced commit of "second" (a self-message
		// queued while it was handled) would have run before the second one.
		ownSeq(t, l)
		got := ownSeq(t, l)
		if time.Since(start) >= gap {
			return false // the paced commit may have run by now
		}
		if got != before {
			t.Fatalf("the second claim was committed at once (seq %d → %d): not paced", before, got)
		}
		third := l.sys.Root.RequestFuture(l.pid, &messages.AddDomain{Domain: "third.p2p", Hash: hashA}, gap+10*time.Second)
		ownSeq(t, l) // handled after "third": it was queued by now
		if time.Since(start) >= gap {
			return false // "third" may have come after the paced commit
		}
		for name, f := range map[string]interface{ Result() (any, error) }{"second": second, "third": third} {
			if r, err := f.Result(); err != nil || r.(*messages.AddDomainReply).Err != nil {
				t.Fatalf("%s: %v %+v", name, err, r)
			}
		}
		ops := ownOps(t, l, before)
		if len(ops) != 1 || ops[0].NumWrites() != 4 { // two claims, each with our vote
			t.Fatalf("after the paced commit: %d ops, want 1 with both claims and votes: %+v", len(ops), ops)
		}
		return true
	})
}

// evaluations counts the Evaluate requests domain actors receive, per
// domain (a DomainMiddleware).
type evaluations struct {
	mu sync.Mutex
	n  map[string]int
}

func (e *evaluations) middleware(next actor.ReceiverFunc) actor.ReceiverFunc {
	return func(c actor.ReceiverContext, env *actor.MessageEnvelope) {
		next(c, env)
		if ev, ok := env.Message.(*domain.Evaluate); ok {
			// Counted once handled: its answer is on its way to the
			// ledger, ahead of anything the test sends after reading it.
			e.mu.Lock()
			if e.n == nil {
				e.n = map[string]int{}
			}
			e.n[ev.Domain]++
			e.mu.Unlock()
		}
	}
}

func (e *evaluations) of(name string) int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.n[name]
}

// Our auto-votes are paced the same way (VoteGap): votes for claims
// that a peer's ops bring within the gap are committed as one op, and a
// vote after a quiet spell is committed at once.
func TestVoteCommitsPaced(t *testing.T) {
	withGap(t, time.Second, func(gap time.Duration) bool {
		var evals evaluations
		l := newTestLedgerWith(t, t.TempDir(), func(d *Deps) {
			d.VoteGap = gap
			d.DomainMiddleware = []actor.ReceiverMiddleware{evals.middleware}
		})
		defer l.stop()
		peer, _ := identity.Generate()
		if r := ask[*messages.AddWriterReply](t, l, &messages.AddWriter{ID: peer.ID()}); r.Err != nil {
			t.Fatal(r.Err)
		}
		claim := func(seq uint64, name string) {
			t.Helper()
			op := sign(t, peer, &messages.Op{Seq: seq, HLC: messages.HLC{Wall: int64(seq)}, Key: messages.ClaimKey(name, peer.ID()), Value: `{"hash":"` + hashA + `"}`})
			if r := ask[*messages.ApplyOpsReply](t, l, &messages.ApplyOps{From: "test", Ops: []*messages.Op{op}}); r.Applied != 1 {
				t.Fatalf("claim %s: %+v", name, r)
			}
		}
		first := ownSeq(t, l)
		// The vote for a.p2p is committed no earlier than this: the gap
		// the next votes wait for ends no earlier than start+gap.
		start := time.Now()
		claim(1, "a.p2p")
		// The first vote goes at once (nothing was committed within the gap).
		testutil.Eventually(t, 5*time.Second, func() error {
			if got := ownSeq(t, l); got != first+1 {
				return fmt.Errorf("own seq %d, want the vote for a.p2p at %d", got, first+1)
			}
			return nil
		})
		claim(2, "b.p2p")
		claim(3, "c.p2p")
		// Our votes for b.p2p and c.p2p are queued once the ledger has
		// the answers of their evaluations (two domain actors: in either
		// order): the round trip after both is answered later.
		testutil.Eventually(t, gap+5*time.Second, func() error {
			for _, name := range []string{"b.p2p", "c.p2p"} {
				if evals.of(name) == 0 {
					return fmt.Errorf("%s not evaluated yet", name)
				}
			}
			return nil
		})
		ownSeq(t, l)
		if time.Since(start) >= gap {
			return false // the vote for b.p2p may have gone alone
		}
		testutil.Eventually(t, gap+5*time.Second, func() error {
			if ops := ownOps(t, l, first+1); len(ops) == 0 {
				return fmt.Errorf("no vote for b.p2p and c.p2p yet")
			}
			return nil
		})
		ops := ownOps(t, l, first+1)
		if len(ops) != 1 || ops[0].NumWrites() != 2 {
			t.Fatalf("votes for b.p2p and c.p2p: %d ops, want one with both: %+v", len(ops), ops)
		}
		return true
	})
}

// The claims committed together are answered together, once every one of
// them has settled: when the first answer of a batch arrives, the
// published view already shows every claim of the batch resolved.
func TestBatchAnsweredTogether(t *testing.T) {
	withGap(t, time.Second, func(gap time.Duration) bool {
		l := newTestLedgerWith(t, t.TempDir(), func(d *Deps) { d.ClaimGap = gap })
		defer l.stop()
		start := time.Now() // the commit of "first" is no earlier
		if r := ask[*messages.AddDomainReply](t, l, &messages.AddDomain{Domain: "first.p2p", Hash: hashA}); r.Err != nil {
			t.Fatal(r.Err)
		}
		// Sent within the gap after "first": one batch.
		const n = 40
		replies := make(chan error, n)
		for i := range n {
			f := l.sys.Root.RequestFuture(l.pid, &messages.AddDomain{Domain: fmt.Sprintf("b%02d.p2p", i), Hash: hashA}, gap+10*time.Second)
			go func() {
				r, err := f.Result()
				if err == nil {
					err = r.(*messages.AddDomainReply).Err
				}
				replies <- err
			}()
		}
		ownSeq(t, l) // handled after the forty claims
		if time.Since(start) >= gap {
			// Some may have come after the paced commit: two batches.
			for range n {
				if err := <-replies; err != nil {
					t.Fatal(err)
				}
			}
			return false
		}
		if err := <-replies; err != nil {
			t.Fatal(err)
		}
		snap := l.pub.Load()
		for i := range n {
			name := fmt.Sprintf("b%02d.p2p", i)
			if d := snap.Domains[name]; d == nil || d.Status != "resolved" {
				t.Fatalf("first answer of the batch came before %s settled: %+v", name, d)
			}
		}
		for range n - 1 {
			if err := <-replies; err != nil {
				t.Fatal(err)
			}
		}
		return true
	})
}

// Evaluations nobody waits for are paced (EvalGap): after a quiet spell
// at once; the changes that follow within the gap are evaluated together
// in one round, however many ops brought them. A claim we have not voted
// on yet is evaluated at once (our vote is what the others wait for).
func TestEvaluationsPaced(t *testing.T) {
	withGap(t, 3*time.Second, func(gap time.Duration) bool {
		var evals evaluations
		l := newTestLedgerWith(t, t.TempDir(), func(d *Deps) {
			d.EvalGap = gap
			d.DomainMiddleware = []actor.ReceiverMiddleware{evals.middleware}
		})
		defer l.stop()
		peer, _ := identity.Generate()
		if r := ask[*messages.AddWriterReply](t, l, &messages.AddWriter{ID: peer.ID()}); r.Err != nil {
			t.Fatal(r.Err)
		}
		seq := uint64(0)
		apply := func(key, value string) {
			t.Helper()
			seq++
			op := sign(t, peer, &messages.Op{Seq: seq, HLC: messages.HLC{Wall: int64(seq)}, Key: key, Value: value})
			if r := ask[*messages.ApplyOpsReply](t, l, &messages.ApplyOps{From: "test", Ops: []*messages.Op{op}}); r.Applied != 1 {
				t.Fatalf("apply %s: %+v", key, r)
			}
		}
		claim := `{"hash":"` + hashA + `"}`
		first := ownSeq(t, l)
		// The round that evaluates a.p2p with our vote is no earlier than
		// this: the next round is no earlier than start+gap.
		start := time.Now()
		apply(messages.ClaimKey("a.p2p", peer.ID()), claim)
		// Evaluated at once (nothing was evaluated lately, and it needs our
		// vote), voted, and evaluated again with the vote.
		testutil.Eventually(t, 5*time.Second, func() error {
			if got := ownSeq(t, l); got != first+1 {
				return fmt.Errorf("own seq %d, want the vote for a.p2p at %d", got, first+1)
			}
			if n := evals.of("a.p2p"); n != 2 {
				return fmt.Errorf("a.p2p evaluated %d times, want 2", n)
			}
			return nil
		})
		// Within the gap: two claims, our votes for them, and the peer's
		// votes for them. The peer's votes follow ours, as they would from a
		// peer that waits for nothing: a vote arriving while the claim's
		// first evaluation is still out makes that answer stale, and the
		// claim is evaluated again at once (our vote is still owed).
		apply(messages.ClaimKey("b.p2p", peer.ID()), claim)
		apply(messages.ClaimKey("c.p2p", peer.ID()), claim)
		testutil.Eventually(t, gap+5*time.Second, func() error {
			voted := map[string]bool{}
			for _, op := range ownOps(t, l, first+1) {
				for _, w := range append([]messages.Write{{Key: op.Key}}, op.Batch...) {
					voted[w.Key] = true
				}
			}
			for _, name := range []string{"b.p2p", "c.p2p"} {
				if !voted[messages.VoteKey(name, l.id.ID(), peer.ID())] {
					return fmt.Errorf("our vote for %s not committed yet", name)
				}
			}
			return nil
		})
		apply(messages.VoteKey("b.p2p", peer.ID(), peer.ID()), messages.VoteMarker)
		apply(messages.VoteKey("c.p2p", peer.ID(), peer.ID()), messages.VoteMarker)
		if time.Since(start) >= gap {
			return false // a round may have run between these changes
		}
		testutil.Eventually(t, gap+10*time.Second, func() error {
			d := ask[*messages.GetConsensusReply](t, l, &messages.GetConsensus{Domain: "c.p2p"})
			if d.State.Status != "resolved" {
				return fmt.Errorf("c.p2p: %+v", d.State)
			}
			return nil
		})
		// Each claim at once (it needs our vote), then one round for the
		// peer's votes and ours (unpaced: claim, peer's vote, our vote =
		// three each). An evaluation is counted once its domain actor
		// has handled it, which may be a moment after the ledger took its
		// answer: the count is waited for (a third evaluation would stay).
		testutil.Eventually(t, 5*time.Second, func() error {
			for _, name := range []string{"b.p2p", "c.p2p"} {
				if n := evals.of(name); n != 2 {
					return fmt.Errorf("%s evaluated %d times, want 2", name, n)
				}
			}
			return nil
		})
		return true
	})
}

// beyondR starts a ledger with R = 2 and four more connected writers,
// votes held hold and evaluations counted in evals, and picks n names
// whose replica sets hold it; claimant is one of the other writers.
func beyondR(t *testing.T, hold time.Duration, evals *evaluations, n int) (l *testLedger, claimant *identity.Identity, names []string) {
	t.Helper()
	l = newTestLedgerWith(t, t.TempDir(), func(d *Deps) {
		d.Replicas, d.VoteHold = 2, hold
		d.DomainMiddleware = []actor.ReceiverMiddleware{evals.middleware}
	})
	peers, connected := addConnectedWriters(t, l, 4)
	sc := ask[*messages.GetSidecarStatusReply](t, l, &messages.GetSidecarStatus{}).Status
	if sc.Key == nil {
		l.stop()
		t.Fatal("the ledger has no network id")
	}
	members := consensus.NewMembership(*sc.Key, append([]string{l.id.ID()}, connected...), 2)
	for i := 0; len(names) < n; i++ {
		if i > 200 {
			l.stop()
			t.Fatalf("the node is in %d replica sets of 200 names", len(names))
		}
		if name := fmt.Sprintf("h%d.p2p", i); members.Replicas(name)[l.id.ID()] {
			names = append(names, name)
		}
	}
	return l, peers[0], names
}

// Beyond R writers our votes wait VoteHold from the first queued, after
// a quiet spell too: the votes for two claims that reach us one after
// the other go out in one op, where up to R the first would go at once
// (TestVoteCommitsPaced).
func TestVotesHeldBeyondR(t *testing.T) {
	withGap(t, time.Second, func(hold time.Duration) bool {
		var evals evaluations
		l, claimant, names := beyondR(t, hold, &evals, 2)
		defer l.stop()
		first := ownSeq(t, l)
		start := time.Now()
		for i, name := range names {
			op := sign(t, claimant, &messages.Op{Seq: uint64(i + 1), HLC: messages.HLC{Wall: int64(i + 1)}, Key: messages.ClaimKey(name, claimant.ID()), Value: `{"hash":"` + hashA + `"}`})
			if r := ask[*messages.ApplyOpsReply](t, l, &messages.ApplyOps{From: "test", Ops: []*messages.Op{op}}); r.Applied != 1 {
				t.Fatalf("claim %s: %+v", name, r)
			}
			testutil.Eventually(t, hold+5*time.Second, func() error {
				if evals.of(name) == 0 {
					return fmt.Errorf("%s not evaluated yet", name)
				}
				return nil
			})
		}
		ownSeq(t, l) // the votes of both evaluations are queued by now
		if time.Since(start) >= hold {
			return false // the first vote may have gone alone
		}
		testutil.Eventually(t, hold+5*time.Second, func() error {
			if ops := ownOps(t, l, first); len(ops) == 0 {
				return fmt.Errorf("no vote yet")
			}
			return nil
		})
		if ops := ownOps(t, l, first); len(ops) != 1 || ops[0].NumWrites() != 2 {
			t.Fatalf("votes for %v: %d ops, want one with both: %+v", names, len(ops), ops)
		}
		return true
	})
}

// A ledger whose mailbox held a peer's ops a while holds its votes twice
// that wait (at most maxVoteHold) instead of VoteHold: the vote for a
// claim that waited 400 ms on its way in is still held three VoteHolds
// after its evaluation, and goes out after that.
func TestVotesHeldLongerWhileBehind(t *testing.T) {
	const hold, waited = 100 * time.Millisecond, 400 * time.Millisecond
	for try := 1; ; try++ {
		if heldLongerWhileBehind(t, hold, waited) {
			return
		}
		if try == 3 {
			t.Fatalf("the machine was too slow for the scenario three times: more than %v from the claim's apply to the check", 2*waited)
		}
		t.Logf("the machine was too slow for the scenario (more than %v from the claim's apply to the check); again", 2*waited)
	}
}

// heldLongerWhileBehind runs the scenario; false when the check came so
// long after the claim's apply that the longer hold may have ended too.
func heldLongerWhileBehind(t *testing.T, hold, waited time.Duration) bool {
	var evals evaluations
	l, claimant, names := beyondR(t, hold, &evals, 1)
	defer l.stop()
	name := names[0]
	first := ownSeq(t, l)
	op := sign(t, claimant, &messages.Op{Seq: 1, HLC: messages.HLC{Wall: 1}, Key: messages.ClaimKey(name, claimant.ID()), Value: `{"hash":"` + hashA + `"}`})
	applied := time.Now()
	if r := ask[*messages.ApplyOpsReply](t, l, &messages.ApplyOps{From: "test", Ops: []*messages.Op{op}, Sent: applied.Add(-waited)}); r.Applied != 1 {
		t.Fatalf("claim %s: %+v", name, r)
	}
	testutil.Eventually(t, 5*time.Second, func() error {
		if evals.of(name) == 0 {
			return fmt.Errorf("%s not evaluated yet", name)
		}
		return nil
	})
	ownSeq(t, l)         // the vote is queued by now
	time.Sleep(3 * hold) // the span under test: VoteHold alone would have sent the vote
	ops := ownOps(t, l, first)
	if time.Since(applied) >= 2*waited {
		return false
	}
	if len(ops) != 0 {
		t.Fatalf("voted within %v of the claim's apply, after a %v wait in the mailbox: want it held %v", time.Since(applied).Round(time.Millisecond), waited, 2*waited)
	}
	testutil.Eventually(t, 5*time.Second, func() error {
		if ops := ownOps(t, l, first); len(ops) != 1 || ops[0].NumWrites() != 1 {
			return fmt.Errorf("own ops after the claim: %+v, want one vote", ops)
		}
		return nil
	})
	return true
}

func TestHoldForAndLagWindow(t *testing.T) {
	const hold = 250 * time.Millisecond
	for _, c := range []struct{ lag, want time.Duration }{
		{0, hold}, {100 * time.Millisecond, hold}, {300 * time.Millisecond, 600 * time.Millisecond},
		{2 * time.Second, maxVoteHold},
	} {
		if got := holdFor(hold, c.lag); got != c.want {
			t.Errorf("holdFor(%v, %v) = %v, want %v", hold, c.lag, got, c.want)
		}
	}
	if got := holdFor(2*time.Second, time.Second); got != 2*time.Second {
		t.Errorf("a VoteHold past maxVoteHold: holdFor = %v, want it kept (2s)", got)
	}
	var w lagWindow
	t0 := time.Unix(1000, 0)
	w.observe(t0, 400*time.Millisecond)
	w.observe(t0.Add(100*time.Millisecond), 50*time.Millisecond)
	for _, c := range []struct {
		at   time.Duration
		want time.Duration
	}{
		{500 * time.Millisecond, 400 * time.Millisecond},  // this second
		{1500 * time.Millisecond, 400 * time.Millisecond}, // the second before
		{2000 * time.Millisecond, 400 * time.Millisecond},
		{3600 * time.Millisecond, 0}, // quiet for two seconds
	} {
		if got := w.get(t0.Add(c.at)); got != c.want {
			t.Errorf("at +%v: %v, want %v", c.at, got, c.want)
		}
	}
}
