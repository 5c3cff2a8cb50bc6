package ledger

import (
	"time"

	"github.com/asynkron/protoactor-go/actor"
)

// Commit pacing. Our own claims and auto-votes are group-committed: what
// is queued when the commit runs goes out as one signed op in one
// fsynced transaction. A commit that follows the previous one by less
// than its gap waits for the rest of the gap, so what arrives meanwhile
// joins it; a commit after a quiet spell runs at once, so a lone
// add-domain or vote pays nothing.
//
// Why: without it the batches of a burst stayed tiny. In the five-node
// benchmark 16 clients, each waiting for its answer, came back spread
// over a few milliseconds, and each arrival found the mailbox empty and
// committed alone: 1.7 claims per op on the writer, one vote op per claim
// op on each follower, ~2,500 signed ops for 1,000 claims (each fsynced by
// its writer, sent to four peers and verified by each). With a 10 ms
// claim gap and a 30 ms vote gap the same burst makes ~270 ops in-process
// and the five nodes spend less than half the CPU (bench/README.md,
// "Commit pacing"); 5/15 ms made more ops and 20/40 ms gained nothing more
// with five real processes.
//
// The vote gap is longer: a follower's votes do not hold up any client of
// its own, they only move the domain from "our claim" to "agreed", and a
// follower receives one claim op after another from every claimant.
const (
	DefaultClaimGap = 10 * time.Millisecond
	DefaultVoteGap  = 30 * time.Millisecond
)

// sendPaced sends msg to ourselves at once if last is gap ago or more,
// else when it will be.
func (a *Actor) sendPaced(c actor.Context, last time.Time, gap time.Duration, msg any) {
	if wait := gap - time.Since(last); wait > 0 {
		sys, self := c.ActorSystem(), c.Self()
		time.AfterFunc(wait, func() { sys.Root.Send(self, msg) })
		return
	}
	c.Send(c.Self(), msg)
}

// Evaluation pacing. A domain whose claims or votes changed is evaluated
// at once when a request waits for it (an add-domain, a remove, a
// recalculate, a wait for everything); otherwise its evaluation waits up
// to EvalGap after the previous such round (none if the last round is
// older: the tail of a burst is not delayed), and every change of the
// domain meanwhile is covered by the one evaluation. Except a domain with
// a claim we have not voted on: our vote is what the others wait for, so
// it is evaluated at once (and the vote paced by VoteGap). A follower in a
// burst gets each domain's claim and then the votes of every other writer
// in separate ops a few milliseconds apart, and evaluated the domain
// after each: five evaluations per domain per node with five writers, a
// domain-actor round trip and a consensus computation each, a fifth of
// the burst's CPU. What readers see changes only at a publish, which for
// such changes is paced to publishGap anyway.
const DefaultEvalGap = 20 * time.Millisecond

// evalNow is a self-message: evaluate the deferred domains.
type evalNow struct{}

// deferEval defers the evaluation of name if nobody waits for it, and
// schedules the deferred evaluations.
func (a *Actor) deferEval(c actor.Context, name string) bool {
	if a.evalDue || a.recalc[name] {
		return false
	}
	if _, busy := a.inflight[name]; !busy && a.writable() && a.st.unvoted(name) {
		// A claim we have not voted on (and no vote of ours queued):
		// its evaluation gives our vote, which the other nodes wait for
		// (VoteGap paces it).
		return false
	}
	if len(a.waiters) > 0 {
		if a.waitedFor == nil {
			a.waitedFor = make(map[string]bool, len(a.waiters))
			for _, w := range a.waiters {
				a.waitedFor[w.domain] = true
			}
		}
		if a.waitedFor[name] || a.waitedFor[""] {
			return false
		}
	}
	if !a.evalScheduled {
		if time.Since(a.evalAt) >= a.d.EvalGap {
			// Nothing evaluated lately: evaluate at once (the flush
			// evaluates every domain of this burst the same way).
			a.evalAt, a.evalDue = time.Now(), true
			return false
		}
		a.evalScheduled = true
		a.sendPaced(c, a.evalAt, a.d.EvalGap, &evalNow{})
	}
	a.deferred[name] = true
	return true
}

// evalDeferred makes the deferred domains due: the flush that follows
// evaluates them.
func (a *Actor) evalDeferred() {
	a.evalScheduled, a.evalDue = false, true
	a.evalAt = time.Now()
	for name := range a.deferred {
		a.dirty[name] = true
	}
	clear(a.deferred)
}
