package collect

import (
	"fmt"

	"github.com/shirou/gopsutil/v3/mem"

	"peerdns/agent/store"
)

// memColl stores system.ram, mem.available, mem.committed and, when the
// host has swap, system.swap, all from one read of /proc/meminfo (gopsutil). Values are
// collected in KiB and divided by 1024 into MiB, as Netdata does.
type memColl struct {
	read            func() (*mem.VirtualMemoryStat, error)
	ram, avail, swp *chart
	committed       *chart
	raw             [4]float64
}

func newMem() *memColl { return &memColl{read: mem.VirtualMemory} }

func (c *memColl) name() string { return "mem" }

func memDef(id, context, family, title, chartType string, prio int, dims ...store.DimDef) *chart {
	return newChart(&store.ChartDef{
		ID: id, Context: context, Family: family, Title: title, Units: "MiB", ChartType: chartType,
		Plugin: "proc.plugin", Module: "/proc/meminfo", Priority: prio, UpdateEvery: 1, Dims: dims,
	})
}

func (c *memColl) collect(tk *tick) error {
	v, err := c.read()
	if err != nil {
		return fmt.Errorf("read /proc/meminfo: %w", err)
	}
	if v.Total == 0 {
		return fmt.Errorf("read /proc/meminfo: MemTotal is 0")
	}
	if c.ram == nil {
		kib := func(id, name string) store.DimDef { return dim(id, name, algAbsolute, 1, 1024) }
		c.ram = memDef("system.ram", "system.ram", "ram", "System RAM", "stacked", 200,
			kib("free", ""), kib("used", ""), kib("cached", ""), kib("buffers", ""))
		c.avail = memDef("mem.available", "mem.available", "system", "Available RAM for applications", "area", 1010,
			kib("MemAvailable", "avail"))
		c.swp = memDef("system.swap", "system.swap", "swap", "System Swap", "stacked", 201,
			kib("free", ""), kib("used", ""))
		c.committed = memDef("mem.committed", "mem.committed", "system", "Committed (Allocated) Memory", "area", 1030,
			kib("Committed_AS", ""))
	}
	// gopsutil's Cached already includes SReclaimable and its Used is
	// Total-Free-Buffers-Cached: Netdata's definition of "used".
	k := func(b uint64) float64 { return float64(b) / 1024 }
	c.raw = [4]float64{k(v.Free), k(v.Used), k(v.Cached), k(v.Buffers)}
	c.ram.emit(tk, c.raw[:4])
	c.raw[0] = k(v.Available)
	c.avail.emit(tk, c.raw[:1])
	c.raw[0] = k(v.CommittedAS)
	c.committed.emit(tk, c.raw[:1])
	if v.SwapTotal > 0 {
		c.raw[0], c.raw[1] = k(v.SwapFree), k(v.SwapTotal-v.SwapFree)
		c.swp.emit(tk, c.raw[:2])
	}
	return nil
}
