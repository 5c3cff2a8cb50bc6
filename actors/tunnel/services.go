package tunnel

import (
	"fmt"
	"log/slog"
	"sort"

	"github.com/asynkron/protoactor-go/actor"

	"peerdns/messages"
)

// Services of a domain.
//
// A client made by tunnel-client-create with a serviceName (the domain's
// owner: ownership is checked at creation) is a service of its domain.
// The supervisor keeps the services array of the local writer's claim
// equal to its own service clients of that domain: after each create,
// delete or move of one, and at start (a crash may have come between the
// client's record and the claim write), it sends the whole list as
// messages.SetClaimServices; the ledger writes a signed op only when the
// list changed. So the owner's node is the only writer of the list and
// every node reads it from the resolved claim (GET /api/domain-services,
// answered by the ledger). The spec's "claim record clients array" is
// written in two arrays of the record: services holds one Service
// {serviceName, key, port, protocol} per such client (its id is
// <domain>_<serviceName>), which is what a subscriber needs to make its
// own client; clients holds the id of every client the owner made for
// the domain with tunnel-client-create, services or not (sorted), so
// every node can tell which clients the owner runs for it. Both are
// written together, by the same triggers, for every owned client
// (isOwned); subscription clients are never listed (they belong to
// another writer's claim).

// receiveServices handles the service and subscription requests and the
// following messages (the tail of Receive).
func (a *Actor) receiveServices(c actor.Context) {
	switch m := c.Message().(type) {
	case *refreshTargets:
		if m.all || a.followsAny(m.names) {
			a.refresh(c)
		}
	case *messages.RestartDomainClients:
		a.restartDomain(c, m.Domain)
	case *messages.DomainAnswered:
		a.answered(c, m.Domain)
	case *messages.ServiceSubscribe:
		c.Respond(&messages.SubscriptionReply{Err: a.subscribe(c, m.Sub)})
	case *messages.ServiceUnsubscribe:
		a.unsubscribe(c, m.Domain, m.ServiceName)
	case *messages.SubscribeAll:
		a.subscribeAll(c, m.Domain)
	case *messages.UnsubscribeAll:
		a.unsubscribeAll(c, m.Domain)
	case *messages.GetSubscriptions:
		c.Respond(a.listSubscriptions())
	}
}

// serviceList is the services array of domain: its service clients here,
// by name.
func (a *Actor) serviceList(domain string) []messages.Service {
	out := []messages.Service{}
	for _, e := range a.clients {
		if e.rec.isService() && e.rec.Opts.Domain == domain {
			o := e.rec.Opts
			out = append(out, messages.Service{ServiceName: o.ServiceName, Key: o.Key, Port: o.Port, Protocol: o.Protocol})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ServiceName < out[j].ServiceName })
	return out
}

// clientList is the clients array of domain: the ids of its owned
// clients here, sorted.
func (a *Actor) clientList(domain string) []string {
	out := []string{}
	for _, e := range a.clients {
		if e.rec.isOwned() && e.rec.Opts.Domain == domain {
			out = append(out, e.rec.ID)
		}
	}
	sort.Strings(out)
	return out
}

// ownedDomains are the domains with owned clients here.
func (a *Actor) ownedDomains() []string {
	set := map[string]bool{}
	for _, e := range a.clients {
		if e.rec.isOwned() {
			set[e.rec.Opts.Domain] = true
		}
	}
	out := make([]string, 0, len(set))
	for d := range set {
		out = append(out, d)
	}
	sort.Strings(out)
	return out
}

// syncServices writes the services and clients of domain into the local
// writer's claim. Not waited for: a failure is logged (the claim may be gone, or
// this node is not yet a writer) and mended at the next change or start.
func (a *Actor) syncServices(c actor.Context, domain string) {
	if a.d.Ledger == nil {
		return
	}
	f := c.RequestFuture(a.d.Ledger, &messages.SetClaimServices{Domain: domain, Services: a.serviceList(domain), Clients: a.clientList(domain)}, a.d.ClaimTimeout)
	c.ReenterAfter(f, func(res any, err error) {
		if err == nil {
			if rep, ok := res.(*messages.SetClaimServicesReply); ok {
				err = rep.Err
			} else {
				err = fmt.Errorf("unexpected reply %T", res)
			}
		}
		if err != nil {
			a.ev.emit(slog.LevelWarn, "", "cannot write the services of the domain's claim", "domain", domain, "err", err)
		}
	})
}
