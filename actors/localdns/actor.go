// Package localdns is the actor that owns the node's local DNS records,
// the per-domain version preferences (the selector cache: p2p or public)
// and the list of p2p domains that also resolve in public DNS.
//
// It persists everything in the node store (keys under "localdns:") and,
// after every committed change, publishes an immutable records.Snapshot
// that the DNS server compiles into its answer table, so a write is live
// in DNS before the reply to the admin API is sent. Conflicts are found
// by asking public DNS (through the DNS server's upstream, never its own
// data) in the background whenever a p2p domain appears in the view.
//
// It must never be asked from the DNS answer path: readers use the
// published snapshot.
package localdns

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"peerdns/dns/records"
	"peerdns/internal/store"
	"peerdns/internal/view"
	"peerdns/messages"
	"peerdns/supervisor"
)

// Deps are what the actor needs from the node.
type Deps struct {
	Store     *store.DB          // node.db
	Published *records.Published // the snapshot the DNS server reads; shared with dns.New
	// View and PublicLookup drive conflict detection; with either nil no
	// conflicts are looked for. PublicLookup is dns.Server.PublicLookup:
	// the public IPv4 of a name, "" when it has none.
	View         *view.Published
	PublicLookup func(ctx context.Context, name string) (string, error)
	CheckTimeout time.Duration // per public lookup; default 10s
	// RecheckEvery repeats the public lookups of every p2p domain (public
	// DNS changes too); default 1h, negative disables.
	RecheckEvery time.Duration
	Log          *slog.Logger
}

// shared survives actor restarts: the snapshot version keeps growing and
// the view subscription is made once.
type shared struct {
	version atomic.Uint64
	once    sync.Once
	self    atomic.Pointer[actor.PID]
	sys     atomic.Pointer[actor.ActorSystem]
	sem     chan struct{} // bounds concurrent public lookups
}

// Props builds the actor; it restarts with backoff.
func Props(d Deps) *actor.Props {
	if d.Log == nil {
		d.Log = slog.Default()
	}
	if d.Published == nil {
		d.Published = &records.Published{}
	}
	if d.CheckTimeout <= 0 {
		d.CheckTimeout = 10 * time.Second
	}
	if d.RecheckEvery == 0 {
		d.RecheckEvery = time.Hour
	}
	sh := &shared{sem: make(chan struct{}, 8)}
	return actor.PropsFromProducer(func() actor.Actor { return &Actor{d: d, sh: sh} },
		actor.WithSupervisor(supervisor.Backoff()))
}

// Actor owns the local DNS state. Fields are touched only from Receive.
type Actor struct {
	d       Deps
	sh      *shared
	st      *state
	checked map[string]bool // p2p domains whose public lookup ran or runs
	names   map[string]bool // resolved p2p domains of the latest view
	stop    chan struct{}   // ends the recheck ticker
}

// Receive handles one message.
func (a *Actor) Receive(c actor.Context) {
	switch m := c.Message().(type) {
	case *actor.Started:
		a.start(c)
	case *GetLocalDNS:
		c.Respond(&GetLocalDNSReply{Records: a.st.list(), Conflicts: a.st.conflictList()})
	case *GetSelectorCache:
		c.Respond(&GetSelectorCacheReply{Prefs: a.st.snapshot(0).Prefs})
	case *AddRecord:
		next, ws, err := a.st.add(m.Record)
		c.Respond(&WriteReply{Err: a.apply(c, next, ws, err)})
	case *UpdateRecord:
		next, ws, err := a.st.update(m.Index, m.Record)
		c.Respond(&WriteReply{Err: a.apply(c, next, ws, err)})
	case *DeleteRecord:
		next, ws, err := a.st.delete(m.Index)
		c.Respond(&WriteReply{Err: a.apply(c, next, ws, err)})
	case *SetVersionPreference:
		next, ws, err := a.st.setPref(m.Domain, m.Version)
		c.Respond(&WriteReply{Err: a.apply(c, next, ws, err)})
	case *actor.Stopping, *actor.Restarting:
		if a.stop != nil {
			close(a.stop)
			a.stop = nil
		}
	case *viewChanged:
		a.viewChanged(c, m)
	case *Recheck:
		// Forget what was checked; the last view's domains are looked up
		// again (nothing to do before the first view).
		if a.names != nil {
			a.checked = map[string]bool{}
			a.viewChanged(c, &viewChanged{names: a.names})
		}
	case *conflictChecked:
		a.conflictChecked(c, m)
	}
}

func (a *Actor) start(c actor.Context) {
	st, bad, err := load(a.d.Store)
	if err != nil {
		panic(err) // the supervisor restarts us with backoff
	}
	for _, k := range bad {
		a.d.Log.Error("local DNS record in the store no longer validates; skipped", "key", k)
	}
	a.st = st
	a.checked = map[string]bool{}
	a.publish()
	a.sh.self.Store(c.Self())
	a.sh.sys.Store(c.ActorSystem())
	if a.d.View == nil || a.d.PublicLookup == nil {
		return
	}
	if a.d.RecheckEvery > 0 {
		a.stop = make(chan struct{})
		go tick(c.ActorSystem(), c.Self(), a.d.RecheckEvery, a.stop)
	}
	a.sh.once.Do(func() {
		a.d.View.Subscribe(func(s *view.Snapshot) {
			names := map[string]bool{}
			for name, d := range s.Domains {
				if d != nil && (d.Status == "resolved" || d.Status == "conflict") && d.IP.IsValid() {
					names[name] = true
				}
			}
			if sys, pid := a.sh.sys.Load(), a.sh.self.Load(); sys != nil && pid != nil {
				sys.Root.Send(pid, &viewChanged{names: names})
			}
		})
	})
}

// apply commits a state transition: store first, then readers see it.
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

func (a *Actor) publish() {
	a.d.Published.Store(a.st.snapshot(a.sh.version.Add(1)))
}

func (a *Actor) hint(c actor.Context) {
	c.ActorSystem().EventStream.Publish(&messages.Hint{Type: messages.HintLocalDNS})
}

// tick sends Recheck every d until stop closes.
func tick(sys *actor.ActorSystem, pid *actor.PID, d time.Duration, stop chan struct{}) {
	t := time.NewTicker(d)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
			sys.Root.Send(pid, &Recheck{})
		}
	}
}

func (a *Actor) viewChanged(c actor.Context, m *viewChanged) {
	a.names = m.names
	for name := range m.names {
		if !a.checked[name] {
			a.checked[name] = true
			a.check(c, name)
		}
	}
	for name := range a.checked {
		if !m.names[name] {
			delete(a.checked, name)
		}
	}
	// Conflicts of domains that are no longer p2p domains are gone.
	for name := range a.st.conflicts {
		if !m.names[name] {
			a.setConflict(c, name, "")
		}
	}
}

func (a *Actor) check(c actor.Context, name string) {
	sys, self, d, sem := c.ActorSystem(), c.Self(), a.d, a.sh.sem
	go func() {
		sem <- struct{}{}
		defer func() { <-sem }()
		ctx, cancel := context.WithTimeout(context.Background(), d.CheckTimeout)
		ip, err := d.PublicLookup(ctx, name)
		cancel()
		sys.Root.Send(self, &conflictChecked{domain: name, publicIP: ip, err: err})
	}()
}

func (a *Actor) conflictChecked(c actor.Context, m *conflictChecked) {
	if !a.checked[m.domain] {
		return // no longer a p2p domain
	}
	if m.err != nil {
		a.d.Log.Warn("public lookup for conflict check failed; retried at the next view change", "domain", m.domain, "err", m.err)
		delete(a.checked, m.domain)
		return
	}
	a.setConflict(c, m.domain, m.publicIP)
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
