package stats

import (
	"sync/atomic"
	"time"
)

// Warm is how long after a read of the latest sample the sampler keeps
// sampling every tick: a dashboard that polls GET /api/stats every few
// seconds reads a sample at most a tick old without waiting for one.
const Warm = 30 * time.Second

// Demand is who wants samples now: the WebSocket's update-stats
// subscribers (Watching, told by the hub) and readers of the latest
// sample (Asked). A node nobody watches samples once a minute, for the
// history, instead of every second: building the payload asks the peer,
// ledger and tunnel actors and encodes it, about a tenth of an idle
// node's CPU. Safe for concurrent use; the zero value wants nothing.
type Demand struct {
	watchers atomic.Int64
	asked    atomic.Int64 // unix nanoseconds of the last read, 0 before one
}

// Watching sets the number of update-stats subscribers.
func (d *Demand) Watching(n int) { d.watchers.Store(int64(n)) }

// Asked records a read of the latest sample at now.
func (d *Demand) Asked(now time.Time) { d.asked.Store(now.UnixNano()) }

// Wanted reports whether a sample at now has a reader: a subscriber, or
// a read within Warm.
func (d *Demand) Wanted(now time.Time) bool {
	if d.watchers.Load() > 0 {
		return true
	}
	a := d.asked.Load()
	return a != 0 && now.UnixNano()-a < int64(Warm)
}
