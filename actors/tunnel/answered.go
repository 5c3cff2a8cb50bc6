package tunnel

import (
	"github.com/asynkron/protoactor-go/actor"

	"peerdns/messages"
)

// DNS-triggered clients.
//
// A DNS answer for a resolved p2p domain (messages.DomainAnswered, sent
// by the DNS server at most once a second per domain, never from its
// answer path) means a program is about to connect to the domain's local
// IP. For a domain this node follows (subscriptions, subscribe-all, or an
// admin-made client of the domain's hash), the supervisor makes sure
// those clients run: it asks the ledger for the claim in force and
// follows it (a service added since is subscribed to under
// subscribe-all, a moved key is followed), and wakes every client of the
// domain, so one waiting with backoff for its port or its server tries
// again at once instead of after up to LookupBackoff.Max. A domain with
// no client here costs one map walk.

// wakeClient is sent to a client actor: cut its current wait short.
type wakeClient struct{}

// answered handles messages.DomainAnswered.
func (a *Actor) answered(c actor.Context, domain string) {
	if a.halted {
		return
	}
	d := normDomain(domain)
	follows := a.subAll[d]
	for _, e := range a.clients {
		if e.rec.Opts.Domain != d {
			continue
		}
		follows = follows || e.rec.Follow != ""
		if e.pid != nil {
			c.Send(e.pid, &wakeClient{})
		}
	}
	if !follows || a.d.Ledger == nil {
		return
	}
	a.askTargets(c, []string{d}, func(t map[string]messages.DomainTarget) {
		if t != nil {
			a.follow(c, t)
		}
	})
}
