package collect

import "peerdns/agent/store"

// cpuDims are Netdata's system.cpu / cpu.cpuN dimensions, in its order;
// idle is hidden (it shows only in allmetrics).
var cpuDims = []string{"guest_nice", "guest", "steal", "softirq", "irq", "user", "system", "nice", "iowait", "idle"}

func cpuDef(id, context, family, title string, prio int) *store.ChartDef {
	def := &store.ChartDef{
		ID: id, Context: context, Family: family, Title: title,
		Units: "percentage", ChartType: "stacked", Plugin: "proc.plugin", Module: "/proc/stat",
		Priority: prio, UpdateEvery: 1,
	}
	for _, d := range cpuDims {
		// Netdata's algorithm is percentage-of-incremental-row: counters
		// turned into each dimension's share of the row's increase.
		dd := dim(d, "", algIncremental, 1, 1)
		dd.Hidden = d == "idle"
		def.Dims = append(def.Dims, dd)
	}
	return def
}

// cpuRow is one CPU line's chart and its previous jiffies.
type cpuRow struct {
	def  *store.ChartDef
	prev [10]float64
	have bool
	out  []float64
}

// update stores each dimension's share of the row's increase since the
// previous read, in percent. A dimension whose counter went backwards
// (iowait may: the kernel estimates it for idle CPUs) gives 0 for the
// second, as Netdata's does, and the others share the row's increase
// without it (Netdata divides by the row's net change, which the
// backwards step makes smaller, so its shares sum over 100). A row whose
// every change went backwards gives no point.
func (r *cpuRow) update(tk *tick, f [10]float64) {
	prev, had := r.prev, r.have
	r.prev, r.have = f, true
	// as-collected shows the jiffies as read, as Netdata does.
	tk.collected(r.def.ID, f[:])
	if !had {
		return
	}
	var total float64
	var d [10]float64
	back := false
	for i := range f {
		d[i] = f[i] - prev[i]
		if d[i] < 0 {
			d[i], back = 0, true
		}
		total += d[i]
	}
	if back && total == 0 {
		return
	}
	if r.out == nil {
		r.out = make([]float64, len(f))
	}
	for i := range f {
		if total > 0 {
			r.out[i] = d[i] * 100 / total
		} else {
			r.out[i] = 0
		}
	}
	tk.put(r.def, r.out)
}
