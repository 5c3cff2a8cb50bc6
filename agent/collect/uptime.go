package collect

import (
	"fmt"

	"github.com/shirou/gopsutil/v3/host"

	"peerdns/agent/store"
)

// uptimeColl stores system.uptime (gopsutil: one sysinfo(2) call, whole
// seconds; Netdata reads /proc/uptime with milliseconds).
type uptimeColl struct {
	read func() (uint64, error)
	c    *chart
	raw  [1]float64
}

func newUptime() *uptimeColl { return &uptimeColl{read: host.Uptime} }

func (c *uptimeColl) name() string { return "uptime" }

func (c *uptimeColl) collect(tk *tick) error {
	up, err := c.read()
	if err != nil {
		return fmt.Errorf("read uptime: %w", err)
	}
	if c.c == nil {
		c.c = newChart(&store.ChartDef{
			ID: "system.uptime", Context: "system.uptime", Family: "uptime", Title: "System Uptime",
			Units: "seconds", ChartType: "line", Plugin: "proc.plugin", Module: "/proc/uptime",
			Priority: 1000, UpdateEvery: 1, Dims: []store.DimDef{dim("uptime", "", algAbsolute, 1, 1)},
		})
	}
	c.raw[0] = float64(up)
	c.c.emit(tk, c.raw[:])
	return nil
}
