package records

import (
	"sync"
	"sync/atomic"
)

// Version preferences for a p2p domain that also resolves publicly.
const (
	VersionP2P    = "p2p"
	VersionPublic = "public"
)

// Snapshot is the local DNS state the answer path needs, published by the
// localdns actor. Never modified after publish.
type Snapshot struct {
	Version uint64
	Records []Record          // in index order
	Prefs   map[string]string // domain → VersionP2P or VersionPublic
}

// Published hands the current Snapshot to readers and calls subscribers
// synchronously in the publisher's goroutine (the same contract as
// internal/view.Published).
type Published struct {
	p    atomic.Pointer[Snapshot]
	mu   sync.Mutex // guards subs
	subs []func(*Snapshot)
}

// Load returns the current snapshot (nil before the first Store).
func (p *Published) Load() *Snapshot { return p.p.Load() }

// Store publishes s and notifies subscribers.
func (p *Published) Store(s *Snapshot) {
	p.p.Store(s)
	p.mu.Lock()
	subs := append([]func(*Snapshot){}, p.subs...)
	p.mu.Unlock()
	for _, f := range subs {
		f(s)
	}
}

// Subscribe registers f for every new snapshot and calls it once now with
// the current one if any.
func (p *Published) Subscribe(f func(*Snapshot)) {
	p.mu.Lock()
	p.subs = append(p.subs, f)
	p.mu.Unlock()
	if s := p.p.Load(); s != nil {
		f(s)
	}
}
