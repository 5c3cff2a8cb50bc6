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
	mu sync.RWMutex // guards m and the points in it
	m  map[string]*collectedPoint
}

type collectedPoint struct {
	at   time.Time
	vals []float64
}

// record copies raw (the collector's buffer) into the chart's own point:
// no allocation once a chart has been seen (TestCollectAllocs).
func (c *collectedPoints) record(chartID string, at time.Time, raw []float64) {
	c.mu.Lock()
	p := c.m[chartID]
	if p == nil {
		if c.m == nil {
			c.m = map[string]*collectedPoint{}
		}
		p = &collectedPoint{}
		c.m[chartID] = p
	}
	p.at = at
	p.vals = append(p.vals[:0], raw...)
	c.mu.Unlock()
}

// Collected returns a copy of the newest collected values of a chart in
// dimension order and when they were read.
func (m *Manager) Collected(chartID string) (time.Time, []float64, bool) {
	m.raw.mu.RLock()
	defer m.raw.mu.RUnlock()
	p, ok := m.raw.m[chartID]
	if !ok {
		return time.Time{}, nil, false
	}
	return p.at, append([]float64(nil), p.vals...), true
}

// collected records what a collector read for def this tick.
func (tk *tick) collected(chartID string, raw []float64) {
	tk.m.raw.record(chartID, tk.now, raw)
}
