package collect

import (
	"fmt"

	"github.com/shirou/gopsutil/v3/load"

	"peerdns/agent/store"
)

// loadColl stores system.load from /proc/loadavg (gopsutil). Netdata
// collects it every 5 seconds because the kernel recomputes it every 5;
// we keep the agent's one-second grid so every chart has the same slots.
type loadColl struct {
	read func() (*load.AvgStat, error)
	c    *chart
	raw  [3]float64
}

func newLoad() *loadColl { return &loadColl{read: load.Avg} }

func (c *loadColl) name() string { return "load" }

func (c *loadColl) collect(tk *tick) error {
	a, err := c.read()
	if err != nil {
		return fmt.Errorf("read /proc/loadavg: %w", err)
	}
	if c.c == nil {
		// Netdata stores load×1000 with divisor 1000; we collect the load.
		c.c = newChart(&store.ChartDef{
			ID: "system.load", Context: "system.load", Family: "load", Title: "System Load Average",
			Units: "load", ChartType: "line", Plugin: "proc.plugin", Module: "/proc/loadavg",
			Priority: 100, UpdateEvery: 1,
			Dims: []store.DimDef{
				dim("load1", "", algAbsolute, 1, 1), dim("load5", "", algAbsolute, 1, 1), dim("load15", "", algAbsolute, 1, 1),
			},
		})
	}
	c.raw = [3]float64{a.Load1, a.Load5, a.Load15}
	c.c.emit(tk, c.raw[:])
	return nil
}
