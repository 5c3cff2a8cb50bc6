package collect

import (
	"bytes"
	"fmt"
	"os"

	"peerdns/agent/store"
)

// slabColl stores mem.slabmemory, mem.slabfilling and mem.slabwaste from
// /proc/slabinfo, as Netdata's slabinfo.plugin does: a dimension per
// kernel slab cache, in the file's order.
//
//   - memory: num_slabs × pages_per_slab × page size (bytes the cache holds)
//   - filling: active_objs × 100 / num_objs, a whole percent (0 for an
//     empty cache)
//   - waste: memory − active_objs × objsize (never below 0)
//
// Netdata ships slabinfo.plugin but leaves it off ("a huge amount of
// metrics": three dimensions per cache, ~230 caches here). The agent runs
// it by default because a dimension costs it about a third of what one
// costs Netdata (bench/README.md, Agent); a slab cache growing without
// bound is the usual face of a kernel memory leak, and the kernel line of
// mem.kernel only says that slab grew, not which cache. It costs ~0.27 ms
// a second here, most of it the kernel making the file. /proc/slabinfo is
// readable by root only: run unprivileged, the collector fails once in
// the log and stores nothing, like any missing source. AGENT_SLABINFO=0
// (Options.NoSlabinfo) leaves it out.
//
// The format (2.1) has not changed since Linux 2.6.24: SLUB kernels print
// zero tunables, SLAB kernels (4.19 and earlier, when chosen) real ones;
// neither enters the charts. Caches appear and go (modules loaded,
// filesystems mounted): the three charts are defined again with the new
// list, keeping nothing of the old ones' rates (every dimension is
// absolute). At most maxInstances caches are charted.
type slabColl struct {
	read  func() ([]byte, error)
	done  func()
	page  float64
	names []string // dimension ids of the charts now defined
	rows  []slabRow
	fs    [][]byte

	memory, filling, waste *chart
	raw                    []float64
}

type slabRow struct {
	name                                []byte // in the read buffer: valid until the next read
	active, objs, objSize, pages, slabs float64
}

func newSlabinfo(root string) *slabColl {
	r := newProcReader(root + "/proc/slabinfo")
	return &slabColl{read: r.read, done: r.close, page: float64(os.Getpagesize())}
}

func (c *slabColl) name() string { return "slabinfo" }

func (c *slabColl) close() {
	if c.done != nil {
		c.done()
	}
}

// parseSlabinfo reads b into rows (reused) and reports whether the cache
// names differ from names, in order. Lines that do not parse (the two
// header lines, a malformed line) are skipped.
func parseSlabinfo(rows []slabRow, names []string, fs [][]byte, b []byte) ([]slabRow, [][]byte, bool) {
	rows = rows[:0]
	changed := false
	for len(b) > 0 {
		var line []byte
		line, b = nextLine(b)
		fs = fields(fs[:0], line)
		// name active num objsize objperslab pagesperslab : tunables l b s : slabdata active num shared
		if len(fs) < 16 || !bytes.Equal(fs[12], []byte("slabdata")) {
			continue
		}
		r := slabRow{name: fs[0]}
		var ok [5]bool
		r.active, ok[0] = parseNum(fs[1])
		r.objs, ok[1] = parseNum(fs[2])
		r.objSize, ok[2] = parseNum(fs[3])
		r.pages, ok[3] = parseNum(fs[5])
		r.slabs, ok[4] = parseNum(fs[14])
		if ok != [5]bool{true, true, true, true, true} || min(r.active, r.objs, r.objSize, r.pages, r.slabs) < 0 {
			continue
		}
		if len(rows) == maxInstances {
			continue
		}
		if len(rows) >= len(names) || string(fs[0]) != names[len(rows)] {
			changed = true
		}
		rows = append(rows, r)
	}
	if len(rows) != len(names) {
		changed = true
	}
	return rows, fs, changed
}

// slabDef defines one of the three charts. A name the kernel lists twice
// (two caches may share one) gets a suffix: dimension ids are unique.
func slabDef(id, title, units string, prio int, names []string) *store.ChartDef {
	d := &store.ChartDef{
		ID: id, Context: id, Family: "slab", Title: title, Units: units, ChartType: "line",
		Plugin: "slabinfo.plugin", Priority: prio, UpdateEvery: 1,
	}
	seen := make(map[string]int, len(names))
	for _, n := range names {
		seen[n]++
		if k := seen[n]; k > 1 {
			n = fmt.Sprintf("%s#%d", n, k)
		}
		d.Dims = append(d.Dims, dim(n, "", algAbsolute, 1, 1))
	}
	return d
}

func (c *slabColl) collect(tk *tick) error {
	b, err := c.read()
	if err != nil {
		return fmt.Errorf("read /proc/slabinfo: %w", err)
	}
	var changed bool
	c.rows, c.fs, changed = parseSlabinfo(c.rows, c.names, c.fs, b)
	if len(c.rows) == 0 {
		return fmt.Errorf("/proc/slabinfo: %w", errNoValues)
	}
	if changed || c.memory == nil {
		c.rebuild()
		if len(c.rows) == maxInstances {
			tk.capped("slabinfo", "slab caches")
		}
	}
	c.raw = c.raw[:0]
	for _, r := range c.rows {
		c.raw = append(c.raw, r.slabs*r.pages*c.page)
	}
	c.memory.emit(tk, c.raw)
	c.raw = c.raw[:0]
	for _, r := range c.rows {
		f := 0.0
		if r.objs > 0 {
			f = float64(int64(r.active * 100 / r.objs))
		}
		c.raw = append(c.raw, f)
	}
	c.filling.emit(tk, c.raw)
	c.raw = c.raw[:0]
	for _, r := range c.rows {
		c.raw = append(c.raw, max(r.slabs*r.pages*c.page-r.active*r.objSize, 0))
	}
	c.waste.emit(tk, c.raw)
	return nil
}

// rebuild defines the three charts with the caches just read. Only when
// the list changed: it allocates the names.
func (c *slabColl) rebuild() {
	c.names = c.names[:0]
	for _, r := range c.rows {
		c.names = append(c.names, string(r.name))
	}
	c.memory = newChart(slabDef("mem.slabmemory", "Memory Usage", "B", 3000, c.names))
	c.filling = newChart(slabDef("mem.slabfilling", "Object Filling", "%", 3001, c.names))
	c.waste = newChart(slabDef("mem.slabwaste", "Memory waste", "B", 3002, c.names))
	c.raw = make([]float64, 0, len(c.rows))
}
