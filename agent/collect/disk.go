package collect

import (
	"fmt"
	"os"
	"sort"
	"time"

	"github.com/shirou/gopsutil/v3/disk"

	"peerdns/agent/store"
)

// rescanEvery is how often the disk and mount lists are read again.
const rescanEvery = 30 * time.Second

// diskColl stores disk.<dev> (KiB/s), disk_ops.<dev> (operations/s) and
// disk_util.<dev> (% of time busy) for
// every whole disk (the names in /sys/block) that has had any I/O, as
// Netdata's "auto" mode does, and system.io, the sum over those disks.
// Writes are negative, as in Netdata. The family is the disk's mount point
// when the disk itself is mounted, else its name.
type diskColl struct {
	readStats  func() (map[string]disk.IOCountersStat, error)
	readBlock  func() ([]string, error)
	readMounts func() ([]disk.PartitionStat, error)

	whole    map[string]bool
	family   map[string]string
	scanned  time.Time
	disks    map[string]*diskCharts
	io       *chart
	names    []string
	raw, sum [2]float64
}

type diskCharts struct{ io, ops, util *chart }

func newDisk() *diskColl {
	return &diskColl{
		readStats:  func() (map[string]disk.IOCountersStat, error) { return disk.IOCounters() },
		readBlock:  readSysBlock,
		readMounts: func() ([]disk.PartitionStat, error) { return disk.Partitions(false) },
		disks:      map[string]*diskCharts{},
	}
}

func readSysBlock() ([]string, error) {
	es, err := os.ReadDir("/sys/block")
	if err != nil {
		return nil, err
	}
	names := make([]string, 0, len(es))
	for _, e := range es {
		names = append(names, e.Name())
	}
	return names, nil
}

func (c *diskColl) name() string { return "disk" }

func (c *diskColl) rescan(now time.Time) {
	if c.whole != nil && now.Sub(c.scanned) < rescanEvery {
		return
	}
	c.scanned = now
	if names, err := c.readBlock(); err == nil {
		c.whole = map[string]bool{}
		for _, n := range names {
			c.whole[n] = true
		}
	} else if c.whole == nil {
		c.whole = map[string]bool{} // no /sys: every device in diskstats counts
	}
	c.family = map[string]string{}
	if ms, err := c.readMounts(); err == nil {
		for _, m := range ms {
			if len(m.Device) > 5 && m.Device[:5] == "/dev/" {
				if _, dup := c.family[m.Device[5:]]; !dup {
					c.family[m.Device[5:]] = m.Mountpoint
				}
			}
		}
	}
}

func (c *diskColl) collect(tk *tick) error {
	stats, err := c.readStats()
	if err != nil {
		return fmt.Errorf("read /proc/diskstats: %w", err)
	}
	c.rescan(tk.now)
	if c.io == nil {
		c.io = newChart(&store.ChartDef{
			ID: "system.io", Context: "system.io", Family: "disk", Title: "Disk I/O", Units: "KiB/s",
			ChartType: "area", Plugin: "proc.plugin", Module: "/proc/diskstats", Priority: 150, UpdateEvery: 1,
			// As Netdata declares them; the values put are the summed rates.
			Dims: []store.DimDef{dim("in", "", algIncremental, 1, 1), dim("out", "", algIncremental, -1, 1)},
		})
	}
	c.names = c.names[:0]
	for n := range stats {
		if len(c.whole) == 0 || c.whole[n] {
			c.names = append(c.names, n)
		}
	}
	sort.Strings(c.names)
	c.sum = [2]float64{}
	rated := false
	for _, n := range c.names {
		s := stats[n]
		dc := c.disks[n]
		fam := c.family[n]
		if fam == "" {
			fam = n
		}
		if dc == nil || dc.io.def.Family != fam {
			dc = c.newDisk(n, fam, dc)
			c.disks[n] = dc
		}
		c.raw = [2]float64{float64(s.ReadBytes), float64(s.WriteBytes)}
		tk.collected(dc.io.def.ID, c.raw[:])
		if out, ok := dc.io.convert(tk.now, c.raw[:]); ok {
			tk.put(dc.io.def, out)
			// system.io sums the disks' rates (not the rate of a sum, so a
			// disk appearing does not look like a burst).
			if out[0] == out[0] && out[1] == out[1] {
				c.sum[0] += out[0]
				c.sum[1] += out[1]
				rated = true
			}
		}
		c.raw = [2]float64{float64(s.ReadCount), float64(s.WriteCount)}
		dc.ops.emit(tk, c.raw[:])
		// io_time is milliseconds spent doing I/O: ms per s / 10 = percent.
		c.raw[0] = float64(s.IoTime)
		dc.util.emit(tk, c.raw[:1])
	}
	if rated {
		tk.put(c.io.def, c.sum[:])
	}
	return nil
}

// newDisk builds the charts of one disk, keeping the counters of old (a
// family change after a mount must not cost a sample).
func (c *diskColl) newDisk(dev, family string, old *diskCharts) *diskCharts {
	mk := func(typ, context, title, units, chartType string, prio int, mul int64, div int64) *chart {
		return newChart(&store.ChartDef{
			ID: typ + "." + dev, Context: context, Family: family, Title: title, Units: units, ChartType: chartType,
			Plugin: "proc.plugin", Module: "/proc/diskstats", Priority: prio, UpdateEvery: 1,
			Dims: []store.DimDef{
				dim("reads", "", algIncremental, mul, div), dim("writes", "", algIncremental, -mul, div),
			},
		})
	}
	dc := &diskCharts{
		io:  mk("disk", "disk.io", "Disk I/O Bandwidth", "KiB/s", "area", 2000, 1, 1024),
		ops: mk("disk_ops", "disk.ops", "Disk Completed I/O Operations", "operations/s", "line", 2010, 1, 1),
		util: newChart(&store.ChartDef{
			ID: "disk_util." + dev, Context: "disk.util", Family: family, Title: "Disk Utilization Time",
			Units: "% of time working", ChartType: "area", Plugin: "proc.plugin", Module: "/proc/diskstats",
			Priority: 2040, UpdateEvery: 1, Dims: []store.DimDef{dim("utilization", "", algIncremental, 1, 10)},
		}),
	}
	if old != nil {
		for _, p := range [][2]*chart{{dc.io, old.io}, {dc.ops, old.ops}, {dc.util, old.util}} {
			p[0].prev, p[0].prevAt, p[0].have = p[1].prev, p[1].prevAt, p[1].have
		}
	}
	return dc
}
