package collect

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"slices"

	"peerdns/agent/store"
)

// perCPUTable is a parsed /proc/interrupts or /proc/softirqs: a header of
// CPU columns ("CPU0 CPU1 ...", offline CPUs left out) and a row per
// source ("LOC: 312525 296863 Local timer interrupts"). Rows keep their
// position between reads so nothing is allocated while the kernel's list
// stays the same.
type perCPUTable struct {
	cpus    []int // CPU number of each column
	rows    []perCPURow
	changed bool // the CPU columns or the row ids differ from the previous read
	fs      [][]byte
}

type perCPURow struct {
	id, name string
	vals     []float64 // per column; fewer than len(cpus) for ERR/MIS
	total    float64
}

// parse reads b. name makes a row's display name from its id and
// description words (nil: the id).
func (t *perCPUTable) parse(b []byte, name func(id []byte, desc [][]byte) string) error {
	t.changed = false
	header, b := nextLine(b)
	t.fs = fields(t.fs[:0], header)
	if len(t.fs) == 0 {
		return errors.New("no CPU header")
	}
	if len(t.fs) != len(t.cpus) {
		t.cpus, t.changed = make([]int, len(t.fs)), true
	}
	for i, f := range t.fs {
		if !bytes.HasPrefix(f, []byte("CPU")) {
			return fmt.Errorf("bad CPU header %q", header)
		}
		n, ok := parseNum(f[3:])
		if !ok {
			return fmt.Errorf("bad CPU header %q", header)
		}
		if t.cpus[i] != int(n) {
			t.cpus[i], t.changed = int(n), true
		}
	}
	r := 0
	for len(b) > 0 {
		var line []byte
		line, b = nextLine(b)
		colon := bytes.IndexByte(line, ':')
		if colon < 0 {
			continue
		}
		id := bytes.TrimSpace(line[:colon])
		if len(id) == 0 {
			continue
		}
		t.fs = fields(t.fs[:0], line[colon+1:])
		nv := 0
		for nv < len(t.fs) && nv < len(t.cpus) {
			if _, ok := parseNum(t.fs[nv]); !ok {
				break
			}
			nv++
		}
		if nv == 0 {
			continue // malformed: skip the line, keep the others
		}
		if r == len(t.rows) || t.rows[r].id != string(id) || len(t.rows[r].vals) != nv {
			n := string(id)
			if name != nil {
				n = name(id, t.fs[nv:])
			}
			row := perCPURow{id: string(id), name: n, vals: make([]float64, nv)}
			if r == len(t.rows) {
				t.rows = append(t.rows, row)
			} else {
				t.rows[r] = row
			}
			t.changed = true
		}
		row := &t.rows[r]
		row.total = 0
		for i := 0; i < nv; i++ {
			v, _ := parseNum(t.fs[i])
			row.vals[i] = v
			row.total += v
		}
		r++
	}
	if r != len(t.rows) {
		t.rows, t.changed = t.rows[:r], true
	}
	if r == 0 {
		return errNoValues
	}
	return nil
}

// irqName is Netdata's dimension name of an interrupt: numbered IRQs get
// the device (the last word of the description, words split on ':' too)
// and the number, "virtio3-rx_41"; named ones (LOC, RES) keep the id.
func irqName(id []byte, desc [][]byte) string {
	if len(id) == 0 || id[0] < '0' || id[0] > '9' || len(desc) == 0 {
		return string(id)
	}
	last := desc[len(desc)-1]
	if i := bytes.LastIndexByte(last, ':'); i >= 0 {
		last = last[i+1:]
	}
	if len(last) == 0 {
		return string(id)
	}
	return string(last) + "_" + string(id)
}

// perCPUColl stores a system chart (every source, summed over the CPUs)
// and one chart per CPU (every source with a column for it) from one
// perCPUTable file. Netdata adds a dimension when its counter first
// leaves zero; here every source the kernel lists is a dimension from the
// start, so a chart's dimensions do not change (and its data is not
// reset) when a device fires for the first time. The charts are rebuilt
// only when the kernel's list of sources or CPUs changes; per-CPU charts
// of a CPU gone offline are removed.
type perCPUColl struct {
	id       string
	read     func() ([]byte, error)
	done     func()
	naming   func(id []byte, desc [][]byte) string
	sys      store.ChartDef // template of the system chart (no dims)
	cpu      store.ChartDef // template of the per-CPU charts: ID and Title get the CPU number
	cpuID    string         // per-CPU chart id format, "cpu.cpu%d_interrupts"
	cpuPrio  int
	tab      perCPUTable
	system   *chart
	cores    []*chart // per column
	raw      []float64
	built    bool
	lastCPUs []int
}

func newPerCPUColl(id, path string, name func([]byte, [][]byte) string, sys, cpu store.ChartDef, cpuID string) *perCPUColl {
	r := newProcReader(path)
	return &perCPUColl{id: id, read: r.read, done: r.close, naming: name, sys: sys, cpu: cpu, cpuID: cpuID, cpuPrio: cpu.Priority}
}

func (c *perCPUColl) name() string { return c.id }

func (c *perCPUColl) close() {
	if c.done != nil {
		c.done()
	}
}

func (c *perCPUColl) collect(tk *tick) error {
	b, err := c.read()
	if err != nil {
		return fmt.Errorf("read %s: %w", c.sys.Module, err)
	}
	if err := c.tab.parse(b, c.naming); err != nil {
		return fmt.Errorf("%s: %w", c.sys.Module, err)
	}
	if !c.built || c.tab.changed {
		c.rebuild(tk)
	}
	c.raw = c.raw[:0]
	for _, r := range c.tab.rows {
		c.raw = append(c.raw, r.total)
	}
	c.system.emit(tk, c.raw)
	for col, ch := range c.cores {
		c.raw = c.raw[:0]
		for _, r := range c.tab.rows {
			if col < len(r.vals) && len(r.vals) == len(c.tab.cpus) {
				c.raw = append(c.raw, r.vals[col])
			}
		}
		ch.emit(tk, c.raw)
	}
	return nil
}

func (c *perCPUColl) rebuild(tk *tick) {
	c.built = true
	def := c.sys
	def.Dims = nil
	for _, r := range c.tab.rows {
		def.Dims = append(def.Dims, dim(r.id, r.name, algIncremental, 1, 1))
	}
	old := c.system
	c.system = newChart(&def)
	if old != nil && old.have && slices.Equal(c.lastCPUs, c.tab.cpus) {
		// Each source keeps its own previous count (matched by id, not
		// position: a source that went can leave another in its place);
		// a new source has none, so it starts with a gap. When the CPU
		// columns changed, the sums are over other CPUs (a CPU back
		// online brings back everything it counted before): no source
		// keeps its count, the chart has a gap for that second.
		at := make(map[string]int, len(old.def.Dims))
		for i, d := range old.def.Dims {
			at[d.ID] = i
		}
		for i, d := range def.Dims {
			if j, ok := at[d.ID]; ok {
				c.system.prev[i] = old.prev[j]
			} else {
				c.system.prev[i] = math.NaN()
			}
		}
		c.system.prevAt, c.system.have = old.prevAt, true
	}
	// per-CPU charts
	keep := map[int]bool{}
	for _, n := range c.tab.cpus {
		keep[n] = true
	}
	for i, n := range c.lastCPUs {
		if !keep[n] && i < len(c.cores) {
			tk.remove(c.cores[i].def)
		}
	}
	c.cores = c.cores[:0]
	for _, n := range c.tab.cpus {
		d := c.cpu
		d.ID = fmt.Sprintf(c.cpuID, n)
		d.Priority = c.cpuPrio + n
		d.Dims = nil
		for _, r := range c.tab.rows {
			if len(r.vals) == len(c.tab.cpus) {
				d.Dims = append(d.Dims, dim(r.id, r.name, algIncremental, 1, 1))
			}
		}
		if len(d.Dims) > 0 {
			c.cores = append(c.cores, newChart(&d))
		}
	}
	c.lastCPUs = append(c.lastCPUs[:0], c.tab.cpus...)
	c.raw = make([]float64, 0, len(c.tab.rows))
}

func newInterrupts(root string) *perCPUColl {
	c := newPerCPUColl("interrupts", root+"/proc/interrupts", irqName,
		store.ChartDef{ID: "system.interrupts", Context: "system.interrupts", Family: "interrupts", Title: "System interrupts",
			Units: "interrupts/s", ChartType: "stacked", Plugin: "proc.plugin", Module: "/proc/interrupts", Priority: 1000, UpdateEvery: 1},
		store.ChartDef{Context: "cpu.interrupts", Family: "interrupts", Title: "CPU Interrupts",
			Units: "interrupts/s", ChartType: "stacked", Plugin: "proc.plugin", Module: "/proc/interrupts", Priority: 1100, UpdateEvery: 1},
		"cpu.cpu%d_interrupts")
	return c
}

func newSoftirqs(root string) *perCPUColl {
	return newPerCPUColl("softirqs", root+"/proc/softirqs", nil,
		store.ChartDef{ID: "system.softirqs", Context: "system.softirqs", Family: "softirqs", Title: "System softirqs",
			Units: "softirqs/s", ChartType: "stacked", Plugin: "proc.plugin", Module: "/proc/softirqs", Priority: 950, UpdateEvery: 1},
		store.ChartDef{Context: "cpu.softirqs", Family: "softirqs", Title: "CPU softirqs",
			Units: "softirqs/s", ChartType: "stacked", Plugin: "proc.plugin", Module: "/proc/softirqs", Priority: 3000, UpdateEvery: 1},
		"cpu.cpu%d_softirqs")
}
