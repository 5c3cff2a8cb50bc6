package collect

import (
	"bytes"
	"fmt"

	"peerdns/agent/store"
)

// loadColl stores system.load and system.active_processes from
// /proc/loadavg ("0.52 0.58 0.59 3/245 12345": the three averages, then
// runnable/total threads). Netdata collects load every 5 seconds because
// the kernel recomputes it every 5; we keep the agent's one-second grid
// so every chart has the same slots.
type loadColl struct {
	read         func() ([]byte, error)
	done         func()
	load, active *chart
	raw          [3]float64
}

func newLoad(root string) *loadColl {
	r := newProcReader(root + "/proc/loadavg")
	return &loadColl{read: r.read, done: r.close}
}

func (c *loadColl) name() string { return "load" }

func (c *loadColl) close() {
	if c.done != nil {
		c.done()
	}
}

// parseLoadavg returns the three averages and the total number of threads.
func parseLoadavg(b []byte) (l1, l5, l15, threads float64, err error) {
	var f [4][]byte
	rest := b
	for i := range f {
		f[i], rest = firstField(rest)
	}
	var ok [4]bool
	l1, ok[0] = parseNum(f[0])
	l5, ok[1] = parseNum(f[1])
	l15, ok[2] = parseNum(f[2])
	if _, total, found := bytes.Cut(f[3], []byte{'/'}); found {
		threads, ok[3] = parseNum(total)
	}
	if !ok[0] || !ok[1] || !ok[2] || !ok[3] {
		return 0, 0, 0, 0, fmt.Errorf("/proc/loadavg: cannot parse %q", bytes.TrimSpace(b))
	}
	return l1, l5, l15, threads, nil
}

func (c *loadColl) collect(tk *tick) error {
	b, err := c.read()
	if err != nil {
		return fmt.Errorf("read /proc/loadavg: %w", err)
	}
	l1, l5, l15, threads, err := parseLoadavg(b)
	if err != nil {
		return err
	}
	if c.load == nil {
		// Netdata stores load×1000 with divisor 1000; we collect the load.
		c.load = newChart(&store.ChartDef{
			ID: "system.load", Context: "system.load", Family: "load", Title: "System Load Average",
			Units: "load", ChartType: "line", Plugin: "proc.plugin", Module: "/proc/loadavg",
			Priority: 100, UpdateEvery: 1,
			Dims: []store.DimDef{
				dim("load1", "", algAbsolute, 1, 1), dim("load5", "", algAbsolute, 1, 1), dim("load15", "", algAbsolute, 1, 1),
			},
		})
		c.active = newChart(&store.ChartDef{
			ID: "system.active_processes", Context: "system.active_processes", Family: "processes",
			Title: "System Active Processes", Units: "processes", ChartType: "line", Plugin: "proc.plugin",
			Module: "/proc/loadavg", Priority: 750, UpdateEvery: 1,
			Dims: []store.DimDef{dim("active", "", algAbsolute, 1, 1)},
		})
	}
	c.raw = [3]float64{l1, l5, l15}
	c.load.emit(tk, c.raw[:])
	c.raw[0] = threads
	c.active.emit(tk, c.raw[:1])
	return nil
}
