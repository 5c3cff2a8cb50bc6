// Package localdns is the actor that owns the node's local DNS records,
// the per-domain version preferences (the selector cache: p2p or public)
// and the list of p2p domains that also resolve in public DNS.
//
// It persists everything in the node store (keys under "localdns:") and,
// after every committed change, publishes an immutable messages.LocalSnapshot
// that the DNS server compiles into its answer table. The server checks
// its table against the published snapshot on every query, so a write is
// answered in DNS from the moment the reply to the admin API is sent,
// while the compile itself runs outside this actor. Conflicts are found
// by asking public DNS (through the DNS server's upstream, never its own
// data) in the background whenever a p2p domain appears in the view,
// paced (lookupRate) so a burst of claims does not flood the resolver. A
// lookup that fails (no upstream answers) is retried for that domain
// alone after a backoff (RetryFirst, doubling up to RecheckEvery), not
// at every view change: a burst of claims publishes hundreds of views,
// and retrying every failed domain at each one cost the node a fifth of
// its CPU in the five-node benchmark. Failures are logged as one warning
// a minute with the count of failing domains. When several lookups in a
// row fail, whatever their domains, the upstream is taken as down and the
// checks pause until a probe gets an answer (outage.go).
// Its requests and replies are in messages/localdns.go.
//
// It must never be asked from the DNS answer path: readers use the
// published snapshot. Everything it starts (the view subscription, the
// recheck ticker, the public lookups) ends when it stops or restarts.
package localdns

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"golang.org/x/time/rate"

	"peerdns/internal/store"
	"peerdns/internal/view"
	"peerdns/messages"
	"peerdns/supervisor"
)

// Deps are what the actor needs from the node.
type Deps struct {
	Store     *store.DB            // node.db
	Published *view.LocalPublished // the snapshot the DNS server reads; shared with dns.New
	// View and PublicLookup drive conflict detection; with either nil no
	// conflicts are looked for. PublicLookup is dns.Server.PublicLookup:
	// the public IPv4 of a name, "" when it has none.
	View         *view.Published
	PublicLookup func(ctx context.Context, name string) (string, error)
	CheckTimeout time.Duration // per public lookup; default 10s
	// RecheckEvery repeats the public lookups of every p2p domain (public
	// DNS changes too); default 1h, negative disables.
	RecheckEvery time.Duration
	// RetryFirst is the wait before a failed lookup (or, with the
	// upstream down, the next probe) is tried again; it doubles with
	// each failure in a row, up to RecheckEvery. Default 5s.
	RetryFirst time.Duration
	Log        *slog.Logger
}

// Props builds the actor. A crash restarts it (the parent's strategy);
// the new incarnation reloads its state from the store.
func Props(d Deps) *actor.Props {
	if d.Log == nil {
		d.Log = slog.Default()
	}
	if d.Published == nil {
		d.Published = &view.LocalPublished{}
	}
	if d.CheckTimeout <= 0 {
		d.CheckTimeout = 10 * time.Second
	}
	if d.RecheckEvery == 0 {
		d.RecheckEvery = time.Hour
	}
	if d.RetryFirst <= 0 {
		d.RetryFirst = 5 * time.Second
	}
	return actor.PropsFromProducer(func() actor.Actor { return &Actor{d: d} },
		actor.WithSupervisor(supervisor.Backoff()))
}

// maxLookups bounds concurrent public lookups (each holds an upstream
// query for up to CheckTimeout).
const maxLookups = 8

// lookupRate and lookupBurst pace the public lookups: a burst of claims
// (or a node joining a network of thousands of domains) would otherwise
// send a query per domain to the user's resolver at once. The checks are
// advisory, so a network's 1,000 new domains are checked over ~10 s, and
// the node's CPU goes to agreeing on them first (the lookups were 8% of
// a node's CPU during the five-node burst).
const (
	lookupRate  = 100 // per second
	lookupBurst = 20
)

// Actor owns the local DNS state. Fields are touched only from Receive;
// each incarnation has its own (a restart starts from the store).
type Actor struct {
	d       Deps
	st      *state
	version uint64          // of the last published snapshot
	checked map[string]bool // p2p domains whose public lookup ran or runs
	// round counts rechecks: a lookup's answer that comes back after a
	// recheck started is dropped (the recheck's own lookup answers), or
	// an answer read before public DNS changed could land last.
	round uint64
	names map[string]bool // resolved p2p domains of the latest view
	// failed counts the consecutive failed lookups of a domain (its
	// retry backoff); warnedAt is when a failure was last logged.
	failed   map[string]int
	warnedAt time.Time
	out      outage // the upstream as a whole (outage.go)

	// queue holds the public lookups waiting for one of the maxLookups
	// workers; running counts those under way (check, pump).
	queue   []pendingCheck
	running int

	// The goroutines of this incarnation — the view subscription's
	// notifier, the recheck ticker and the running public lookups — end
	// in halt, which Stopping and Restarting call.
	unsub  func()             // cancels the view subscription
	ctx    context.Context    // cancelled by halt
	cancel context.CancelFunc //
	wg     sync.WaitGroup     // the ticker and the lookups
	pace   *rate.Limiter      // lookupRate: shared by this incarnation's lookups
}

// Receive handles one message.
func (a *Actor) Receive(c actor.Context) {
	switch m := c.Message().(type) {
	case *actor.Started:
		a.start(c)
	case *actor.Stopping, *actor.Restarting:
		a.halt()
	case *messages.GetLocalDNS:
		c.Respond(&messages.GetLocalDNSReply{Records: a.st.list(), Conflicts: a.st.conflictList()})
	case *messages.GetSelectorCache:
		c.Respond(&messages.GetSelectorCacheReply{Prefs: a.st.snapshot(0).Prefs})
	case *messages.AddLocalRecord:
		if err := checkWildcard(m.Record.Name, a.view()); err != nil {
			c.Respond(&messages.LocalDNSWriteReply{Err: err})
			return
		}
		next, ws, err := a.st.add(m.Record)
		c.Respond(&messages.LocalDNSWriteReply{Err: a.apply(c, next, ws, err)})
	case *messages.UpdateLocalRecord:
		if err := checkWildcard(m.Record.Name, a.view()); err != nil {
			c.Respond(&messages.LocalDNSWriteReply{Err: err})
			return
		}
		next, ws, err := a.st.update(m.Index, m.Record)
		c.Respond(&messages.LocalDNSWriteReply{Err: a.apply(c, next, ws, err)})
	case *messages.DeleteLocalRecord:
		next, ws, err := a.st.delete(m.Index)
		c.Respond(&messages.LocalDNSWriteReply{Err: a.apply(c, next, ws, err)})
	case *messages.SetVersionPreference:
		next, ws, err := a.st.setPref(m.Domain, m.Version)
		c.Respond(&messages.LocalDNSWriteReply{Err: a.apply(c, next, ws, err)})
	case *viewChanged:
		a.viewChanged(c, m)
	case *messages.RecheckDNSConflicts:
		// Forget what was checked; the last view's domains are looked up
		// again (nothing to do before the first view).
		a.checked = map[string]bool{}
		a.failed = map[string]int{}
		a.round++
		if !a.out.down.Load() {
			for name := range a.names {
				a.want(c, name)
			}
			return
		}
		// The upstream is down; the operator asking may just have fixed
		// it: every domain waits, and a probe goes now.
		for name := range a.names {
			a.out.waiting[name] = true
		}
		a.out.probes = 0
		c.Send(c.Self(), &probeUpstream{})
	case *conflictChecked:
		a.running--
		a.conflictChecked(c, m)
		a.pump(c)
	case *retryCheck:
		if a.names[m.domain] && a.failed[m.domain] > 0 && !a.checked[m.domain] {
			a.want(c, m.domain)
		}
	case *probeUpstream:
		a.probe(c)
	case *deferredCheck:
		a.running--
		if a.checked[m.domain] && m.round == a.round {
			delete(a.checked, m.domain)
			a.want(c, m.domain) // waits, or goes now if the upstream is back
		}
		a.pump(c)
	}
}

func (a *Actor) start(c actor.Context) {
	a.ctx, a.cancel = context.WithCancel(context.Background())
	a.pace = rate.NewLimiter(lookupRate, lookupBurst)
	a.queue, a.running = nil, 0
	st, bad, err := load(a.d.Store)
	if err != nil {
		panic(err) // the supervisor restarts us with backoff
	}
	for _, k := range bad {
		a.d.Log.Error("local DNS record in the store no longer validates; skipped", "key", k)
	}
	a.st = st
	a.checked = map[string]bool{}
	a.failed = map[string]int{}
	a.resetOutage()
	// Versions keep growing across restarts: go on from what the previous
	// incarnation published (the publisher outlives us).
	if prev := a.d.Published.Load(); prev != nil {
		a.version = prev.Version
	}
	a.publish()
	if a.d.View == nil || a.d.PublicLookup == nil {
		return
	}
	sys, self := c.ActorSystem(), c.Self()
	if a.d.RecheckEvery > 0 {
		a.wg.Add(1)
		go tick(a.ctx, &a.wg, sys, self, a.d.RecheckEvery)
	}
	// The subscription's goroutine only turns a view into a message (what
	// changed since the view it saw last); the work happens here, in
	// Receive.
	var seen *view.Snapshot
	a.unsub = a.d.View.Subscribe(func(s *view.Snapshot) {
		added, removed := p2pChanges(seen, s)
		first := seen == nil
		seen = s
		if first || len(added)+len(removed) > 0 {
			sys.Root.Send(self, &viewChanged{added: added, removed: removed, first: first})
		}
	})
}

// halt ends every goroutine of this incarnation and waits for them: no
// message of ours arrives after the actor stopped or restarted. A lookup
// in flight ends at its next context check (the upstream attempt in
// progress, at most the DNS server's upstream timeout).
func (a *Actor) halt() {
	if a.unsub != nil {
		a.unsub()
		a.unsub = nil
	}
	if a.cancel != nil {
		a.cancel()
	}
	a.wg.Wait()
}

// answersFromLedger reports whether d answers in DNS from the ledger.
func answersFromLedger(d *view.Domain) bool {
	return d != nil && (d.Status == "resolved" || d.Status == "conflict") && d.IP.IsValid()
}

// p2pChanges lists the domains of next that answer from the ledger and
// did not in prev (added), and the other way round (removed); prev nil is
// an empty view. Only the domains whose entries changed are looked at
// (view.Snapshot.Changed: the names the ledger's view carries): a burst
// of claims publishes hundreds of views, and a walk of every domain for
// each was the node's largest cost in a burst once it held thousands.
func p2pChanges(prev, next *view.Snapshot) (added, removed []string) {
	var old map[string]*view.Domain
	if prev != nil {
		old = prev.Domains
	}
	for _, name := range next.Changed(prev) {
		if now, was := answersFromLedger(next.Domains[name]), answersFromLedger(old[name]); now && !was {
			added = append(added, name)
		} else if was && !now {
			removed = append(removed, name)
		}
	}
	return added, removed
}

// apply commits a state transition: store first, then readers see it.
// view is the published p2p view (nil without one).
func (a *Actor) view() *view.Snapshot {
	if a.d.View == nil {
		return nil
	}
	return a.d.View.Load()
}

func (a *Actor) apply(c actor.Context, next *state, ws []write, err error) error {
	if err != nil {
		return err
	}
	if err := persist(a.d.Store, ws); err != nil {
		a.d.Log.Error("persist local DNS change", "err", err)
		return err
	}
	a.st = next
	a.publish()
	a.hint(c)
	return nil
}

// publish stores the state for the DNS server, which answers from it as
// soon as Store returns.
func (a *Actor) publish() {
	a.version++
	a.d.Published.Store(a.st.snapshot(a.version))
}

func (a *Actor) hint(c actor.Context) {
	c.ActorSystem().EventStream.Publish(&messages.Hint{Type: messages.HintLocalDNS})
}

// tick sends RecheckDNSConflicts every d until ctx ends.
func tick(ctx context.Context, wg *sync.WaitGroup, sys *actor.ActorSystem, pid *actor.PID, d time.Duration) {
	defer wg.Done()
	t := time.NewTicker(d)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			sys.Root.Send(pid, &messages.RecheckDNSConflicts{})
		}
	}
}

func (a *Actor) viewChanged(c actor.Context, m *viewChanged) {
	if a.names == nil {
		a.names = map[string]bool{}
	}
	for _, name := range m.added {
		a.names[name] = true
		if !a.checked[name] && a.failed[name] == 0 && !a.out.waiting[name] {
			a.want(c, name)
		}
	}
	for _, name := range m.removed {
		// No longer a p2p domain: forget its checks, and its conflict is gone.
		delete(a.names, name)
		delete(a.checked, name)
		delete(a.failed, name)
		delete(a.out.waiting, name)
		if _, ok := a.st.conflicts[name]; ok {
			a.setConflict(c, name, "")
		}
	}
	if m.first {
		// Conflicts kept from before a restart of domains that are no
		// longer p2p domains are gone.
		for name := range a.st.conflicts {
			if !a.names[name] {
				a.setConflict(c, name, "")
			}
		}
	}
}

// check queues a public lookup of name; the probe goes first. The
// lookups run on at most maxLookups goroutines, taken from the queue in
// order (pump): a node that learns thousands of domains at once (a
// restart, a join) queues thousands of names, not thousands of
// goroutines each waiting for its turn.
func (a *Actor) check(c actor.Context, name string, probe bool) {
	p := pendingCheck{name: name, probe: probe, round: a.round}
	if probe {
		a.queue = append([]pendingCheck{p}, a.queue...)
	} else {
		a.queue = append(a.queue, p)
	}
	a.pump(c)
}

// pendingCheck is a queued public lookup.
type pendingCheck struct {
	name  string
	probe bool
	round uint64
}

// pump starts queued lookups while fewer than maxLookups run. A queued
// name that is no longer wanted (removed from the view, or a recheck
// started since) is dropped; while the upstream is down every name but
// the probe's waits for it (outage.go) instead of taking a worker.
func (a *Actor) pump(c actor.Context) {
	for a.running < maxLookups && len(a.queue) > 0 {
		p := a.queue[0]
		a.queue[0] = pendingCheck{}
		a.queue = a.queue[1:]
		if !p.probe && (p.round != a.round || !a.checked[p.name]) {
			continue
		}
		if !p.probe && a.out.down.Load() {
			delete(a.checked, p.name)
			a.want(c, p.name)
			continue
		}
		a.running++
		a.lookup(c, p)
	}
	if len(a.queue) == 0 {
		a.queue = nil // let a drained backlog's array go
	}
}

// lookup runs one queued lookup in the background, paced (lookupRate);
// the result comes back as conflictChecked, or as deferredCheck when the
// upstream went down before its turn (unless it is the probe). Each of
// the two ends one running lookup.
func (a *Actor) lookup(c actor.Context, p pendingCheck) {
	sys, self, d, ctx, pace, down := c.ActorSystem(), c.Self(), a.d, a.ctx, a.pace, a.out.down
	a.wg.Add(1)
	go func() {
		defer a.wg.Done()
		if pace.Wait(ctx) != nil {
			return // stopped while waiting for its turn
		}
		if !p.probe && down.Load() {
			sys.Root.Send(self, &deferredCheck{domain: p.name, round: p.round})
			return
		}
		lctx, cancel := context.WithTimeout(ctx, d.CheckTimeout)
		ip, err := d.PublicLookup(lctx, p.name)
		cancel()
		if ctx.Err() != nil {
			return // stopped: nobody to tell
		}
		sys.Root.Send(self, &conflictChecked{domain: p.name, publicIP: ip, err: err, round: p.round, probe: p.probe})
	}()
}

func (a *Actor) conflictChecked(c actor.Context, m *conflictChecked) {
	if m.probe {
		a.out.probing = false
	}
	current := a.checked[m.domain] && m.round == a.round // else no longer a p2p domain, or a recheck's lookup answers instead
	if m.err == nil {
		a.lookupAnswered(c)
	} else if a.lookupFailed(c, m.domain, m.probe, m.err) {
		if current {
			delete(a.checked, m.domain)
			a.out.waiting[m.domain] = true
		}
		return
	}
	if !current {
		return
	}
	if m.err != nil {
		a.failed[m.domain]++
		delete(a.checked, m.domain)
		delay := retryDelay(a.failed[m.domain], a.d.RecheckEvery, a.d.RetryFirst)
		if now := time.Now(); now.Sub(a.warnedAt) >= time.Minute {
			a.warnedAt = now
			a.d.Log.Warn("public lookup for conflict check failed; retried with backoff", "domain", m.domain,
				"failingDomains", len(a.failed), "retryIn", delay.String(), "err", m.err)
		} else {
			a.d.Log.Debug("public lookup for conflict check failed", "domain", m.domain, "retryIn", delay.String(), "err", m.err)
		}
		sys, self, ctx, name := c.ActorSystem(), c.Self(), a.ctx, m.domain
		time.AfterFunc(delay, func() {
			if ctx.Err() == nil {
				sys.Root.Send(self, &retryCheck{domain: name})
			}
		})
		return
	}
	delete(a.failed, m.domain)
	a.setConflict(c, m.domain, m.publicIP)
}

// retryDelay is the wait after failures in a row: first, doubling with
// each failure, up to most (none when most <= 0).
func retryDelay(failures int, most, first time.Duration) time.Duration {
	d := first
	for i := 1; i < failures && d < most; i++ {
		d *= 2
	}
	if most > 0 && d > most {
		d = most
	}
	return d
}

func (a *Actor) setConflict(c actor.Context, domain, ip string) {
	next, ws, changed := a.st.setConflict(domain, ip)
	if !changed {
		return
	}
	if err := persist(a.d.Store, ws); err != nil {
		a.d.Log.Error("persist DNS conflict", "domain", domain, "err", err)
		return
	}
	a.st = next
	if ip != "" {
		a.d.Log.Info("p2p domain also resolves in public DNS", "domain", domain, "publicIP", ip)
	}
	a.hint(c)
}
