package collect

import (
	"bytes"
	"fmt"

	"peerdns/agent/store"
)

// entropyColl stores system.entropy from
// /proc/sys/kernel/random/entropy_avail (gopsutil has no reader for it).
type entropyColl struct {
	read func() ([]byte, error)
	done func()
	c    *chart
	raw  [1]float64
}

func newEntropy(root string) *entropyColl {
	r := newProcReader(root + "/proc/sys/kernel/random/entropy_avail")
	return &entropyColl{read: r.read, done: r.close}
}

func (c *entropyColl) name() string { return "entropy" }

func (c *entropyColl) close() {
	if c.done != nil {
		c.done()
	}
}

func (c *entropyColl) collect(tk *tick) error {
	b, err := c.read()
	if err != nil {
		return fmt.Errorf("read entropy_avail: %w", err)
	}
	v, err := parseUint(bytes.TrimSpace(b))
	if err != nil {
		return fmt.Errorf("parse entropy_avail %q: %w", b, err)
	}
	if c.c == nil {
		c.c = newChart(&store.ChartDef{
			ID: "system.entropy", Context: "system.entropy", Family: "entropy", Title: "Available Entropy",
			Units: "entropy", ChartType: "line", Plugin: "proc.plugin", Module: "/proc/sys/kernel/random/entropy_avail",
			Priority: 1000, UpdateEvery: 1, Dims: []store.DimDef{dim("entropy", "", algAbsolute, 1, 1)},
		})
	}
	c.raw[0] = float64(v)
	c.c.emit(tk, c.raw[:])
	return nil
}
