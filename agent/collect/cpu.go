package collect

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/shirou/gopsutil/v3/cpu"

	"peerdns/agent/store"
)

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

// cpuColl reads the per-CPU jiffies of /proc/stat (gopsutil) and stores
// system.cpu (their sum, which is what the kernel's "cpu" line is) and
// cpu.cpuN as percentages of the time that passed.
type cpuColl struct {
	read  func() ([]cpu.TimesStat, error)
	total cpuRow
	cores map[string]*cpuRow
}

type cpuRow struct {
	def  *store.ChartDef
	prev [10]float64
	have bool
	out  []float64
}

func newCPU() *cpuColl {
	return &cpuColl{read: func() ([]cpu.TimesStat, error) { return cpu.Times(true) }}
}

func (c *cpuColl) name() string { return "cpu" }

// cpuFields returns a row in cpuDims order. /proc/stat counts guest time
// inside user (and guest_nice inside nice); Netdata subtracts it so the
// stacked chart does not count it twice.
func cpuFields(t cpu.TimesStat) [10]float64 {
	user := math.Max(t.User-t.Guest, 0)
	nice := math.Max(t.Nice-t.GuestNice, 0)
	return [10]float64{t.GuestNice, t.Guest, t.Steal, t.Softirq, t.Irq, user, t.System, nice, t.Iowait, t.Idle}
}

func (c *cpuColl) collect(tk *tick) error {
	times, err := c.read()
	if err != nil {
		return fmt.Errorf("read cpu times: %w", err)
	}
	if len(times) == 0 {
		return fmt.Errorf("read cpu times: no cpu lines in /proc/stat")
	}
	if c.total.def == nil {
		c.total.def = cpuDef("system.cpu", "system.cpu", "cpu", "Total CPU utilization", 100)
		c.cores = map[string]*cpuRow{}
	}
	var sum [10]float64
	for _, t := range times {
		f := cpuFields(t)
		for i := range sum {
			sum[i] += f[i]
		}
		row := c.cores[t.CPU]
		if row == nil {
			n, err := strconv.Atoi(strings.TrimPrefix(t.CPU, "cpu"))
			if err != nil {
				continue
			}
			row = &cpuRow{def: cpuDef("cpu."+t.CPU, "cpu.cpu", "utilization", "Core utilization", 1001+n)}
			c.cores[t.CPU] = row
		}
		row.update(tk, f)
	}
	c.total.update(tk, sum)
	return nil
}

// update stores each dimension's share of the row's increase since the
// previous read, in percent.
func (r *cpuRow) update(tk *tick, f [10]float64) {
	prev, had := r.prev, r.have
	r.prev, r.have = f, true
	// as-collected shows jiffies, as Netdata does; gopsutil gives seconds
	// (USER_HZ, fixed at 100 for userspace).
	var jiffies [10]float64
	for i, v := range f {
		jiffies[i] = math.Round(v * 100)
	}
	tk.collected(r.def.ID, jiffies[:])
	if !had {
		return
	}
	var total float64
	var d [10]float64
	for i := range f {
		d[i] = f[i] - prev[i]
		if d[i] < 0 { // counter went backwards (CPU hot-unplug): skip this row
			return
		}
		total += d[i]
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
