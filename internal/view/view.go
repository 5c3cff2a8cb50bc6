// Package view is the generic publisher of immutable snapshots
// (Publisher) and the resolved naming view that the consensus side
// publishes for hot paths (DNS answers, the edge proxy). A snapshot is
// immutable once published; readers Load it once per request. A snapshot
// derived from the previous one names the domains it changed, so a
// subscriber need not walk them all (changes.go).
package view

import (
	"net/netip"
	"sync"
	"sync/atomic"

	"peerdns/messages"
)

// Domain is one p2p domain as the hot paths need it.
type Domain struct {
	Name     string     // lowercased, no trailing dot
	Status   string     // resolved, conflict, tie, insufficient_quorum, no_claims, error
	Hash     string     // resolved tunnel hash ("" unless resolved)
	Claimant string     // resolved claimant id ("" unless resolved)
	SSL      bool       // the resolved claim asks for HTTPS/WSS upstream
	IP       netip.Addr // local IP assigned to the domain (invalid when none)
}

// Snapshot is every domain at one version. Never modified after publish.
type Snapshot struct {
	Version  uint64
	Domains  map[string]*Domain    // p2p domains, key: lowercased name
	Internal map[string]netip.Addr // internal domains (admin, plugins) → address to answer

	log *changeLog // the names each version changed in Domains (changes.go); nil unless derived
}

// Lookup finds name or the nearest claimed parent (subdomains of a claimed
// domain resolve with it). name is lowercased without trailing dot.
func (s *Snapshot) Lookup(name string) (*Domain, bool) {
	for {
		if d, ok := s.Domains[name]; ok {
			return d, true
		}
		i := indexDot(name)
		if i < 0 {
			return nil, false
		}
		name = name[i+1:]
	}
}

func indexDot(s string) int {
	for i := 0; i < len(s); i++ {
		if s[i] == '.' {
			return i
		}
	}
	return -1
}

// Published is the publisher of naming snapshots.
type Published = Publisher[Snapshot]

// Publisher hands the current immutable value of type T to readers and
// tells subscribers when a new one is stored. Every read-side the node
// publishes goes through it: the naming view (ledger), the local DNS
// records (localdns), the loaded plugins (plugin.Table) and the stats
// sample (actors/stats).
//
// Store never waits for a subscriber: each subscriber has its own
// notifier goroutine that delivers the latest value, coalescing the
// values stored while it was busy. So an expensive subscriber (the DNS
// server compiling its answer table) runs outside the publisher's actor,
// a subscriber always ends on the newest value, and it never sees an
// older value after a newer one. Readers that must see a value as soon as
// Store returns compare Load with what they derived their state from (the
// DNS server does; see dns.Server).
type Publisher[T any] struct {
	p    atomic.Pointer[T]
	subs atomic.Pointer[[]*subscriber] // copy-on-write: Store reads it without a lock
	mu   sync.Mutex                    // serialises changes to subs
}

// subscriber is one Subscribe call's notifier.
type subscriber struct {
	wake chan struct{} // capacity 1: "a newer value may be there"
	quit chan struct{} // closed by the cancel func
	done chan struct{} // closed when the notifier goroutine has returned
}

// Load returns the current value (nil before the first Store).
func (p *Publisher[T]) Load() *T { return p.p.Load() }

// Store publishes s: Load returns it from now on, and every subscriber
// is called with it (or a newer value) soon after, in its own goroutine.
// Store never blocks on a subscriber.
func (p *Publisher[T]) Store(s *T) {
	p.p.Store(s)
	if subs := p.subs.Load(); subs != nil {
		for _, sub := range *subs {
			sub.poke()
		}
	}
}

// poke wakes the notifier unless a wake-up is already pending (which
// then delivers this value too: the notifier loads the value after
// taking the wake-up).
func (s *subscriber) poke() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// Subscribe calls f with the current value (if any) and then with every
// newer one, from a goroutine of its own, one call at a time. Values
// stored while f runs are coalesced: f next gets the latest. f is never
// called twice in a row with the same pointer.
//
// The returned cancel func unsubscribes: once it returns, f is not
// running and will not be called again, and the goroutine is gone.
// Calling it more than once is fine; calling it from inside f deadlocks.
func (p *Publisher[T]) Subscribe(f func(*T)) (cancel func()) {
	sub := &subscriber{wake: make(chan struct{}, 1), quit: make(chan struct{}), done: make(chan struct{})}
	p.mu.Lock()
	var next []*subscriber
	if old := p.subs.Load(); old != nil {
		next = append(next, *old...)
	}
	next = append(next, sub)
	p.subs.Store(&next)
	p.mu.Unlock()
	sub.poke() // deliver the current value, if any
	go p.notify(sub, f)
	var once sync.Once
	return func() {
		once.Do(func() {
			p.unsubscribe(sub)
			close(sub.quit)
			<-sub.done
		})
	}
}

func (p *Publisher[T]) unsubscribe(sub *subscriber) {
	p.mu.Lock()
	defer p.mu.Unlock()
	old := p.subs.Load()
	if old == nil {
		return
	}
	next := make([]*subscriber, 0, len(*old))
	for _, s := range *old {
		if s != sub {
			next = append(next, s)
		}
	}
	p.subs.Store(&next)
}

// notify is sub's goroutine: on each wake-up it delivers the latest
// value if it differs from the last one delivered.
func (p *Publisher[T]) notify(sub *subscriber, f func(*T)) {
	defer close(sub.done)
	var last *T
	for {
		select {
		case <-sub.quit:
			return
		case <-sub.wake:
		}
		select {
		case <-sub.quit: // cancelled while a wake-up was pending: deliver nothing more
			return
		default:
		}
		v := p.p.Load()
		if v == nil || v == last {
			continue
		}
		last = v
		f(v)
	}
}

// LocalPublished hands the localdns actor's current snapshot of local
// records to the DNS answer path.
type LocalPublished = Publisher[messages.LocalSnapshot]
