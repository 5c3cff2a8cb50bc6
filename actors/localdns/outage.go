package localdns

import (
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"
)

// An unreachable upstream pauses the conflict checks.
//
// When the lookups of outageAfter different domains fail in a row (no
// lookup answering in between), the resolver is taken as down: the checks
// not yet sent wait (in waiting) instead of each failing and backing off
// on its own, and one probe (a
// waiting domain's lookup) goes out after RetryFirst, doubling up to the
// recheck interval while it keeps failing. The first lookup that answers
// sends every waiting check, paced as usual. A resolver that is down
// would otherwise be asked once per p2p domain, each lookup costing a
// socket, a timeout or an ICMP error and a backoff timer: in the
// five-node benchmark (upstream on a closed port) those lookups were the
// largest single cost, 12% of the nodes' CPU during a burst of 1,000
// claims. A domain that fails while others answer (its own SERVFAIL)
// keeps its per-domain backoff; one domain failing again and again on its
// own never counts as an outage (the streak counts domains, not
// failures).
const outageAfter = 3

type outage struct {
	streak  map[string]bool // domains whose lookups failed since the last answer
	down    *atomic.Bool    // read by the lookups waiting for their turn
	waiting map[string]bool
	probes  int  // failed probes in a row
	probing bool // a probe's lookup is out
	timer   bool // a probeUpstream is scheduled
}

// probeUpstream asks for the next probe while the upstream is down.
type probeUpstream struct{}

// deferredCheck returns a lookup that found the upstream down when its
// turn came; its domain waits with the others.
type deferredCheck struct {
	domain string
	round  uint64
}

func (a *Actor) resetOutage() {
	a.out = outage{down: &atomic.Bool{}, waiting: map[string]bool{}, streak: map[string]bool{}}
}

// want looks name up now, or after the outage.
func (a *Actor) want(c actor.Context, name string) {
	if a.out.down.Load() {
		a.out.waiting[name] = true
		a.scheduleProbe(c, a.probeDelay())
		return
	}
	a.checked[name] = true
	a.check(c, name, false)
}

func (a *Actor) probeDelay() time.Duration {
	return retryDelay(max(a.out.probes, 1), a.d.RecheckEvery, a.d.RetryFirst)
}

func (a *Actor) scheduleProbe(c actor.Context, after time.Duration) {
	if a.out.timer || a.out.probing {
		return
	}
	a.out.timer = true
	sys, self, ctx := c.ActorSystem(), c.Self(), a.ctx
	time.AfterFunc(after, func() {
		if ctx.Err() == nil {
			sys.Root.Send(self, &probeUpstream{})
		}
	})
}

// probe sends one waiting domain's lookup, past the pause.
func (a *Actor) probe(c actor.Context) {
	a.out.timer = false
	if !a.out.down.Load() || a.out.probing {
		return
	}
	for name := range a.out.waiting {
		delete(a.out.waiting, name)
		if !a.names[name] {
			continue // no longer a p2p domain
		}
		a.out.probing = true
		a.checked[name] = true
		a.check(c, name, true)
		return
	}
	// Nothing waits: the next domain to check schedules a probe.
}

// lookupAnswered notes that the upstream answered; after an outage every
// waiting domain is checked.
func (a *Actor) lookupAnswered(c actor.Context) {
	clear(a.out.streak)
	if !a.out.down.Load() {
		return
	}
	a.out.down.Store(false)
	a.out.probes = 0
	a.d.Log.Info("upstream resolver answers again: conflict checks resumed", "waiting", len(a.out.waiting))
	waiting := a.out.waiting
	a.out.waiting = map[string]bool{}
	for name := range waiting {
		if a.names[name] && !a.checked[name] {
			a.want(c, name)
		}
	}
}

// lookupFailed notes a failed lookup; true when the upstream is down
// (the domain then waits for it instead of backing off on its own).
func (a *Actor) lookupFailed(c actor.Context, domain string, probe bool, err error) bool {
	if a.out.down.Load() {
		if probe {
			a.out.probes++
			delay := a.probeDelay()
			a.d.Log.Debug("upstream resolver still down", "waiting", len(a.out.waiting)+1, "nextProbe", delay.String(), "err", err)
			a.scheduleProbe(c, delay)
		}
		return true
	}
	a.out.streak[domain] = true
	if len(a.out.streak) < outageAfter {
		return false
	}
	a.out.down.Store(true)
	a.out.probes = 1
	delay := a.probeDelay()
	a.d.Log.Warn("upstream resolver not answering: conflict checks paused until it does", "domainsFailedInARow", len(a.out.streak),
		"nextProbe", delay.String(), "err", err)
	a.scheduleProbe(c, delay)
	return true
}
