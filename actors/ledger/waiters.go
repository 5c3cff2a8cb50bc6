package ledger

import "time"

// Requests that change a domain are answered once it has settled and the
// view that shows it is published. The add-domain requests committed
// together in one batch form a group, answered together once every domain
// of the batch has settled: answering each as its domain settles spread
// one batch's clients over several publishes, so they came back apart and
// the next batches were smaller (in the five-node burst of 16 waiting
// clients, 1.7 claims per op instead of ~16, and a publish, with its copy
// of the domain map, for nearly every settled domain).
//
// A change is committed (signed, fsynced) before its request waits, so
// waiting only makes a following read see the settled result. Under load
// (a burst of claims on a busy machine, votes arriving for every domain
// all the while) a domain can stay unsettled for seconds, and the admin
// API stops waiting after httpx.AskTimeout (5 s): the client got a 500
// for a claim that was made. So a waiter is answered at the first
// publish once waitLimit has passed since the request arrived (the time
// its claim waited for the group commit counts: under that load the
// commit itself came up to 2 s after the request), settled or not; a
// read that follows may then show the domain still being decided.
//
// The waiters live in the machine (machine.go): a waiter's reply is
// opaque to it (the actor's reply; a test's string) and comes back in
// Output.Replies when it is to be answered.

// waiter is a request answered once its domain (or, for "", everything)
// has settled and the view is published.
type waiter struct {
	domain string
	group  uint64 // waiters of one group are answered together
	reply  any
	since  time.Time
}

// waitLimit is how long a request waits for its domain to settle before
// it is answered anyway (below the admin API's 5 s).
const waitLimit = 3 * time.Second

// settledMark marks a waiter whose domain has settled.
const settledMark = "\x00settled"

// wait answers reply once domain has settled ("" = everything settled),
// together with the other waiters of group; since is when its request
// arrived.
func (m *machine) wait(group uint64, name string, reply any, now, since time.Time) {
	m.waiters = append(m.waiters, waiter{domain: name, group: group, reply: reply, since: since})
	m.unsettled[group]++
	if _, busy := m.inflight[name]; name != "" && !busy && !m.dirty[name] && !m.deferred[name] {
		m.settled(name, now)
	}
	m.schedulePublish(now)
}

// settled marks the waiters of a domain settled, and publishes at once if
// that completes a group.
func (m *machine) settled(name string, now time.Time) {
	for i := range m.waiters {
		if w := &m.waiters[i]; w.domain == name {
			w.domain = settledMark
			if m.unsettled[w.group]--; m.unsettled[w.group] == 0 {
				m.readyGroups++
			}
		}
	}
	m.schedulePublish(now)
}

// answerable says whether the next publish answers a waiter: a group has
// settled, or nothing is in flight (which answers every waiter).
func (m *machine) answerable() bool {
	return m.readyGroups > 0 || len(m.waiters) > 0 && m.idle()
}

// idle says whether no evaluation is in flight, due or deferred.
func (m *machine) idle() bool {
	return len(m.inflight) == 0 && len(m.dirty) == 0 && len(m.deferred) == 0
}

// answerWaiters adds to the output, at a publish, the replies of the
// waiters whose group has settled (every waiter when nothing is in
// flight), and of those older than waitLimit (a group's waiters share
// their start, so a group goes together).
func (m *machine) answerWaiters(now time.Time) {
	idle := m.idle()
	keep := m.waiters[:0]
	var ready []waiter
	for _, w := range m.waiters {
		old := m.waitLimit > 0 && now.Sub(w.since) >= m.waitLimit
		if idle || old || w.domain == settledMark && m.unsettled[w.group] == 0 {
			ready = append(ready, w)
		} else {
			keep = append(keep, w)
		}
	}
	clear(m.waiters[len(keep):]) // drop the answered replies
	m.waiters = keep
	for _, w := range ready {
		delete(m.unsettled, w.group)
	}
	m.readyGroups = 0 // every settled group was answered
	for _, w := range ready {
		m.out.Replies = append(m.out.Replies, w.reply)
	}
}
