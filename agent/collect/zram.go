package collect

import (
	"fmt"
	"os"
	"strings"
	"time"

	"peerdns/agent/store"
)

// zramColl stores Netdata's zram charts (module "/sys/block/zram") for
// every /sys/block/zram* device from its mm_stat (kernels 4.11+:
// orig_data_size compr_data_size mem_used_total ...): mem.zram_usage
// (compressed data and metadata), mem.zram_savings, mem.zram_ratio and
// mem.zram_efficiency. Kernels before 4.11 have separate files instead of
// mm_stat: no charts there. Devices are looked up every rescanEvery.
type zramColl struct {
	root    string
	devs    map[string]*zramDev
	scanned time.Time
	fs      [][]byte
	raw     [2]float64
}

type zramDev struct {
	r                            *procReader
	usage, savings, ratio, effic *chart
}

func newZram(root string) *zramColl { return &zramColl{root: root, devs: map[string]*zramDev{}} }

func (c *zramColl) name() string { return "zram" }

func (c *zramColl) close() {
	for _, d := range c.devs {
		d.r.close()
	}
}

func (c *zramColl) rescan(tk *tick) {
	if c.scanned != (time.Time{}) && tk.now.Sub(c.scanned) < rescanEvery {
		return
	}
	c.scanned = tk.now
	es, err := os.ReadDir(c.root + "/sys/block")
	if err != nil {
		return
	}
	present := map[string]bool{}
	for _, e := range es {
		name := e.Name()
		if !strings.HasPrefix(name, "zram") {
			continue
		}
		present[name] = true
		if c.devs[name] != nil {
			continue
		}
		mk := func(typ, context, title, units, chartType string, prio int, dims ...store.DimDef) *chart {
			return newChart(&store.ChartDef{
				ID: "mem." + typ + "." + name, Context: context, Family: name, Title: title, Units: units, ChartType: chartType,
				Plugin: "proc.plugin", Module: "/sys/block/zram", Priority: prio, UpdateEvery: 1, Dims: dims,
			})
		}
		const mib = 1 << 20
		c.devs[name] = &zramDev{
			r: newProcReader(c.root + "/sys/block/" + name + "/mm_stat"),
			usage: mk("zram_usage", "mem.zram_usage", "ZRAM Memory Usage", "MiB", "area", 1600,
				dim("compressed", "", algAbsolute, 1, mib), dim("metadata", "", algAbsolute, 1, mib)),
			savings: mk("zram_savings", "mem.zram_savings", "ZRAM Memory Savings", "MiB", "area", 1601,
				dim("savings", "", algAbsolute, -1, mib), dim("original", "", algAbsolute, 1, mib)),
			ratio: mk("zram_ratio", "mem.zram_ratio", "ZRAM Compression Ratio (original to compressed)", "ratio", "line", 1602,
				dim("ratio", "", algAbsolute, 1, 1)),
			effic: mk("zram_efficiency", "mem.zram_efficiency", "ZRAM Efficiency", "percentage", "line", 1603,
				dim("percent", "", algAbsolute, 1, 1)),
		}
	}
	for name, d := range c.devs {
		if !present[name] {
			d.r.close()
			for _, ch := range []*chart{d.usage, d.savings, d.ratio, d.effic} {
				tk.remove(ch.def)
			}
			delete(c.devs, name)
		}
	}
}

// collect charts every device it can read; a device whose mm_stat does not
// parse is reported, but the others still get their point.
func (c *zramColl) collect(tk *tick) error {
	c.rescan(tk)
	var bad error
	for name, d := range c.devs {
		b, err := d.r.read()
		if err != nil {
			continue // a pre-4.11 kernel or the device is going away
		}
		c.fs = fields(c.fs[:0], b)
		if len(c.fs) < 3 {
			bad = fmt.Errorf("/sys/block/%s/mm_stat: short %q", name, b)
			continue
		}
		orig, ok1 := parseNum(c.fs[0])
		compr, ok2 := parseNum(c.fs[1])
		used, ok3 := parseNum(c.fs[2])
		if !ok1 || !ok2 || !ok3 {
			bad = fmt.Errorf("/sys/block/%s/mm_stat: cannot parse %q", name, b)
			continue
		}
		c.raw[0], c.raw[1] = compr, max(used-compr, 0)
		d.usage.emit(tk, c.raw[:2])
		c.raw[0], c.raw[1] = max(orig-compr, 0), orig
		d.savings.emit(tk, c.raw[:2])
		c.raw[0] = 0
		if compr > 0 {
			c.raw[0] = orig / compr
		}
		d.ratio.emit(tk, c.raw[:1])
		c.raw[0] = 0
		if used > 0 {
			c.raw[0] = compr * 100 / used
		}
		d.effic.emit(tk, c.raw[:1])
	}
	return bad
}
