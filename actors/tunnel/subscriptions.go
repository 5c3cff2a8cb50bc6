package tunnel

import (
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"strings"

	"github.com/asynkron/protoactor-go/actor"

	"peerdns/messages"
)

// Subscriptions.
//
// A subscription is a tunnel client <domain>_<serviceName> whose record
// says followService (clientRecord.Follow): the record is the
// subscription, so the client and its subscription are persisted in one
// write and cannot part. It listens on this node's local IP for the
// domain (the ledger assigns one to every claimed domain on every node,
// owned or not) and the port the subscriber chose, and its key follows
// the service of that name in the claim in force (follow.go). No
// ownership check: a subscriber is not the domain's owner.
//
// subscribe-all is a persisted flag per domain ("tunnel:suball:<domain>")
// : each time the supervisor follows the claims in force it subscribes to
// the services of those domains it has no client for (on the service's
// own port). A service that disappears from the claim keeps its
// subscription (and its last key) until unsubscribed. Deleting a
// subscription client by id (tunnel-client-delete) ends the subscription.

// allRecord is a subscribe-all flag as persisted.
type allRecord struct {
	Domain string `json:"domain"`
}

func (a *Actor) loadSubscribeAll() {
	if a.d.Store == nil {
		return
	}
	recs, bad, err := loadRecords[allRecord](a.d.Store, allPrefix)
	if err != nil {
		panic(err) // the store is broken: restart with backoff
	}
	for _, k := range bad {
		a.ev.emit(slog.LevelError, "", "stored subscribe-all does not decode; skipped", "key", k)
	}
	for _, r := range recs {
		if d := normDomain(r.Domain); validHostname(d) {
			a.subAll[d] = true
		}
	}
}

// subscribe makes the subscription client for s.
func (a *Actor) subscribe(c actor.Context, s messages.Subscription) error {
	o := messages.TunnelClientOpts{Domain: s.Domain, Key: s.Key, Port: s.Port, Protocol: s.Protocol, ServiceName: s.ServiceName}
	if strings.TrimSpace(o.ServiceName) == "" {
		return badf("serviceName is required")
	}
	o, key, err := normClientOpts(o)
	if err != nil {
		return err
	}
	id := o.Domain + "_" + o.ServiceName
	if e := a.clients[id]; e != nil {
		if e.rec.isSubscription() {
			return fmt.Errorf("%w: %s", messages.ErrAlreadySubscribed, id)
		}
		return fmt.Errorf("%w: tunnel client %s exists (this node's own service)", messages.ErrAlreadySubscribed, id)
	}
	if _, err := a.newClient(c, o, key, followService); err != nil {
		return err
	}
	a.refresh(c) // onto the key in force, if the claim says otherwise
	return nil
}

// unsubscribe deletes a subscription client; the reply comes once it
// stopped.
func (a *Actor) unsubscribe(c actor.Context, domain, service string) {
	d, name := normDomain(domain), strings.TrimSpace(service)
	if d == "" || name == "" {
		c.Respond(&messages.SubscriptionReply{Err: badf("domain and serviceName are required")})
		return
	}
	// The id does not say where the domain ends ('_' may be in both).
	e := a.clients[d+"_"+name]
	if e == nil || !e.rec.isSubscription() || e.rec.Opts.Domain != d || e.rec.Opts.ServiceName != name {
		c.Respond(&messages.SubscriptionReply{Err: fmt.Errorf("%w: %s %s", messages.ErrNotSubscribed, d, name)})
		return
	}
	if err := a.dropSubscription(c, e); err != nil {
		c.Respond(&messages.SubscriptionReply{Err: err})
		return
	}
	a.replyAfter(c, &messages.SubscriptionReply{}, a.stopClient(c, e))
}

func (a *Actor) dropSubscription(c actor.Context, e *clientEntry) error {
	if a.d.Store != nil {
		if err := a.d.Store.Delete(clientPrefix + e.rec.ID); err != nil {
			return fmt.Errorf("forget subscription %s: %w", e.rec.ID, err)
		}
	}
	a.forgetClient(c, e)
	return nil
}

// subscribeAll turns subscribe-all on for a domain and subscribes to its
// current services; the reply comes once that is done.
func (a *Actor) subscribeAll(c actor.Context, domain string) {
	d := normDomain(domain)
	if d == "" || !validHostname(d) {
		c.Respond(&messages.SubscriptionReply{Err: badf("domain %q is not a domain name", domain)})
		return
	}
	if a.d.Store != nil {
		if err := saveJSON(a.d.Store, allPrefix+d, allRecord{Domain: d}); err != nil {
			c.Respond(&messages.SubscriptionReply{Err: err})
			return
		}
	}
	a.subAll[d] = true
	a.ev.emit(slog.LevelInfo, "", "subscribed to all services of the domain", "domain", d)
	a.ev.hint(messages.HintTunnelClients) // the domain is listed with the clients, services or not
	if a.d.Ledger == nil {
		c.Respond(&messages.SubscriptionReply{})
		return
	}
	sender := c.Sender()
	a.askTargets(c, []string{d}, func(t map[string]messages.DomainTarget) {
		if t != nil {
			a.subscribeNew(c, t)
		}
		if sender != nil {
			c.Send(sender, &messages.SubscriptionReply{})
		}
	})
}

// subscribeNew subscribes to the services of subscribe-all domains that
// have no client here yet.
func (a *Actor) subscribeNew(c actor.Context, targets map[string]messages.DomainTarget) {
	for d := range a.subAll {
		t, ok := targets[d]
		if !ok {
			continue
		}
		for _, s := range t.Services {
			if a.clients[d+"_"+s.ServiceName] != nil {
				continue
			}
			err := a.subscribe(c, messages.Subscription{Domain: d, ServiceName: s.ServiceName, Key: s.Key, Port: s.Port, Protocol: s.Protocol})
			if err != nil && !errors.Is(err, messages.ErrAlreadySubscribed) {
				a.ev.emit(slog.LevelWarn, d+"_"+s.ServiceName, "subscribe-all: cannot subscribe to the service", "err", err)
			}
		}
	}
}

// unsubscribeAll turns subscribe-all off and deletes every subscription
// of the domain; the reply comes once their clients stopped.
func (a *Actor) unsubscribeAll(c actor.Context, domain string) {
	d := normDomain(domain)
	if d == "" {
		c.Respond(&messages.SubscriptionReply{Err: badf("domain is required")})
		return
	}
	if a.d.Store != nil {
		if err := a.d.Store.Delete(allPrefix + d); err != nil {
			c.Respond(&messages.SubscriptionReply{Err: fmt.Errorf("forget subscribe-all %s: %w", d, err)})
			return
		}
	}
	delete(a.subAll, d)
	a.ev.hint(messages.HintTunnelClients) // as subscribeAll's, subscriptions or not
	var fs []*actor.Future
	for _, id := range a.sortedClientIDs() {
		e := a.clients[id]
		if e.rec.Opts.Domain != d || !e.rec.isSubscription() {
			continue
		}
		if err := a.dropSubscription(c, e); err != nil {
			c.Respond(&messages.SubscriptionReply{Err: err})
			return
		}
		fs = append(fs, a.stopClient(c, e))
	}
	a.ev.emit(slog.LevelInfo, "", "unsubscribed from all services of the domain", "domain", d, "subscriptions", len(fs))
	a.replyAfter(c, &messages.SubscriptionReply{}, fs...)
}

func (a *Actor) listSubscriptions() *messages.GetSubscriptionsReply {
	rep := &messages.GetSubscriptionsReply{Subscriptions: []messages.Subscription{}, AllDomains: []string{}}
	for _, e := range a.listEntries() {
		if e.rec.isSubscription() {
			o := e.rec.Opts
			rep.Subscriptions = append(rep.Subscriptions, messages.Subscription{
				Domain: o.Domain, ServiceName: o.ServiceName, Key: o.Key, Port: o.Port, Protocol: o.Protocol})
		}
	}
	for d := range a.subAll {
		rep.AllDomains = append(rep.AllDomains, d)
	}
	sort.Strings(rep.AllDomains)
	return rep
}
