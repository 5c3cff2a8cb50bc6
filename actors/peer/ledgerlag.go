package peer

import (
	"sync/atomic"
	"time"
)

// ledgerLag is how far our ledger runs behind the sessions: the time an
// ApplyOps takes to be answered, smoothed (an EWMA of 1/8 per answer),
// shared by a supervisor's sessions.
//
// It sizes the freshness window of repairs (session_sync.go, notFresh):
// an op that reached us less than about one lag ago is probably still
// on its way to a peer that lacks it, since every ledger it passes
// through holds it that long before relaying it. A node whose ledger
// keeps up (answers in milliseconds: a quiet network, or the simulation
// in virtual time) has a window near zero and repairs everything a
// peer's vector, want or graft shows missing at once, which is what
// heals a hole in the tree fastest; one whose ledger is seconds behind
// (50 processes on two cores, in a burst) leaves out what is in flight,
// which there was most of what repairs sent. The window is twice the
// lag, at most one sync interval, so an op that did get lost goes at
// the next exchange after it.
type ledgerLag struct{ ns atomic.Int64 }

// observe takes one ApplyOps round trip.
func (l *ledgerLag) observe(d time.Duration) {
	if l == nil || d < 0 {
		return
	}
	for {
		old := l.ns.Load()
		next := old + (int64(d)-old)/8
		if l.ns.CompareAndSwap(old, next) {
			return
		}
	}
}

// window is how long an op counts as fresh: twice the lag, at most max.
func (l *ledgerLag) window(max time.Duration) time.Duration {
	if l == nil {
		return 0
	}
	return min(2*time.Duration(l.ns.Load()), max)
}
