package ledger

import "time"

// The ledger's scheduling core as a state machine, in the manner of
// etcd's raft: machine.Step takes one input and the time, changes only
// the machine's own fields, and returns what the actor must do (an
// Output). It does no I/O, reads no clock and knows no actor system, so
// machine_test.go drives it with scripts whose time is an input.
//
// The machine owns:
//   - commit pacing: when our queued claims and auto-votes are committed
//     (ClaimGap, VoteGap, pacing.go), and the group commit of peer ops;
//   - evaluation rounds: which domains are dirty, in flight (and at which
//     evalKey), deferred to the next round (EvalGap), or to be evaluated
//     again from scratch (recalculate);
//   - waiters and their groups (waiters.go);
//   - the publish schedule (publishGap).
//
// The actor (actor.go) owns the ledger state, the stores, the signing
// key, the domain children and the snapshot; it feeds the machine what
// happened (an op touched a domain, a domain actor answered, a timer
// fired, a request waits) and carries out the Output: arm the timers
// (self-messages, at once or after a delay), retire, give addresses to
// and evaluate the domains the round names, build and store a snapshot,
// answer the waiters' replies.

// writeRetry is how long after a failed commit of our votes or cleanups
// (a full disk) they are tried again: the votes' domains evaluated
// again, the cleanups run again.
const writeRetry = time.Second

// timerKind names a self-message the machine asks for.
type timerKind uint8

const (
	timerClaims  timerKind = iota + 1 // commit the queued claims (commitClaims)
	timerVotes                        // commit the queued auto-votes (commitVotes)
	timerOps                          // apply the queued peer ops (applyOpsNow)
	timerEval                         // evaluate the deferred domains (evalNow)
	timerPublish                      // publish (publishNow)
	timerRetry                        // try our failed writes again (retryWrites)
)

func (k timerKind) String() string {
	switch k {
	case timerClaims:
		return "claims"
	case timerVotes:
		return "votes"
	case timerOps:
		return "ops"
	case timerEval:
		return "eval"
	case timerPublish:
		return "publish"
	case timerRetry:
		return "retry"
	}
	return "?"
}

// Timer is a self-message to send: After 0 means at once (behind what
// the mailbox holds already), else after the delay.
type Timer struct {
	Kind  timerKind
	After time.Duration
	// Gen tells a claims timer from the ones it replaced: it comes back
	// in Fired, and a claims timer whose Gen is not the latest armed
	// does nothing (a commit brought forward leaves its paced timer
	// running).
	Gen uint64
}

// EvalRequest asks the domain actor of Domain to evaluate it at Key.
type EvalRequest struct {
	Domain string
	Key    evalKey
	Recalc bool
}

// Output is what one Step asks the actor to do, in this order: retire
// the domains of Retire, give addresses to Assign, send Evaluate, build
// and store a snapshot if Publish, answer Replies (after the snapshot
// they wait for), then arm Timers.
type Output struct {
	Retire   []string // no claims and no votes: stop its domain actor, drop its result
	Assign   []string // has claims: make sure it has an address
	Evaluate []EvalRequest
	Publish  bool
	Replies  []any // the waiters' opaque replies, in the order they waited
	Timers   []Timer
	// When a commit timer fired, what the actor now signs and commits:
	// the queued claims, or the queued votes (Votes) and their domains
	// (Commit), or the queued peer ops (Ops); the queues are emptied.
	Claims []queuedClaim
	Votes  []write
	Commit []string
	Ops    []queuedOps
	// Idle: after a Round, nothing is in flight or deferred.
	Idle bool
}

// ledgerView is what a Round reads of the ledger state.
type ledgerView interface {
	// domain says whether name has claims or votes, its version, and
	// whether it has claims.
	domain(name string) (version uint64, exists, claimed bool)
	// needsVote says whether name has a claim we have not voted on and
	// we may vote (a writer of a network).
	needsVote(name string) bool
}

// Inputs of Step.
type (
	// Touch: ops changed these domains (or the peer set or the replica
	// sets changed: every domain).
	Touch struct{ Domains []string }
	// Recalc: evaluate these domains again from scratch.
	Recalc struct{ Domains []string }
	// Wait: answer Replies[i] once Domains[i] has settled ("" =
	// everything), all of them together (one group). Since is when the
	// oldest of the requests arrived (zero: now): waitLimit counts from
	// it, so the time a claim spent in the commit queue is part of the
	// wait.
	Wait struct {
		Domains []string
		Replies []any
		Since   time.Time
	}
	// QueueClaim: an add-domain joins the claim queue.
	QueueClaim struct{ Claim queuedClaim }
	// QueueOps: a peer's ops join the ops queue.
	QueueOps struct{ Ops queuedOps }
	// QueueVote: an evaluation of Domain at Key asked for Votes, which
	// join the vote queue; the domain stays in flight until committed.
	// Hold > 0: a vote queue this opens is committed Hold after it
	// opened (or at the vote gap, if that is later) rather than at once
	// after a quiet spell (pacing.go, VoteHold).
	QueueVote struct {
		Domain string
		Key    evalKey
		Votes  []write
		Hold   time.Duration
	}
	// VotesCommitted: the votes of Domains were committed (Failed: the
	// commit failed; the domains settle as they are, and are evaluated
	// again writeRetry later).
	VotesCommitted struct {
		Domains []string
		Failed  bool
	}
	// CleanupFailed: the commit of our cleanup of a domain failed; the
	// actor keeps the request and runs it again when the retry timer
	// fires (writeRetry).
	CleanupFailed struct{}
	// Settled: the evaluation of Domain changed nothing more.
	Settled struct{ Domain string }
	// Restarted: the domain actor of Domain restarted; its evaluation is lost.
	Restarted struct{ Domain string }
	// Stale: the evaluation of Domain in flight answered for a version
	// (or epoch) the domain has left; the answer is dropped.
	Stale struct{ Domain string }
	// Fired: a timer's self-message arrived.
	Fired struct {
		Kind timerKind
		Gen  uint64 // the Timer's
	}
	// Changed: something a reader sees changed (Now: publish it, paced).
	Changed struct{ Now bool }
	// Read: a request of the admin API is about to read; a paced publish
	// goes out first.
	Read struct{}
	// Round: the end of a message: evaluate what is dirty, at Epoch.
	Round struct {
		Ledger ledgerView
		Epoch  uint64
	}
)

// machine is the scheduling core; see the comment at the top of the file.
type machine struct {
	claimGap, voteGap, evalGap, publishGap time.Duration

	// Commit pacing: when our last claims and votes were committed, and
	// whether a commit is scheduled.
	claimsAt, votesAt             time.Time
	claimScheduled, voteScheduled bool
	opsScheduled                  bool
	// claimGen is the Gen of the live claims timer; claimMark is the
	// largest commit of claims within claimMarkLife (taken at
	// claimMarkAt), the size at which a scheduled commit is brought
	// forward (pacing.go).
	claimGen    uint64
	claimMark   int
	claimMarkAt time.Time
	// The queues of the group commits.
	claimQueue  []queuedClaim // add-domain requests
	voteQueue   []write       // our auto-votes
	voteDomains []string      // the domains of voteQueue
	opsQueue    []queuedOps   // peer ops
	// retry: the domains whose votes failed to commit (a full disk),
	// evaluated again when the retry timer fires: nothing else may touch
	// them for a long time, and until our vote is in, a quorum that
	// needs it is not met on any node.
	retry          map[string]bool
	retryScheduled bool

	// Evaluation rounds.
	dirty    map[string]bool
	inflight map[string]evalKey // domain → what is being evaluated
	recalc   map[string]bool
	// Evaluations nobody waits for, deferred to the next timerEval;
	// evalDue makes the round after it send them; waitedFor is the
	// domains waiters wait for, built once per round.
	deferred      map[string]bool
	evalScheduled bool
	evalDue       bool
	evalAt        time.Time // when the last round of deferrable evaluations went
	waitedFor     map[string]bool

	// Waiters.
	waiters     []waiter
	unsettled   map[uint64]int // waiter group → its waiters not settled yet
	lastGroup   uint64
	readyGroups int // groups settled and not answered yet
	// waitLimit: a waiter this old is answered at the next publish,
	// settled or not (0: no limit; waiters.go)
	waitLimit time.Duration

	// Publish schedule. publishLater: the pending publish waits for
	// publishGap (nobody waited for it); publishedAt is when the last
	// one went out; changed: something a reader sees changed since.
	publishing, publishLater bool
	publishedAt              time.Time
	changed                  bool

	out Output // being built by the current Step
}

func newMachine(claimGap, voteGap, evalGap, publishGap time.Duration) *machine {
	return &machine{
		claimGap: claimGap, voteGap: voteGap, evalGap: evalGap, publishGap: publishGap,
		dirty: map[string]bool{}, inflight: map[string]evalKey{}, recalc: map[string]bool{},
		deferred: map[string]bool{}, unsettled: map[uint64]int{}, retry: map[string]bool{},
	}
}

// Step applies one input at now and returns what to do.
func (m *machine) Step(in any, now time.Time) Output {
	m.out = Output{}
	switch in := in.(type) {
	case Touch:
		for _, d := range in.Domains {
			if d != "" {
				m.dirty[d] = true
			}
		}
	case Recalc:
		for _, d := range in.Domains {
			m.dirty[d] = true
			m.recalc[d] = true
		}
	case Wait:
		m.lastGroup++
		since := now
		if !in.Since.IsZero() && in.Since.Before(now) {
			since = in.Since
		}
		for i, d := range in.Domains {
			m.wait(m.lastGroup, d, in.Replies[i], now, since)
		}
	case QueueClaim:
		m.claimQueue = append(m.claimQueue, in.Claim)
		burst := m.claimMark > 1 && now.Sub(m.claimMarkAt) <= claimMarkLife
		switch {
		case !m.claimScheduled:
			m.claimScheduled = true
			hold := time.Duration(0)
			if burst {
				// The first of a burst's clients back: wait a little
				// for the others even if the gap has passed.
				hold = m.claimGap / 2
			}
			m.paced(timerClaims, now, m.claimsAt, m.claimGap, hold)
		case burst && len(m.claimQueue) == m.claimMark:
			// As many claims as the largest commit lately: its clients
			// are back, and the rest of the gap would gather no more.
			m.arm(timerClaims, 0)
		}
	case QueueOps:
		m.opsQueue = append(m.opsQueue, in.Ops)
		if !m.opsScheduled {
			m.opsScheduled = true
			m.arm(timerOps, 0)
		}
	case QueueVote:
		m.inflight[in.Domain] = in.Key
		m.voteQueue = append(m.voteQueue, in.Votes...)
		m.voteDomains = append(m.voteDomains, in.Domain)
		if !m.voteScheduled {
			m.voteScheduled = true
			m.paced(timerVotes, now, m.votesAt, m.voteGap, in.Hold)
		}
	case VotesCommitted:
		for _, d := range in.Domains {
			delete(m.inflight, d)
			if in.Failed {
				m.settled(d, now)
				m.retry[d] = true
			}
		}
		if in.Failed {
			m.retryLater()
		}
	case CleanupFailed:
		m.retryLater()
	case Settled:
		delete(m.inflight, in.Domain)
		m.settled(in.Domain, now)
	case Restarted:
		delete(m.inflight, in.Domain)
		m.dirty[in.Domain] = true
	case Stale:
		// The changes that made it stale were deferred while it was in
		// flight (pacing.go); the domain is evaluated again by the next
		// round, at once if it still owes our vote.
		delete(m.inflight, in.Domain)
		m.dirty[in.Domain] = true
	case Fired:
		m.fired(in.Kind, in.Gen, now)
	case Changed:
		if in.Now {
			m.schedulePublish(now)
		} else {
			m.changed = true
		}
	case Read:
		if m.publishing && m.publishLater {
			m.publish(now)
		}
	case Round:
		m.round(in.Ledger, in.Epoch, now)
	default:
		panic("ledger machine: unknown input")
	}
	return m.out
}

func (m *machine) arm(k timerKind, after time.Duration) {
	t := Timer{Kind: k, After: after}
	if k == timerClaims {
		m.claimGen++
		t.Gen = m.claimGen
	}
	m.out.Timers = append(m.out.Timers, t)
}

// retryLater arms the retry timer unless it is armed.
func (m *machine) retryLater() {
	if !m.retryScheduled {
		m.retryScheduled = true
		m.arm(timerRetry, writeRetry)
	}
}

// paced arms k when last is gap ago, and at least hold from now: at
// once if both have passed.
func (m *machine) paced(k timerKind, now, last time.Time, gap, hold time.Duration) {
	m.arm(k, max(gap-now.Sub(last), hold, 0))
}

func (m *machine) fired(k timerKind, gen uint64, now time.Time) {
	switch k {
	case timerClaims:
		if gen != m.claimGen || !m.claimScheduled {
			return // replaced by a commit brought forward
		}
		m.claimScheduled = false
		m.claimsAt = now
		if n := len(m.claimQueue); n >= m.claimMark || now.Sub(m.claimMarkAt) > claimMarkLife {
			m.claimMark, m.claimMarkAt = n, now
		}
		m.out.Claims, m.claimQueue = m.claimQueue, nil
	case timerVotes:
		m.voteScheduled = false
		m.votesAt = now
		m.out.Votes, m.out.Commit = m.voteQueue, m.voteDomains
		m.voteQueue, m.voteDomains = nil, nil
	case timerOps:
		m.opsScheduled = false
		m.out.Ops, m.opsQueue = m.opsQueue, nil
	case timerEval:
		// The deferred domains are due: the round that follows
		// evaluates them.
		m.evalScheduled, m.evalDue = false, true
		m.evalAt = now
		for name := range m.deferred {
			m.dirty[name] = true
		}
		clear(m.deferred)
	case timerPublish:
		if m.publishing { // else published already: a paced timer overtaken by a publish for a waiter
			m.publish(now)
		}
	case timerRetry:
		m.retryScheduled = false
		for name := range m.retry {
			m.dirty[name] = true
		}
		clear(m.retry)
	}
}

// round asks for an evaluation of every dirty domain that is not already
// being evaluated at its current version, unless it can wait (deferEval);
// domains without claims or votes are retired.
func (m *machine) round(l ledgerView, epoch uint64, now time.Time) {
	for name := range m.dirty {
		delete(m.dirty, name)
		version, exists, claimed := l.domain(name)
		if !exists {
			m.out.Retire = append(m.out.Retire, name)
			delete(m.inflight, name)
			m.settled(name, now)
			continue
		}
		if claimed {
			m.out.Assign = append(m.out.Assign, name)
		}
		key := evalKey{version, epoch}
		if k, ok := m.inflight[name]; ok && k == key && !m.recalc[name] {
			continue
		}
		if m.deferEval(l, name, now) {
			continue
		}
		m.inflight[name] = key
		delete(m.deferred, name) // this evaluation covers the deferred change
		m.out.Evaluate = append(m.out.Evaluate, EvalRequest{Domain: name, Key: key, Recalc: m.recalc[name]})
		delete(m.recalc, name)
	}
	m.evalDue, m.waitedFor = false, nil
	if len(m.inflight) == 0 && len(m.deferred) == 0 {
		m.out.Idle = true
		if m.changed {
			m.schedulePublish(now)
		}
	}
}

// deferEval defers the evaluation of name if nobody waits for it, and
// schedules the deferred evaluations (pacing.go).
func (m *machine) deferEval(l ledgerView, name string, now time.Time) bool {
	if m.evalDue || m.recalc[name] {
		return false
	}
	if _, busy := m.inflight[name]; !busy && l.needsVote(name) {
		// A claim we have not voted on (and no vote of ours queued):
		// its evaluation gives our vote, which the other nodes wait for
		// (VoteGap paces it). One evaluation in flight at a time: a
		// change meanwhile waits for its answer (Stale), not the gap.
		return false
	}
	if len(m.waiters) > 0 {
		if m.waitedFor == nil {
			m.waitedFor = make(map[string]bool, len(m.waiters))
			for _, w := range m.waiters {
				m.waitedFor[w.domain] = true
			}
		}
		if m.waitedFor[name] || m.waitedFor[""] {
			return false
		}
	}
	if !m.evalScheduled {
		if now.Sub(m.evalAt) >= m.evalGap {
			// Nothing evaluated lately: evaluate at once (the round
			// evaluates every domain of this burst the same way).
			m.evalAt, m.evalDue = now, true
			return false
		}
		m.evalScheduled = true
		m.paced(timerEval, now, m.evalAt, m.evalGap, 0)
	}
	m.deferred[name] = true
	return true
}

// schedulePublish notes a change readers see and arms the publish: at
// once when a waiter can be answered or the last publish is publishGap
// ago, else when it will be.
func (m *machine) schedulePublish(now time.Time) {
	m.changed = true
	if m.publishing {
		if m.publishLater && m.answerable() {
			m.publishLater = false // a request can be answered: publish at once
			m.arm(timerPublish, 0)
		}
		return
	}
	m.publishing = true
	if wait := m.publishGap - now.Sub(m.publishedAt); wait > 0 && !m.answerable() {
		m.publishLater = true
		m.arm(timerPublish, wait)
		return
	}
	m.arm(timerPublish, 0)
}

// publish asks for a snapshot now and answers the waiters it settles.
func (m *machine) publish(now time.Time) {
	m.publishing, m.publishLater, m.changed = false, false, false
	m.publishedAt = now
	m.out.Publish = true
	m.answerWaiters(now)
}
