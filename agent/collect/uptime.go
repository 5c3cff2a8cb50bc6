package collect

import (
	"fmt"

	"peerdns/agent/store"
)

// uptimeColl stores system.uptime from /proc/uptime ("350735.47
// 234388.90": seconds since boot, with hundredths).
type uptimeColl struct {
	read func() ([]byte, error)
	done func()
	c    *chart
	raw  [1]float64
}

func newUptime(root string) *uptimeColl {
	r := newProcReader(root + "/proc/uptime")
	return &uptimeColl{read: r.read, done: r.close}
}

func (c *uptimeColl) name() string { return "uptime" }

func (c *uptimeColl) close() {
	if c.done != nil {
		c.done()
	}
}

func (c *uptimeColl) collect(tk *tick) error {
	b, err := c.read()
	if err != nil {
		return fmt.Errorf("read /proc/uptime: %w", err)
	}
	f, _ := firstField(b)
	up, ok := parseNum(f)
	if !ok || up < 0 {
		return fmt.Errorf("/proc/uptime: cannot parse %q", f)
	}
	if c.c == nil {
		c.c = newChart(&store.ChartDef{
			ID: "system.uptime", Context: "system.uptime", Family: "uptime", Title: "System Uptime",
			Units: "seconds", ChartType: "line", Plugin: "proc.plugin", Module: "/proc/uptime",
			Priority: 1000, UpdateEvery: 1, Dims: []store.DimDef{dim("uptime", "", algAbsolute, 1, 1)},
		})
	}
	c.raw[0] = up
	c.c.emit(tk, c.raw[:])
	return nil
}
