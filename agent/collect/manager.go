package collect

import (
	"context"
	"log/slog"
	"math"
	"slices"
	"sync"
	"time"

	"peerdns/agent/store"
)

// collector is one source of charts (one file each in this package). It is
// called once a tick from one goroutine and keeps its own previous
// counters; it must not keep the tick after returning.
type collector interface {
	name() string
	collect(tk *tick) error
}

// Manager runs every collector once a second and appends their points to
// the store. A collector that fails is logged once, retried every tick and
// logged again when it recovers; the others go on.
type Manager struct {
	db  *store.DB
	log *slog.Logger
	cs  []collector

	// AfterCollect, when set before Run, is called with the second just
	// collected after every collector ran (the anomaly detector). It runs
	// in the collection goroutine, so it must return well within a second.
	AfterCollect func(sec int64)

	mu        sync.Mutex // guards the fields below (Stats may read them)
	failing   map[string]error
	defs      map[string]*store.ChartDef // last definition registered per chart id
	appendErr map[string]bool            // charts whose Append failed (logged once)
	capLogged map[string]bool            // collectors that hit maxInstances (logged once)
	ticks     uint64
	busy      time.Duration   // total time spent collecting
	tk        tick            // the round being collected (Collect is never concurrent)
	round     []time.Duration // by collector: how long it took in the current round

	raw collectedPoints // newest collected values per chart (own lock)
}

// Options turn collectors off.
type Options struct {
	// NoSlabinfo leaves out the slab cache charts (slabinfo.go): three
	// dimensions per kernel slab cache, ~700 on a typical host.
	NoSlabinfo bool
}

// New returns a Manager with the host collectors of Netdata's system charts.
func New(db *store.DB, log *slog.Logger, o Options) *Manager {
	cs := hostCollectors("")
	if o.NoSlabinfo {
		cs = slices.DeleteFunc(cs, func(c collector) bool { _, slab := c.(*slabColl); return slab })
	}
	return newManager(db, log, cs...)
}

// hostCollectors are every collector, reading files under root ("" for
// the host; tests pass a testdata tree).
func hostCollectors(root string) []collector {
	return []collector{
		newStat(root), newInterrupts(root), newSoftirqs(root), newSoftnet(root), newLoad(root), newMeminfo(root), newVmstat(root), newPressure(root),
		newDisk(root), newDiskSpace(root), newNet(root), newNetstat(root), newSockstat(root), newSockstat6(root),
		newUptime(root), newEntropy(root), newConntrack(root), newIPC(root), newZram(root), newSlabinfo(root), newIdleJitter(), newCgroups(root), newApps(root), newTimex(),
		newSelf(), // last: it charts the round's timings of the others
	}
}

func newManager(db *store.DB, log *slog.Logger, cs ...collector) *Manager {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Manager{
		db: db, log: log.With("component", "agent/collect"), cs: cs,
		failing:   map[string]error{},
		defs:      map[string]*store.ChartDef{},
		appendErr: map[string]bool{},
		capLogged: map[string]bool{},
	}
}

// Run collects every second, on the second, until ctx is done. A tick that
// comes while the previous one still runs is skipped (time.Ticker drops
// it), so a slow disk never piles up work.
func (m *Manager) Run(ctx context.Context) {
	defer m.close()
	// Align to the next whole second so points land on distinct seconds.
	now := time.Now()
	wait := now.Truncate(time.Second).Add(time.Second).Sub(now)
	select {
	case <-ctx.Done():
		return
	case <-time.After(wait):
	}
	t := time.NewTicker(time.Second)
	defer t.Stop()
	last := int64(0)
	late := time.Duration(-1) // the first round was not woken by the ticker
	for {
		now := time.Now()
		// Round: a tick a few ms early belongs to the coming second.
		sec := now.Add(500 * time.Millisecond).Unix()
		if sec > last {
			m.collect(sec, now, late)
			if m.AfterCollect != nil {
				m.AfterCollect(sec)
			}
			last = sec
		}
		select {
		case <-ctx.Done():
			return
		case fired := <-t.C:
			// How long this goroutine waited for a CPU after its timer
			// fired: what system.idlejitter shows.
			late = time.Since(fired)
		}
	}
}

// maxInstances caps the charts one collector makes for instances of one
// kind (CPUs, disks, interfaces, mounts, cgroups): a host where 10,000
// appear at once gets the first maxInstances and a log line, not
// unbounded memory.
const maxInstances = 1000

// closer is a collector holding files open between ticks.
type closer interface{ close() }

// close releases the collectors' kept-open files (Run does it on return;
// a later Collect opens them again).
func (m *Manager) close() {
	for _, c := range m.cs {
		if cl, ok := c.(closer); ok {
			cl.close()
		}
	}
}

// Collect runs every collector once for unix second sec; now is the
// monotonic read time that rates are computed against. Run calls it every
// second; tests and benchmarks call it directly.
func (m *Manager) Collect(sec int64, now time.Time) { m.collect(sec, now, -1) }

// collect is Collect with the wake-up lateness of this round (-1: not
// measured, the round was not woken by the ticker).
func (m *Manager) collect(sec int64, now time.Time, late time.Duration) {
	start := time.Now()
	// One tick value for every round: handing a new one to the
	// collectors through the interface would allocate it each second.
	m.tk = tick{m: m, sec: sec, now: now, late: late}
	tk := &m.tk
	if len(m.round) != len(m.cs) {
		m.round = make([]time.Duration, len(m.cs))
	}
	for i, c := range m.cs {
		t0 := time.Now()
		err := c.collect(tk)
		m.round[i] = time.Since(t0)
		m.mu.Lock()
		_, wasFailing := m.failing[c.name()]
		switch {
		case err != nil && !wasFailing:
			m.failing[c.name()] = err
			m.log.Warn("collector failed; retrying every second", "collector", c.name(), "err", err)
		case err == nil && wasFailing:
			delete(m.failing, c.name())
			m.log.Info("collector recovered", "collector", c.name())
		}
		m.mu.Unlock()
	}
	m.mu.Lock()
	m.ticks++
	m.busy += time.Since(start)
	m.mu.Unlock()
}

// Stats reports how many ticks ran and the mean time one took.
func (m *Manager) Stats() (ticks uint64, meanTick time.Duration, failing []string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for n := range m.failing {
		failing = append(failing, n)
	}
	if m.ticks > 0 {
		meanTick = m.busy / time.Duration(m.ticks)
	}
	return m.ticks, meanTick, failing
}

// tick is one collection round handed to each collector.
type tick struct {
	m   *Manager
	sec int64     // unix second the points are stored at
	now time.Time // read time (monotonic) for rates
	// late is how long the collecting goroutine waited for a CPU after
	// its once-a-second timer fired (-1: not measured).
	late time.Duration
}

// put registers def when it is new or changed, then appends values (already
// in the chart's units) at the tick's second.
func (tk *tick) put(def *store.ChartDef, values []float64) {
	m := tk.m
	m.mu.Lock()
	reg := m.defs[def.ID] != def
	m.mu.Unlock()
	if reg {
		if err := m.db.Register(def); err != nil {
			m.log.Warn("register chart", "chart", def.ID, "err", err)
			return
		}
		m.mu.Lock()
		m.defs[def.ID] = def
		m.mu.Unlock()
	}
	err := m.db.Append(def.ID, tk.sec, values)
	m.mu.Lock()
	defer m.mu.Unlock()
	switch {
	case err != nil && !m.appendErr[def.ID]:
		m.appendErr[def.ID] = true
		m.log.Warn("append point", "chart", def.ID, "err", err)
	case err == nil && m.appendErr[def.ID]:
		delete(m.appendErr, def.ID)
	}
}

// capped logs, once per collector, that it met more instances than
// maxInstances and charts only the first ones.
func (tk *tick) capped(collector, kind string) {
	m := tk.m
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.capLogged[collector] {
		return
	}
	m.capLogged[collector] = true
	m.log.Warn("too many instances; charting only the first ones", "collector", collector, "kind", kind, "max", maxInstances)
}

// remove drops a chart whose device went away (a later put of the same
// id registers it again, empty).
func (tk *tick) remove(def *store.ChartDef) {
	m := tk.m
	m.mu.Lock()
	delete(m.defs, def.ID)
	delete(m.appendErr, def.ID)
	m.mu.Unlock()
	m.db.Remove(def.ID)
}

// chart turns raw collected values into stored points the way Netdata's
// rrddim algorithms do: incremental dimensions become per-second rates of
// change (the first sample and a counter that went backwards give no
// value), then every value is multiplied by Multiplier/Divisor.
type chart struct {
	def    *store.ChartDef
	prev   []float64
	prevAt time.Time
	have   bool
	incr   bool // any incremental dimension
	out    []float64
}

func newChart(def *store.ChartDef) *chart {
	c := &chart{def: def, prev: make([]float64, len(def.Dims)), out: make([]float64, len(def.Dims))}
	for _, d := range def.Dims {
		if d.Algorithm == algIncremental {
			c.incr = true
		}
	}
	return c
}

const (
	algAbsolute    = "absolute"
	algIncremental = "incremental"
)

// emit converts raw (in dimension order) and stores the point, unless it is
// the first sample of a chart with incremental dimensions.
func (c *chart) emit(tk *tick, raw []float64) {
	tk.collected(c.def.ID, raw)
	if out, ok := c.convert(tk.now, raw); ok {
		tk.put(c.def, out)
	}
}

func (c *chart) convert(now time.Time, raw []float64) ([]float64, bool) {
	first := !c.have
	dt := now.Sub(c.prevAt).Seconds()
	for i, d := range c.def.Dims {
		v := raw[i]
		if d.Algorithm == algIncremental {
			switch {
			case first || dt <= 0 || math.IsNaN(v) || math.IsNaN(c.prev[i]) || v < c.prev[i]:
				v = math.NaN() // no rate yet, or a counter reset
			default:
				v = (v - c.prev[i]) / dt
			}
			c.prev[i] = raw[i]
		}
		c.out[i] = v * float64(d.Multiplier) / float64(d.Divisor)
	}
	c.prevAt, c.have = now, true
	if first && c.incr {
		return nil, false
	}
	return c.out, true
}

// dim is a shorthand for a dimension definition.
func dim(id, name, alg string, mul, div int64) store.DimDef {
	if name == "" {
		name = id
	}
	return store.DimDef{ID: id, Name: name, Algorithm: alg, Multiplier: mul, Divisor: div}
}
