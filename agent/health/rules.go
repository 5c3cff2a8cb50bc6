package health

import (
	"fmt"
	"math"

	"peerdns/agent/store"
)

// rule is one built-in alert template, after Netdata 1.37's health.d
// files (cpu.conf, ram.conf, swap.conf, disks.conf, load.conf). It applies
// to one chart (chart) or to every chart of a context (context).
type rule struct {
	name                   string
	chart, context         string
	class, component, typ  string
	units                  string
	info                   func(def *store.ChartDef) string
	every                  int64 // seconds between evaluations
	value                  func(e *Engine, def *store.ChartDef, now int64) float64
	cmp                    func(e *Engine, v float64) float64 // what the thresholds compare; nil = the value
	less                   bool                               // alert when below the thresholds (ram_available)
	warnUp, warnDown       float64                            // warn threshold while CLEAR, and while WARNING or worse
	critUp, critDown       float64                            // crit threshold while not CRITICAL, and while CRITICAL
	hasCrit                bool
	warnExpr, critExpr     string
	calc                   string // shown for calc rules
	lookupDims, lookupMeth string // shown for lookup rules
	lookupAfter            int
}

// status applies Netdata's hysteresis: the thresholds depend on the
// current status, e.g. warn: $this > (($status >= $WARNING) ? (75) : (85)),
// so an alert raised at 85 clears only below 75.
func (r *rule) status(cur Status, v float64) Status {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return StatusUndefined
	}
	beyond := func(th float64) bool {
		if r.less {
			return v < th
		}
		return v > th
	}
	warnTh := r.warnUp
	if cur == StatusWarning || cur == StatusCritical {
		warnTh = r.warnDown
	}
	critTh := r.critUp
	if cur == StatusCritical {
		critTh = r.critDown
	}
	switch {
	case r.hasCrit && beyond(critTh):
		return StatusCritical
	case beyond(warnTh):
		return StatusWarning
	}
	return StatusClear
}

func fixedInfo(s string) func(*store.ChartDef) string {
	return func(*store.ChartDef) string { return s }
}

func gtExpr(down, up float64) string {
	return fmt.Sprintf("$this > (($status >= $WARNING) ? (%g) : (%g))", down, up)
}

func gtCritExpr(down, up float64) string {
	return fmt.Sprintf("$this > (($status == $CRITICAL) ? (%g) : (%g))", down, up)
}

// builtinRules are the rules every agent runs.
func builtinRules() []*rule {
	pct := func(name, chart, context, component string, info func(*store.ChartDef) string, every int64,
		value func(*Engine, *store.ChartDef, int64) float64, wd, wu, cd, cu float64) *rule {
		return &rule{
			name: name, chart: chart, context: context, class: "Utilization", component: component, typ: "System",
			units: "%", info: info, every: every, value: value,
			warnUp: wu, warnDown: wd, critUp: cu, critDown: cd, hasCrit: true,
			warnExpr: gtExpr(wd, wu), critExpr: gtCritExpr(cd, cu),
		}
	}
	lookup := func(r *rule, method string, after int, dims string) *rule {
		r.lookupMeth, r.lookupAfter, r.lookupDims = method, after, dims
		return r
	}
	calc := func(r *rule, expr string) *rule { r.calc = expr; return r }
	rules := []*rule{
		lookup(pct("10min_cpu_usage", "system.cpu", "", "CPU",
			fixedInfo("average CPU utilization over the last 10 minutes (excluding iowait, nice and steal)"), 60,
			lookupAverage(600, "user", "system", "softirq", "irq", "guest"), 75, 85, 85, 95),
			"average", -600, "user,system,softirq,irq,guest"),
		lookup(pct("10min_cpu_iowait", "system.cpu", "", "CPU",
			fixedInfo("average CPU iowait time over the last 10 minutes"), 60,
			lookupAverage(600, "iowait"), 20, 40, 40, 50),
			"average", -600, "iowait"),
		calc(pct("ram_in_use", "system.ram", "", "Memory", fixedInfo("system memory utilization"), 10,
			calcShare("used", "used", "cached", "free", "buffers"), 80, 90, 90, 98),
			"$used * 100 / ($used + $cached + $free + $buffers)"),
		calc(pct("used_swap", "system.swap", "", "Memory", fixedInfo("swap memory utilization"), 10,
			calcShare("used", "used", "free"), 80, 90, 90, 98),
			"$used * 100 / ( $used + $free )"),
		calc(pct("disk_space_usage", "", "disk.space", "Disk",
			func(def *store.ChartDef) string { return "disk " + def.Family + " space utilization" }, 60,
			calcShare("used", "avail", "used"), 80, 90, 90, 98),
			"$used * 100 / ($avail + $used)"),
		calc(pct("disk_inode_usage", "", "disk.inodes", "Disk",
			func(def *store.ChartDef) string { return "disk " + def.Family + " inode utilization" }, 60,
			calcShare("used", "avail", "used"), 80, 90, 90, 98),
			"$used * 100 / ($avail + $used)"),
	}
	ram := &rule{
		name: "ram_available", chart: "mem.available", class: "Utilization", component: "Memory", typ: "System",
		units: "%", every: 10, less: true,
		info:   fixedInfo("percentage of estimated amount of RAM available for userspace processes, without causing swapping"),
		value:  ramAvailable,
		warnUp: 10, warnDown: 15, critUp: 5, critDown: 10, hasCrit: true,
		warnExpr: "$this < (($status >= $WARNING) ? (15) : (10))",
		critExpr: "$this < (($status == $CRITICAL) ? (10) : ( 5))",
	}
	rules = append(rules, ram)
	for _, l := range []struct {
		n, dim, word string
		down, up     float64
	}{{"15", "load15", "fifteen", 175, 200}, {"5", "load5", "five", 350, 400}, {"1", "load1", "one", 700, 800}} {
		rules = append(rules, &rule{
			name: "load_average_" + l.n, chart: "system.load", class: "Utilization", component: "Load", typ: "System",
			units: "load", every: 60, info: fixedInfo("system " + l.word + "-minute load average"),
			value: lookupMax(60, l.dim), lookupMeth: "max", lookupAfter: -60, lookupDims: l.dim,
			// Netdata: warn: ($this * 100 / $load_cpu_number) > (($status >= $WARNING) ? 175 : 200)
			cmp:    func(e *Engine, v float64) float64 { return v * 100 / float64(e.cpuNumber()) },
			warnUp: l.up, warnDown: l.down,
			warnExpr: fmt.Sprintf("($this * 100 / $load_cpu_number) > (($status >= $WARNING) ? %g : %g)", l.down, l.up),
		})
	}
	return rules
}

// dimIndexes maps dimension ids to their positions in a chart; -1 when
// missing.
func dimIndexes(def *store.ChartDef, ids []string) []int {
	idx := make([]int, len(ids))
	for i, id := range ids {
		idx[i] = -1
		for j, d := range def.Dims {
			if d.ID == id {
				idx[i] = j
			}
		}
	}
	return idx
}

// lookupRows calls fn with the sum of dims of every second of the last
// `secs` seconds (Netdata's "lookup: ... -Ns unaligned of a,b": the
// dimensions are summed per point), skipping seconds where any is missing.
func lookupRows(e *Engine, def *store.ChartDef, now, secs int64, dims []string, fn func(float64)) {
	idx := dimIndexes(def, dims)
	for _, i := range idx {
		if i < 0 {
			return
		}
	}
	w, err := e.db.QueryFor(store.ReadHealth, def.ID, 0, now-secs+1, now)
	if err != nil || len(w.Slots) == 0 {
		return
	}
	for s := range w.Slots[0] {
		sum, ok := 0.0, true
		for _, i := range idx {
			a := w.Slots[i][s]
			if a.Count == 0 {
				ok = false
				break
			}
			sum += a.Sum / float64(a.Count)
		}
		if ok {
			fn(sum)
		}
	}
}

func lookupAverage(secs int64, dims ...string) func(*Engine, *store.ChartDef, int64) float64 {
	return func(e *Engine, def *store.ChartDef, now int64) float64 {
		var sum float64
		n := 0
		lookupRows(e, def, now, secs, dims, func(v float64) { sum += v; n++ })
		if n == 0 {
			return math.NaN()
		}
		return sum / float64(n)
	}
}

func lookupMax(secs int64, dims ...string) func(*Engine, *store.ChartDef, int64) float64 {
	return func(e *Engine, def *store.ChartDef, now int64) float64 {
		m := math.NaN()
		lookupRows(e, def, now, secs, dims, func(v float64) {
			if math.IsNaN(m) || v > m {
				m = v
			}
		})
		return m
	}
}

// latest returns the chart's newest values by dimension id, if the point
// is recent (a chart that stopped being collected is undefined, not stuck
// at its last value).
func latest(e *Engine, id string, now int64) (map[string]float64, bool) {
	t, vals, ok := e.db.Latest(id)
	if !ok || now-t > staleAfter {
		return nil, false
	}
	def, ok := e.db.Chart(id)
	if !ok || len(def.Dims) != len(vals) {
		return nil, false
	}
	m := make(map[string]float64, len(vals))
	for i, d := range def.Dims {
		m[d.ID] = vals[i]
	}
	return m, true
}

// staleAfter is how old a chart's last point may be for calc rules.
const staleAfter = 10

// calcShare is "$part * 100 / (sum of total)" over the newest point.
func calcShare(part string, total ...string) func(*Engine, *store.ChartDef, int64) float64 {
	return func(e *Engine, def *store.ChartDef, now int64) float64 {
		v, ok := latest(e, def.ID, now)
		if !ok {
			return math.NaN()
		}
		var sum float64
		for _, t := range total {
			x, ok := v[t]
			if !ok {
				return math.NaN()
			}
			sum += x
		}
		p, ok := v[part]
		if !ok || sum == 0 {
			return math.NaN()
		}
		return p * 100 / sum
	}
}

// ramAvailable is Netdata's $avail * 100 / ($system.ram.used +
// $system.ram.cached + $system.ram.free + $system.ram.buffers).
func ramAvailable(e *Engine, def *store.ChartDef, now int64) float64 {
	a, ok := latest(e, def.ID, now)
	if !ok {
		return math.NaN()
	}
	r, ok := latest(e, "system.ram", now)
	if !ok {
		return math.NaN()
	}
	total := r["used"] + r["cached"] + r["free"] + r["buffers"]
	if total == 0 {
		return math.NaN()
	}
	return a["MemAvailable"] * 100 / total
}
