package tunnel

import (
	"log/slog"
	"slices"
	"sort"

	"github.com/asynkron/protoactor-go/actor"

	"peerdns/internal/view"
	"peerdns/messages"
)

// Following consensus.
//
// A client's key follows the claim in force for its domain on this node
// (messages.DomainTarget, answered by the ledger): the resolved claim, or
// the local writer's own lost claim when its hash preference is "local".
// What a client follows is fixed at creation (clientRecord.Follow):
//
//   - followDomain: an admin-made client whose key was the hash of the
//     claim in force when it was made (it is "the domain's client"); it
//     moves to the hash of the claim in force.
//   - followService: a subscription client; it moves to the key of the
//     service of its name in the claim in force (and keeps its key while
//     that claim does not list the service).
//   - "": an admin-made client for some other key (e.g. a service of its
//     own): its key never changes.
//
// The supervisor asks the ledger for the targets of the domains it
// follows whenever a new view changed one of them (resolutions, claim
// rewrites: the view names the domains it changed, view.Snapshot.Changed;
// a burst of claims publishes hundreds of views that change none of
// them) or a hash preference changed (messages.HashPreferenceChanged on
// the event stream). A client whose key must change is stopped (its
// connections closed, its port freed) and started again on the new key;
// an owner's service that moved is written to its claim again.
//
// A DNS answer for a followed domain also makes the supervisor follow it
// at once (answered.go).
const (
	followDomain  = "domain"
	followService = "service"
)

// refreshTargets is a self-message: ask the ledger for the claims in
// force and follow them; when not all, only if one of names (the domains
// a new view changed) is followed.
type refreshTargets struct {
	all   bool
	names []string
}

// follower is the supervisor's following state; touched only from Receive.
type follower struct {
	cancel     []func() // the view and event stream subscriptions
	refreshing bool     // a GetDomainTargets is out
	again      bool     // something changed while it was out
}

// followOf says what a new admin-made client follows: the domain when its
// key is the hash of the claim in force.
func followOf(key, hash string) string {
	if hash != "" && sameKey(key, hash) {
		return followDomain
	}
	return ""
}

// sameKey compares two hs:// keys, case aside.
func sameKey(a, b string) bool {
	ka, err := parseClientKey(a)
	if err != nil {
		return false
	}
	kb, err := parseClientKey(b)
	return err == nil && ka.Plain == kb.Plain
}

func (a *Actor) startFollow(c actor.Context) {
	if a.d.Ledger == nil {
		return
	}
	self, root := c.Self(), c.ActorSystem().Root
	poke := func() { root.Send(self, &refreshTargets{all: true}) }
	if a.d.View != nil {
		var last *view.Snapshot // called from one goroutine (view.Publisher)
		a.fol.cancel = append(a.fol.cancel, a.d.View.Subscribe(func(v *view.Snapshot) {
			m := &refreshTargets{all: last == nil}
			if last != nil {
				m.names = v.Changed(last)
			}
			last = v
			if m.all || len(m.names) > 0 {
				root.Send(self, m)
			}
		}))
	}
	es := c.ActorSystem().EventStream
	sub := es.Subscribe(func(ev any) {
		if _, ok := ev.(*messages.HashPreferenceChanged); ok {
			poke()
		}
	})
	a.fol.cancel = append(a.fol.cancel, func() { es.Unsubscribe(sub) })
}

func (a *Actor) stopFollow() {
	for _, f := range a.fol.cancel {
		f()
	}
	a.fol.cancel = nil
}

// followsAny reports whether one of names is followed here.
func (a *Actor) followsAny(names []string) bool {
	followed := a.followedDomains()
	if len(followed) == 0 {
		return false
	}
	for _, n := range names {
		if _, ok := slices.BinarySearch(followed, n); ok {
			return true
		}
	}
	return false
}

// followedDomains are the domains whose claim in force matters here.
func (a *Actor) followedDomains() []string {
	set := map[string]bool{}
	for _, e := range a.clients {
		if e.rec.Follow != "" {
			set[e.rec.Opts.Domain] = true
		}
	}
	for d := range a.subAll {
		set[d] = true
	}
	out := make([]string, 0, len(set))
	for d := range set {
		out = append(out, d)
	}
	sort.Strings(out)
	return out
}

// refresh asks the ledger for the targets of the followed domains and
// follows them; one request at a time, the changes meanwhile coalesced.
func (a *Actor) refresh(c actor.Context) {
	if a.halted || a.d.Ledger == nil {
		return
	}
	if a.fol.refreshing {
		a.fol.again = true
		return
	}
	domains := a.followedDomains()
	if len(domains) == 0 {
		return
	}
	a.fol.refreshing = true
	a.askTargets(c, domains, func(t map[string]messages.DomainTarget) {
		a.fol.refreshing = false
		if t != nil {
			a.follow(c, t)
		}
		if a.fol.again {
			a.fol.again = false
			a.refresh(c)
		}
	})
}

// askTargets asks the ledger for the targets of domains and calls then
// inside Receive with them (nil when the ledger did not answer).
func (a *Actor) askTargets(c actor.Context, domains []string, then func(map[string]messages.DomainTarget)) {
	f := c.RequestFuture(a.d.Ledger, &messages.GetDomainTargets{Domains: domains}, a.d.ClaimTimeout)
	c.ReenterAfter(f, func(res any, err error) {
		rep, ok := res.(*messages.GetDomainTargetsReply)
		if err != nil || !ok {
			a.ev.emit(slog.LevelWarn, "", "cannot learn the claims in force from the ledger", "err", err)
			then(nil)
			return
		}
		then(rep.Targets)
	})
}

// follow moves every following client onto its target's key and
// subscribes to new services of subscribe-all domains.
func (a *Actor) follow(c actor.Context, targets map[string]messages.DomainTarget) {
	if a.halted {
		return
	}
	for _, id := range a.sortedClientIDs() {
		e := a.clients[id]
		if want := wantKey(e.rec, targets); want != "" && !sameKey(want, e.rec.Opts.Key) {
			a.retarget(c, e, want)
		}
	}
	a.subscribeNew(c, targets)
}

// wantKey is the key a client should use now ("" keep it).
func wantKey(r clientRecord, targets map[string]messages.DomainTarget) string {
	t, ok := targets[r.Opts.Domain]
	if !ok {
		return ""
	}
	switch r.Follow {
	case followDomain:
		return t.Hash
	case followService:
		for _, s := range t.Services {
			if s.ServiceName == r.Opts.ServiceName {
				return s.Key
			}
		}
	}
	return ""
}

// retarget restarts a client on a new key: the old incarnation stops
// (connections closed, port freed), then a new one starts. The entry is
// replaced at once, so listings show the new key; it has no pid until the
// old actor stopped.
func (a *Actor) retarget(c actor.Context, e *clientEntry, want string) {
	k, err := parseClientKey(want)
	if err != nil {
		a.ev.emit(slog.LevelWarn, e.rec.ID, "the claim in force has a key a client cannot use", "key", want, "err", err)
		return
	}
	r := e.rec
	r.Opts.Key = urlScheme + k.Plain
	if a.d.Store != nil {
		if err := saveJSON(a.d.Store, clientPrefix+r.ID, r); err != nil {
			a.ev.emit(slog.LevelError, r.ID, "cannot move tunnel client to the claim in force", "err", err)
			return
		}
	}
	ne := &clientEntry{rec: r, key: k, stats: e.stats, prev: e.prev}
	if e.pid != nil {
		ne.prev = c.StopFuture(e.pid)
	}
	ne.status.set(messages.TunnelStarting, "", "")
	a.clients[r.ID] = ne
	a.ev.emit(slog.LevelInfo, r.ID, "tunnel client follows the claim in force", "from", e.rec.Opts.Key, "to", r.Opts.Key)
	a.ev.hint(messages.HintTunnelClients)
	start := func() {
		if a.clients[r.ID] != ne || a.halted {
			return // deleted or moved again meanwhile
		}
		ne.pid = c.Spawn(clientProps(a.d, a.ev, a.reg, ne))
		if r.isOwned() {
			a.syncServices(c, r.Opts.Domain)
		}
	}
	// While a previous move still stops the old actor, this one waits
	// for the same stop.
	c.ReenterAfter(ne.prev, func(any, error) { start() })
}

// restartDomain answers restart-tunnel-clients-for-domain: every client
// of the domain moves to the key now in force or, when it is there
// already, restarts (connections closed, port freed, bound again). The
// IP comes from the view: the ledger assigns one to every domain with a
// claim on every node; a client waits in "starting" until there is one.
func (a *Actor) restartDomain(c actor.Context, domain string) {
	d := normDomain(domain)
	if d == "" {
		c.Respond(&messages.TunnelWriteReply{Err: badf("domain is required")})
		return
	}
	sender := c.Sender()
	restart := func(targets map[string]messages.DomainTarget) {
		var fs []*actor.Future
		for _, id := range a.sortedClientIDs() {
			e := a.clients[id]
			if e.rec.Opts.Domain != d {
				continue
			}
			if want := wantKey(e.rec, targets); want != "" && !sameKey(want, e.rec.Opts.Key) {
				a.retarget(c, e, want)
				e = a.clients[id]
			}
			if e.pid != nil {
				fs = append(fs, c.RequestFuture(e.pid, &messages.RestartTunnelClient{}, a.d.ClaimTimeout))
			} else if e.prev != nil { // being moved: it starts afresh once the old actor stopped
				fs = append(fs, e.prev)
			}
		}
		a.ev.emit(slog.LevelInfo, "", "tunnel clients of the domain restarted", "domain", d)
		a.ev.hint(messages.HintTunnelClients)
		var wait func(i int)
		wait = func(i int) {
			if i == len(fs) {
				if sender != nil {
					c.Send(sender, &messages.TunnelWriteReply{})
				}
				return
			}
			c.ReenterAfter(fs[i], func(any, error) { wait(i + 1) })
		}
		wait(0)
	}
	if a.d.Ledger == nil {
		restart(nil)
		return
	}
	a.askTargets(c, []string{d}, restart)
}

func (a *Actor) sortedClientIDs() []string {
	ids := make([]string, 0, len(a.clients))
	for id := range a.clients {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	return ids
}
