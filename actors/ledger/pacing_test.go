package ledger

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"

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

// A claim that follows the previous commit by less than ClaimGap waits
// for the rest of the gap, and the claims that arrive meanwhile join its
// op: here the second claim is handled (and, unpaced, would be committed)
// before the third is even sent, and both go out in one op.
func TestClaimCommitsPaced(t *testing.T) {
	l := newTestLedgerWith(t, t.TempDir(), func(d *Deps) { d.ClaimGap = time.Second })
	if r := ask[*messages.AddDomainReply](t, l, &messages.AddDomain{Domain: "first.p2p", Hash: hashA}); r.Err != nil {
		t.Fatal(r.Err)
	}
	before := ownSeq(t, l)
	second := l.sys.Root.RequestFuture(l.pid, &messages.AddDomain{Domain: "second.p2p", Hash: hashA}, 5*time.Second)
	// Two round trips: an unpaced commit of "second" (a self-message
	// queued while it was handled) would have run before the second one.
	ownSeq(t, l)
	if got := ownSeq(t, l); got != before {
		t.Fatalf("the second claim was committed at once (seq %d → %d): not paced", before, got)
	}
	third := l.sys.Root.RequestFuture(l.pid, &messages.AddDomain{Domain: "third.p2p", Hash: hashA}, 5*time.Second)
	for name, f := range map[string]interface{ Result() (any, error) }{"second": second, "third": third} {
		if r, err := f.Result(); err != nil || r.(*messages.AddDomainReply).Err != nil {
			t.Fatalf("%s: %v %+v", name, err, r)
		}
	}
	ops := ownOps(t, l, before)
	if len(ops) != 1 || len(ops[0].Writes()) != 4 { // two claims, each with our vote
		t.Fatalf("after the paced commit: %d ops, want 1 with both claims and votes: %+v", len(ops), ops)
	}
}

// Our auto-votes are paced the same way (VoteGap): votes for claims
// that a peer's ops bring within the gap are committed as one op, and a
// vote after a quiet spell is committed at once.
func TestVoteCommitsPaced(t *testing.T) {
	l := newTestLedgerWith(t, t.TempDir(), func(d *Deps) { d.VoteGap = time.Second })
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
	start := ownSeq(t, l)
	claim(1, "a.p2p")
	// The first vote goes at once (nothing was committed within the gap).
	testutil.Eventually(t, 5*time.Second, func() error {
		if got := ownSeq(t, l); got != start+1 {
			return fmt.Errorf("own seq %d, want the vote for a.p2p at %d", got, start+1)
		}
		return nil
	})
	claim(2, "b.p2p")
	claim(3, "c.p2p")
	testutil.Eventually(t, 5*time.Second, func() error {
		if ops := ownOps(t, l, start+1); len(ops) == 0 {
			return fmt.Errorf("no vote for b.p2p and c.p2p yet")
		}
		return nil
	})
	ops := ownOps(t, l, start+1)
	if len(ops) != 1 || len(ops[0].Writes()) != 2 {
		t.Fatalf("votes for b.p2p and c.p2p: %d ops, want one with both: %+v", len(ops), ops)
	}
}

// The claims committed together are answered together, once every one of
// them has settled: when the first answer of a batch arrives, the
// published view already shows every claim of the batch resolved.
func TestBatchAnsweredTogether(t *testing.T) {
	l := newTestLedgerWith(t, t.TempDir(), func(d *Deps) { d.ClaimGap = time.Second })
	if r := ask[*messages.AddDomainReply](t, l, &messages.AddDomain{Domain: "first.p2p", Hash: hashA}); r.Err != nil {
		t.Fatal(r.Err)
	}
	// Sent within the gap after "first": one batch.
	const n = 40
	replies := make(chan error, n)
	for i := range n {
		f := l.sys.Root.RequestFuture(l.pid, &messages.AddDomain{Domain: fmt.Sprintf("b%02d.p2p", i), Hash: hashA}, 5*time.Second)
		go func() {
			r, err := f.Result()
			if err == nil {
				err = r.(*messages.AddDomainReply).Err
			}
			replies <- err
		}()
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
}

// Evaluations nobody waits for are paced (EvalGap): after a quiet spell
// at once; the changes that follow within the gap are evaluated together
// in one round, however many ops brought them. A claim we have not voted
// on yet is evaluated at once (our vote is what the others wait for).
func TestEvaluationsPaced(t *testing.T) {
	count, evaluated := countEvaluations()
	l := newTestLedgerWith(t, t.TempDir(), func(d *Deps) {
		// Long enough that the four ops below land within one gap on a
		// slow machine too.
		d.EvalGap = 3 * time.Second
		d.DomainMiddleware = []actor.ReceiverMiddleware{count}
	})
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
	start := ownSeq(t, l)
	apply(messages.ClaimKey("a.p2p", peer.ID()), claim)
	// Evaluated at once (nothing was evaluated lately, and it needs our
	// vote), voted, and evaluated again with the vote.
	testutil.Eventually(t, 5*time.Second, func() error {
		if got := ownSeq(t, l); got != start+1 {
			return fmt.Errorf("own seq %d, want the vote for a.p2p at %d", got, start+1)
		}
		if n := evaluated("a.p2p"); n != 2 {
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
	testutil.Eventually(t, 5*time.Second, func() error {
		voted := map[string]bool{}
		for _, op := range ownOps(t, l, start+1) {
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
	testutil.Eventually(t, 10*time.Second, func() error {
		d := ask[*messages.GetConsensusReply](t, l, &messages.GetConsensus{Domain: "c.p2p"})
		if d.State.Status != "resolved" {
			return fmt.Errorf("c.p2p: %+v", d.State)
		}
		return nil
	})
	// Each claim at once (it needs our vote), then one round for the
	// peer's votes and ours (unpaced: claim, peer's vote, our vote =
	// three each).
	for _, name := range []string{"b.p2p", "c.p2p"} {
		if n := evaluated(name); n != 2 {
			t.Errorf("%s evaluated %d times, want 2", name, n)
		}
	}
}

// countEvaluations is a domain-actor middleware counting the Evaluate
// requests each domain got, and their count so far.
func countEvaluations() (actor.ReceiverMiddleware, func(string) int) {
	var mu sync.Mutex
	evals := map[string]int{}
	count := func(next actor.ReceiverFunc) actor.ReceiverFunc {
		return func(c actor.ReceiverContext, env *actor.MessageEnvelope) {
			if ev, ok := env.Message.(*domain.Evaluate); ok {
				mu.Lock()
				evals[ev.Domain]++
				mu.Unlock()
			}
			next(c, env)
		}
	}
	return count, func(name string) int {
		mu.Lock()
		defer mu.Unlock()
		return evals[name]
	}
}
