// Package view is the resolved naming view that the consensus side
// publishes for hot paths (DNS answers, the edge proxy). A Snapshot is
// immutable once published; readers Load it once per request.
package view

import (
	"net/netip"
	"sync"
	"sync/atomic"
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
// calls subscribers (outside any reader's path) when a new one is stored.
// Every snapshot the node publishes for a hot path (the naming view, the
// local DNS records) goes through it.
type Publisher[T any] struct {
	p    atomic.Pointer[T]
	mu   sync.Mutex // guards subs
	subs []func(*T)
}

// Load returns the current value (nil before the first Store).
func (p *Publisher[T]) Load() *T { return p.p.Load() }

// Store publishes s and notifies subscribers synchronously, in the
// publisher's goroutine, so a subscriber's derived state (e.g. DNS wire
// answers) is ready within the same apply.
func (p *Publisher[T]) Store(s *T) {
	p.p.Store(s)
	p.mu.Lock()
	subs := append([]func(*T){}, p.subs...)
	p.mu.Unlock()
	for _, f := range subs {
		f(s)
	}
}

// Subscribe registers f to be called with every new value, and once now
// with the current one if any.
func (p *Publisher[T]) Subscribe(f func(*T)) {
	p.mu.Lock()
	p.subs = append(p.subs, f)
	p.mu.Unlock()
	if s := p.p.Load(); s != nil {
		f(s)
	}
}
