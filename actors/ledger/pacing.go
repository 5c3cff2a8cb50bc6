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
