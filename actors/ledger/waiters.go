package ledger

import "github.com/asynkron/protoactor-go/actor"

// Requests that change a domain are answered once it has settled and the
// view that shows it is published. The add-domain requests committed
// together in one batch form a group, answered together once every domain
// of the batch has settled: answering each as its domain settles spread
// one batch's clients over several publishes, so they came back apart and
// the next batches were smaller (in the five-node burst of 16 waiting
// clients, 1.7 claims per op instead of ~16, and a publish, with its copy
// of the domain map, for nearly every settled domain).

// waiter is a request answered once its domain (or, for "", everything)
// has settled and the view is published.
type waiter struct {
	domain  string
	group   uint64 // waiters of one group are answered together
	respond func()
}

// settledMark marks a waiter whose domain has settled.
const settledMark = "\x00settled"

// newGroup starts a group of waiters.
func (a *Actor) newGroup() uint64 {
	a.lastGroup++
	return a.lastGroup
}

// wait answers respond once domain has settled ("" = everything settled),
// together with the other waiters of group (newGroup).
func (a *Actor) wait(c actor.Context, group uint64, name string, respond func()) {
	a.waiters = append(a.waiters, waiter{domain: name, group: group, respond: respond})
	a.unsettled[group]++
	if _, busy := a.inflight[name]; name != "" && !busy && !a.dirty[name] && !a.deferred[name] {
		a.settled(c, name)
	}
	a.schedulePublish(c)
}

// settled marks the waiters of a domain settled, and publishes at once if
// that completes a group.
func (a *Actor) settled(c actor.Context, name string) {
	for i := range a.waiters {
		if w := &a.waiters[i]; w.domain == name {
			w.domain = settledMark
			if a.unsettled[w.group]--; a.unsettled[w.group] == 0 {
				a.readyGroups++
			}
		}
	}
	a.schedulePublish(c)
}

// answerable says whether the next publish answers a waiter: a group has
// settled, or nothing is in flight (which answers every waiter).
func (a *Actor) answerable() bool {
	return a.readyGroups > 0 || len(a.waiters) > 0 && a.idle()
}

// idle says whether no evaluation is in flight, due or deferred.
func (a *Actor) idle() bool {
	return len(a.inflight) == 0 && len(a.dirty) == 0 && len(a.deferred) == 0
}

// answerWaiters answers, after a publish, the waiters whose group has
// settled (every waiter when nothing is in flight).
func (a *Actor) answerWaiters() {
	idle := a.idle()
	keep := a.waiters[:0]
	var ready []waiter
	for _, w := range a.waiters {
		if idle || w.domain == settledMark && a.unsettled[w.group] == 0 {
			ready = append(ready, w)
		} else {
			keep = append(keep, w)
		}
	}
	clear(a.waiters[len(keep):]) // drop the answered closures
	a.waiters = keep
	for _, w := range ready {
		delete(a.unsettled, w.group)
	}
	a.readyGroups = 0 // every settled group was answered
	for _, w := range ready {
		w.respond()
	}
}
