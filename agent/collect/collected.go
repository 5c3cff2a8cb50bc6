package collect

import (
	"sync"
	"time"
)

// collectedPoints keeps the newest values each chart was collected with,
// before any rate or multiplier: the kernel's counters and gauges, which
// Prometheus scrapes ask for with allmetrics?source=as-collected.
//
// Charts whose values are computed from other charts (system.io and
// system.net sum the devices' rates) have no collected values of their own
// and are not recorded.
type collectedPoints struct {
	mu sync.RWMutex // guards m; the slices in it are never changed after store
	m  map[string]collectedPoint
}

type collectedPoint struct {
	at   time.Time
	vals []float64
}

func (c *collectedPoints) record(chartID string, at time.Time, raw []float64) {
	vals := append([]float64(nil), raw...) // raw is the collector's buffer
	c.mu.Lock()
	if c.m == nil {
		c.m = map[string]collectedPoint{}
	}
	c.m[chartID] = collectedPoint{at: at, vals: vals}
	c.mu.Unlock()
}

// Collected returns the newest collected values of a chart in dimension
// order and when they were read. The slice must not be changed.
func (m *Manager) Collected(chartID string) (time.Time, []float64, bool) {
	m.raw.mu.RLock()
	p, ok := m.raw.m[chartID]
	m.raw.mu.RUnlock()
	return p.at, p.vals, ok
}

// collected records what a collector read for def this tick.
func (tk *tick) collected(chartID string, raw []float64) {
	tk.m.raw.record(chartID, tk.now, raw)
}
