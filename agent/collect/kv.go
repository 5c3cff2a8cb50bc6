package collect

import (
	"fmt"
	"time"

	"peerdns/agent/store"
)

// kvChart is one chart of a key/value collector: Netdata's definition and,
// per dimension, the key of the value it shows (keys are "<prefix><name>",
// e.g. "Tcp.InSegs" for /proc/net/snmp, "MemFree" for /proc/meminfo).
type kvChart struct {
	def  store.ChartDef
	keys []string
	// all: the chart is made only when every key is present (charts
	// whose dimensions only make sense together, like system.ram);
	// otherwise it gets the dimensions whose keys the kernel has.
	all bool
	// always: every dimension is made, a key the kernel has not printed
	// yet counting 0 (counters that appear on first use, like the
	// per-type ICMP ones).
	always bool
}

// kd is one dimension of a kvChart: the key, then Netdata's dimension.
type kd struct {
	key string
	d   store.DimDef
}

// kvDef builds a kvChart from Netdata's chart fields and its dimensions.
func kvDef(id, context, family, title, units, chartType, module string, prio int, dims ...kd) kvChart {
	c := kvChart{def: store.ChartDef{
		ID: id, Context: context, Family: family, Title: title, Units: units, ChartType: chartType,
		Plugin: "proc.plugin", Module: module, Priority: prio, UpdateEvery: 1,
	}}
	for _, d := range dims {
		c.def.Dims = append(c.def.Dims, d.d)
		c.keys = append(c.keys, d.key)
	}
	return c
}

// inc and abs are shorthands for a kd: key, dimension id, name ("" = id),
// multiplier and divisor.
func inc(key, id, name string, mul, div int64) kd {
	return kd{key, dim(id, name, algIncremental, mul, div)}
}

func abs(key, id, name string, mul, div int64) kd {
	return kd{key, dim(id, name, algAbsolute, mul, div)}
}

// kvValues are the values of one read of the files, by key slot. set is
// the parsers' only way in: keys nobody charts are skipped with one map
// lookup, which does not allocate (string(b) in a map index is free).
type kvValues struct {
	index   map[string]int
	vals    []float64
	seen    []bool
	scratch []byte // prefix+name, reused
}

func newKVValues() *kvValues { return &kvValues{index: map[string]int{}} }

// slot returns the slot of key, adding it.
func (kv *kvValues) slot(key string) int {
	if i, ok := kv.index[key]; ok {
		return i
	}
	kv.index[key] = len(kv.vals)
	kv.vals = append(kv.vals, 0)
	kv.seen = append(kv.seen, false)
	return len(kv.vals) - 1
}

func (kv *kvValues) reset() {
	for i := range kv.seen {
		kv.seen[i] = false
	}
}

// set stores v under prefix+name when someone charts that key.
func (kv *kvValues) set(prefix string, name []byte, v float64) {
	kv.scratch = append(append(kv.scratch[:0], prefix...), name...)
	if i, ok := kv.index[string(kv.scratch)]; ok {
		kv.vals[i], kv.seen[i] = v, true
	}
}

// putPrefixed stores v under prefix+name when someone charts that key.
func (kv *kvValues) putPrefixed(prefix, name string, v float64) {
	kv.scratch = append(append(kv.scratch[:0], prefix...), name...)
	if i, ok := kv.index[string(kv.scratch)]; ok {
		kv.vals[i], kv.seen[i] = v, true
	}
}

// add adds v to key's value of this read (per-CPU lines summed).
func (kv *kvValues) add(key []byte, v float64) {
	if i, ok := kv.index[string(key)]; ok {
		if kv.seen[i] {
			kv.vals[i] += v
		} else {
			kv.vals[i], kv.seen[i] = v, true
		}
	}
}

// get returns the value of a key and whether this read had it.
func (kv *kvValues) get(key string) (float64, bool) {
	i, ok := kv.index[key]
	if !ok || !kv.seen[i] {
		return 0, false
	}
	return kv.vals[i], true
}

// put stores a derived value under key (the key must have a slot).
func (kv *kvValues) put(key string, v float64) {
	if i, ok := kv.index[key]; ok {
		kv.vals[i], kv.seen[i] = v, true
	}
}

// kvSource is one file of a key/value collector and its parser.
type kvSource struct {
	path   string
	prefix string
	parse  func(b []byte, prefix string, kv *kvValues) error
	read   func() ([]byte, error) // tests replace it
	done   func()
	// optional: a missing file is no error (e.g. /proc/pressure/irq on
	// kernels before 6.1, /proc/net/snmp6 without IPv6).
	optional bool
}

// kvColl is a collector of charts whose dimensions are named values of
// one or more /proc files (meminfo, vmstat, snmp, netstat, snmp6,
// sockstat, pressure). At the first successful read it makes every chart
// whose keys the kernel has (see kvChart.all) and then emits them each
// tick; a key missing from a later read gives that dimension a gap.
type kvColl struct {
	id      string
	srcs    []*kvSource
	specs   []kvChart
	derive  func(kv *kvValues) // fills derived keys after parsing
	kv      *kvValues
	charts  []*kvLive
	started bool
	pending []int     // specs not built yet: their keys were missing
	checked time.Time // when pending was last tried
}

type kvLive struct {
	c     *chart
	zero  bool // a missing key counts 0 (kvChart.always)
	slots []int
	raw   []float64
}

func newKVColl(id string, specs []kvChart, srcs ...*kvSource) *kvColl {
	c := &kvColl{id: id, srcs: srcs, specs: specs, kv: newKVValues()}
	for _, s := range srcs {
		if s.read == nil {
			r := newProcReader(s.path)
			s.read, s.done = r.read, r.close
		}
	}
	for _, sp := range specs {
		for _, k := range sp.keys {
			c.kv.slot(k)
		}
	}
	return c
}

func (c *kvColl) name() string { return c.id }

func (c *kvColl) close() {
	for _, s := range c.srcs {
		if s.done != nil {
			s.done()
		}
	}
}

func (c *kvColl) collect(tk *tick) error {
	c.kv.reset()
	read := 0
	for _, s := range c.srcs {
		b, err := s.read()
		if err != nil {
			if s.optional {
				continue
			}
			return fmt.Errorf("read %s: %w", s.path, err)
		}
		if err := s.parse(b, s.prefix, c.kv); err != nil {
			return fmt.Errorf("%s: %w", s.path, err)
		}
		read++
	}
	if read == 0 {
		return nil // only optional files, none present: no source on this host
	}
	if c.derive != nil {
		c.derive(c.kv)
	}
	if !c.started {
		c.started = true
		c.pending = c.pending[:0]
		for i := range c.specs {
			c.pending = append(c.pending, i)
		}
		c.build()
		c.checked = tk.now
	} else if len(c.pending) > 0 && tk.now.Sub(c.checked) >= rescanEvery {
		// a source that came later (swapon, a module loaded): its charts
		// appear within rescanEvery
		c.build()
		c.checked = tk.now
	}
	for _, l := range c.charts {
		for i, s := range l.slots {
			switch {
			case c.kv.seen[s]:
				l.raw[i] = c.kv.vals[s]
			case l.zero:
				l.raw[i] = 0
			default:
				l.raw[i] = nan
			}
		}
		l.c.emit(tk, l.raw)
	}
	return nil
}

// build makes the pending charts whose keys this read has.
func (c *kvColl) build() {
	left := c.pending[:0]
	for _, si := range c.pending {
		sp := c.specs[si]
		def := sp.def
		def.Dims = nil
		var slots []int
		for i, k := range sp.keys {
			s := c.kv.index[k]
			if !c.kv.seen[s] && !sp.always {
				if sp.all {
					slots = nil
					break
				}
				continue
			}
			def.Dims = append(def.Dims, sp.def.Dims[i])
			slots = append(slots, s)
		}
		if len(slots) == 0 || sp.always && !c.anySeen(sp.keys) {
			left = append(left, si)
			continue
		}
		c.charts = append(c.charts, &kvLive{c: newChart(&def), zero: sp.always, slots: slots, raw: make([]float64, len(slots))})
	}
	c.pending = left
}

func (c *kvColl) anySeen(keys []string) bool {
	for _, k := range keys {
		if c.kv.seen[c.kv.index[k]] {
			return true
		}
	}
	return false
}
