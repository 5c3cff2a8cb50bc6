package ledger

import (
	"maps"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"peerdns/actors/consensus"
	"peerdns/actors/domain"
	"peerdns/internal/view"
	"peerdns/messages"
)

// evalKey is what an evaluation was computed for: the domain's ledger
// version and the active-peer epoch.
type evalKey struct{ version, epoch uint64 }

// publishNow is a self-message: publish once the mailbox burst is handled.
type publishNow struct{}

// commitVotes is a self-message: sign and commit the queued auto-votes.
type commitVotes struct{}

// retryWrites is a self-message: try our failed writes again (the
// domains whose votes failed to commit are evaluated again, the failed
// cleanups run again).
type retryWrites struct{}

// commitQueuedVotes appends every queued vote in one transaction; the
// domains are re-evaluated with their new votes. If the commit fails the
// domains settle as they are, the failure is logged, and they are
// evaluated again (their votes queued again) writeRetry later.
func (a *Actor) commitQueuedVotes(c actor.Context) {
	out := a.step(c, Fired{Kind: timerVotes})
	ws, domains := out.Votes, out.Commit
	if len(ws) == 0 {
		return
	}
	_, err := a.appendLocal(ws...)
	a.step(c, VotesCommitted{Domains: domains, Failed: err != nil})
	if err != nil {
		a.d.Log.Error("ledger: auto-vote failed", "domains", len(domains), "err", err)
	}
}

// flush runs after every message: pending cleanups, then the machine's
// round (IP assignment of new domains, and an evaluation request for
// every dirty domain that is not already being evaluated at its current
// version), then the addresses it assigned are persisted.
func (a *Actor) flush(c actor.Context) {
	if len(a.pendingCleanups) > 0 && !a.runCleanups() {
		a.step(c, CleanupFailed{})
	}
	a.members()
	out := a.step(c, Round{Ledger: stateView{a}, Epoch: a.epoch})
	a.persistIPs()
	if out.Idle && !a.bootstrap && (a.st.network != "" || !a.d.Join) {
		a.bootstrap = true
	}
}

// members is the writer set ordered for replica-set picks, rebuilt when
// writers were added since the last flush. When a network grows past R
// (or its replica sets move because it grew further), every domain is
// evaluated again with its new voters, as when the connected set changes.
// A connected peer that has just become a writer is a new active peer
// (activeSet counts connected writers only): the domains it votes on are
// evaluated again, as when it connects. So are ours once we have just
// become a writer: a joiner applies its network's domains before that
// op (its sync comes in pages), settles them without a vote then, and
// casts its auto-votes now.
func (a *Actor) members() *consensus.Membership {
	m := a.memberSet
	if m != nil && m.Size() == len(a.st.writers) {
		return m
	}
	ids := make([]string, 0, len(a.st.writers))
	for id := range a.st.writers {
		ids = append(ids, id)
	}
	next := consensus.NewMembership(a.st.network, ids, a.d.Replicas)
	a.memberSet = next
	var joined []string // connected (or us), and writers since this rebuild
	for id := range a.active {
		if a.st.writers[id] && (m == nil || !m.Has(id)) {
			joined = append(joined, id)
		}
	}
	if self := a.st.self; a.st.writers[self] && m != nil && !m.Has(self) {
		joined = append(joined, self)
	}
	switch {
	case (m != nil && m.Sparse()) || next.Sparse():
		a.epoch++
		a.markAll()
	case len(joined) > 0:
		a.epoch++
		a.markVotersChanged(joined)
	}
	return next
}

// retire stops the actor of a domain that has no claims and no votes
// (the machine's round settled it).
func (a *Actor) retire(c actor.Context, name string) {
	if pid := a.children[name]; pid != nil {
		c.Stop(pid)
		delete(a.children, name)
	}
	delete(a.results, name)
	a.domainChanged(name)
}

func (a *Actor) activeSet() map[string]bool {
	m := make(map[string]bool, len(a.active)+1)
	for id := range a.active {
		if a.st.writers[id] {
			m[id] = true
		}
	}
	m[a.st.self] = true
	return m
}

// assignIP gives a domain its address; fresh ones are persisted together
// by persistIPs at the end of the flush (one commit for many domains).
func (a *Actor) assignIP(name string) {
	if a.addrs.assign(name) {
		a.pubChanged[name] = true // the view's entry only: the listing shows no address
	}
}

// persistIPs writes the addresses assigned during the flush.
func (a *Actor) persistIPs() {
	if a.addrs.persist() {
		a.publishHint(messages.HintInterfaces)
	}
}

// onEvaluated takes a domain actor's answer: record it, cast the votes it
// asks for, or (when nothing changes any more) treat the domain as settled.
func (a *Actor) onEvaluated(c actor.Context, m *domain.Evaluated) {
	idx := a.st.domains[m.Domain]
	key := evalKey{m.Version, m.Epoch}
	if a.m.inflight[m.Domain] != key {
		return // stale: a newer evaluation is coming
	}
	if idx == nil || idx.version != m.Version || a.epoch != m.Epoch {
		// Stale, and no newer evaluation was sent: the domain changed
		// while this one was out (its change was deferred).
		a.step(c, Stale{Domain: m.Domain})
		return
	}
	a.results[m.Domain] = m
	a.domainChanged(m.Domain)
	if settled := m.Plan.VoteFor == "" && len(m.Plan.Retract) == 0; !m.Cached && settled && len(idx.claims) > 0 {
		switch m.State.Status {
		case consensus.Resolved:
			a.counts.resolutions++
		case consensus.InsufficientQuorum:
			a.counts.quorumFailures++
		case consensus.Tie:
			a.counts.ties++
		}
	}
	if ws := a.votesFor(m.Domain, m.Plan); len(ws) > 0 && a.writable() {
		// Queue the votes; they are signed and committed together once the
		// burst of evaluations in the mailbox is handled (one fsync for
		// many domains). The domain stays in flight until then.
		a.step(c, QueueVote{Domain: m.Domain, Key: key, Votes: ws, Hold: a.voteHold()})
		return
	}
	if len(idx.claims) == 0 {
		// No claims and our votes retracted: the domain actor's job is done.
		if pid := a.children[m.Domain]; pid != nil {
			c.Stop(pid)
			delete(a.children, m.Domain)
		}
	}
	a.step(c, Settled{Domain: m.Domain})
}

func (a *Actor) votesFor(name string, p consensus.VotePlan) []write {
	var ws []write
	for _, claimant := range p.Retract {
		ws = append(ws, write{key: messages.VoteKey(name, a.st.self, claimant), del: true})
	}
	if p.VoteFor != "" {
		ws = append(ws, write{key: messages.VoteKey(name, a.st.self, p.VoteFor), value: messages.VoteMarker})
	}
	return ws
}

// writable says whether this node may sign ops: it belongs to a network
// and is one of its writers.
func (a *Actor) writable() bool { return a.st.network != "" && a.st.writers[a.st.self] }

// publishGap is the least time between two publishes that nobody here
// waits for. A publish copies the domain map and wakes every subscriber
// (the DNS table, the local-DNS actor, the tunnels, the admin hints), so
// a node that applies a peer's burst of claims and votes, an op every few
// milliseconds, publishes the changes of the next publishGap together: in
// the five-node benchmark the followers' map copies and subscribers were
// a tenth of their CPU. A publish that a request waits for (add-domain
// waits for its domain to settle) goes out at once: pacing those too made
// the writer's clients wait longer, so its claims came in smaller batches
// and the burst made more ops, not fewer.
const publishGap = 20 * time.Millisecond

// publish stores a new view snapshot (the machine then answers the
// waiters whose domain settled, and when nothing is in flight every
// waiter).
//
// The snapshot is built incrementally: the previous one's domain map is
// copied and only the domains marked in pubChanged since (claims touched,
// a new result, a new address, retired) are built again, so a burst of
// claims costs a map copy per publish instead of building every domain's
// entry (the five-node burst publishes hundreds of times). The snapshot
// names the domains it changed (view.Next), so subscribers look at those
// alone.
func (a *Actor) publish() {
	a.version++
	var snap *view.Snapshot
	if prev := a.lastSnap; prev != nil {
		changes := make(map[string]*view.Domain, len(a.pubChanged))
		for name := range a.pubChanged {
			changes[name] = a.viewDomain(name) // nil: the domain leaves the view
		}
		snap = view.Next(prev, a.version, changes)
	} else {
		snap = &view.Snapshot{Version: a.version, Domains: make(map[string]*view.Domain, len(a.st.domains))}
		for name := range a.st.domains {
			if d := a.viewDomain(name); d != nil {
				snap.Domains[name] = d
			}
		}
		view.Derive(nil, snap, nil) // a lineage of its own
	}
	clear(a.pubChanged)
	if a.lastSnap == nil || a.internalChanged {
		snap.Internal = maps.Clone(a.internal)
		a.internalChanged = false
	} else {
		snap.Internal = a.lastSnap.Internal // never changed in place
	}
	a.lastSnap = snap
	if a.d.Published != nil {
		a.d.Published.Store(snap)
	}
}

func (a *Actor) publishHint(t string) {
	if a.sys != nil {
		a.sys.EventStream.Publish(&messages.Hint{Type: t})
	}
}

// viewDomain is name's entry in the view: nil when it has no claims.
func (a *Actor) viewDomain(name string) *view.Domain {
	idx := a.st.domains[name]
	if idx == nil || len(idx.claims) == 0 {
		return nil
	}
	d := &view.Domain{Name: name, Status: consensus.NoClaims}
	if r := a.results[name]; r != nil {
		d.Status = r.State.Status
		if r.State.Status == consensus.Resolved {
			d.Hash, d.Claimant, d.SSL = r.State.Hash, r.State.ResolvedClaimant, r.State.SSL
		}
	}
	if ip, ok := a.addrs.lookup(name); ok {
		d.IP = ip
	}
	return d
}
