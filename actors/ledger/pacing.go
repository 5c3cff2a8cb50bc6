package ledger

import "time"

// Commit pacing (decided by the machine, machine.go). Our own claims and auto-votes are group-committed: what
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
// Closed loop. A burst's clients each wait for their answer, so once a
// commit has answered k of them, k claims queued again means they are
// all back and the rest of the gap would gather no more: the commit is
// brought forward the moment the queue holds as many claims as the
// largest commit of the last claimMarkLife (the mark, at least two). The
// batches keep their size, so the burst makes no more ops, and the
// cycle shrinks from the gap to the clients' round trip. The mark is the
// largest batch, not the last: marked by the last, a burst whose clients
// came back in two groups split into two loops of their own, each
// committing its few as soon as they were back (a build that did so
// made 7 claims an op instead of 16 in the five-process burst). Fewer
// clients than the mark leave the queue short and the gap decides, as
// without the loop, and the gap's commit takes every client that is
// back, so the groups merge again. While a mark lives, the first claim
// to find no commit scheduled waits at least half a gap even when the
// gap has passed: a commit slower than the gap (a slow fsync) had the
// first client back commit alone at once, and the group split. A lone
// claim after a quiet spell commits at once and, one after another, is
// paced by the gap alone. Five processes, 1,000 claims from 16 clients
// on one node, six runs of three bursts interleaved with the tree
// before: resolved on all five 1.21 → 0.975 s after the first claim
// (median of the runs' medians; lower in all six), a claim answered in
// 6.7-13.6 ms instead of 12.5-20.3, a fifth fewer signature checks
// (docs/bench-history.md, "Claims committed when their clients are
// back").
//
// The vote gap is longer: a follower's votes do not hold up any client of
// its own, they only move the domain from "our claim" to "agreed", and a
// follower receives one claim op after another from every claimant.
const (
	DefaultClaimGap = 10 * time.Millisecond
	DefaultVoteGap  = 30 * time.Millisecond
)

// claimMarkLife is how long the largest commit of claims stays the mark:
// a burst's commits follow each other within a gap.
const claimMarkLife = time.Second

// Vote hold. Beyond R writers (the replica-set regime, a sparse
// overlay) our votes wait VoteHold from the first one queued, after a
// quiet spell too, so the votes for a burst's claims, which reach a
// follower one claim op after another, go out in a few ops instead of
// about one each. An op costs every node of the network a signature
// check, an apply and a copy from each neighbour that pushes it, so
// its cost grows with the network while a vote's wait does not: the
// claimer's client waits for the votes, but a claim crossing several
// hops of ledgers under load takes seconds, of which the hold is a
// small part (250 ms: a few claim ops of a burst reach a follower in
// that time; 125 and 500 ms measured within the same spread). Up to R writers (a full mesh, where
// the five-process figures come from) votes are paced by VoteGap alone.
//
// On 50 processes sharing two cores, 100 claims from five nodes, three
// interleaved runs each: each node's ~47 votes went out in ~15 ops
// without the hold (in one ledger 733 vote ops, 335 of them a single
// vote); with it the
// burst's signature checks fell from 43-50k to 25-27k, the ops sent
// from 287-323k to 142-162k, and the fleet's CPU from 42 to 31 CPU-s
// (docs/bench-history.md, "The vote hold").
const DefaultVoteHold = 250 * time.Millisecond

// voteHold is the Hold of a vote queue opened now: VoteHold beyond R
// writers, none up to R; while peers' ops wait longer than half of it
// in our mailbox, twice that wait, at most maxVoteHold.
func (a *Actor) voteHold() time.Duration {
	if a.d.VoteHold <= 0 || !a.members().Sparse() {
		return 0
	}
	return holdFor(a.d.VoteHold, a.lag.get(a.d.Now()))
}

// holdFor is the vote hold at a mailbox wait of lag.
func holdFor(hold, lag time.Duration) time.Duration {
	return min(max(hold, 2*lag), max(hold, maxVoteHold))
}

// The hold under load. A ledger whose mailbox holds peers' ops for a
// while is behind the network: the claims of a burst reach it one op
// after another over that time, and every vote op it signs then costs
// every other node (itself behind too) a signature check, an apply and
// copies from its neighbours, the work that keeps them behind. So while
// the ops it receives wait longer than half the hold, its votes wait
// twice that wait (at most maxVoteHold) and go out in fewer ops: beside
// a wait of that size in every ledger on the way, the longer hold
// delays a vote by a fraction of what the network already takes. A
// ledger that keeps up (a quiet network, or any network on a machine
// with cores to spare) reads a wait near zero and holds VoteHold.
const maxVoteHold = time.Second

// lagWindow is the longest wait of a peer's ops in the ledger's mailbox
// (from the session's ask to the ledger taking it) seen in the current
// second and the one before: a burst's waits count while it lasts, and a
// lone op after a quiet spell reads its own.
type lagWindow struct {
	at        time.Time // start of the current second
	cur, prev time.Duration
}

func (w *lagWindow) roll(now time.Time) {
	switch since := now.Sub(w.at); {
	case since >= 2*time.Second:
		w.at, w.cur, w.prev = now, 0, 0
	case since >= time.Second:
		w.at, w.cur, w.prev = now, 0, w.cur
	}
}

func (w *lagWindow) observe(now time.Time, d time.Duration) {
	w.roll(now)
	w.cur = max(w.cur, d)
}

func (w *lagWindow) get(now time.Time) time.Duration {
	w.roll(now)
	return max(w.cur, w.prev)
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
