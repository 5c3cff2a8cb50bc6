package collect

import (
	"bytes"
	"fmt"
	"os"
	"time"

	"peerdns/agent/store"
)

// rescanEvery is how often the disk and mount lists are read again.
const rescanEvery = 30 * time.Second

// diskstats columns after major, minor and name (kernel
// Documentation/admin-guide/iostats.rst). Kernels before 4.18 print the
// first 11, 4.18 adds 4 discard columns, 5.5 adds 2 flush columns.
const (
	dsReads, dsRMerged, dsRSectors, dsRMs        = 0, 1, 2, 3
	dsWrites, dsWMerged, dsWSectors, dsWMs       = 4, 5, 6, 7
	dsInFlight, dsIOTicks, dsWeighted            = 8, 9, 10
	dsDiscards, dsDMerged, dsDSectors, dsDMs     = 11, 12, 13, 14
	dsFlushes, dsFMs                             = 15, 16
	dsColumns                                    = 17
	dsBase, dsWithDiscards, dsWithFlushes    int = 11, 15, 17
)

type diskLine struct {
	name string
	dev  devNum
	n    int // columns the kernel printed
	v    [dsColumns]float64
}

// parseDiskstats parses /proc/diskstats into dst (reused).
func parseDiskstats(dst []diskLine, fs [][]byte, b []byte) ([]diskLine, [][]byte, error) {
	n := 0
	for len(b) > 0 {
		var line []byte
		line, b = nextLine(b)
		fs = fields(fs[:0], line)
		if len(fs) < 3+dsBase {
			continue // malformed or a kernel before 2.6.25: skip
		}
		if n == len(dst) {
			dst = append(dst, diskLine{})
		}
		d := &dst[n]
		if d.name != string(fs[2]) {
			d.name = string(fs[2])
		}
		d.dev = parseDevNum(fs[0], fs[1])
		d.n = min(len(fs)-3, dsColumns)
		ok := true
		for i := 0; i < d.n; i++ {
			v, good := parseNum(fs[3+i])
			if !good {
				ok = false
				break
			}
			d.v[i] = v
		}
		if ok {
			n++
		}
	}
	if n == 0 {
		return dst[:0], fs, errNoValues
	}
	return dst[:n], fs, nil
}

// diskColl stores Netdata's per-disk charts from /proc/diskstats for every
// whole disk (a name in /sys/block; partitions are left out, as Netdata's
// default does): disk, disk_ops, disk_mops, disk_qops, disk_backlog,
// disk_busy, disk_util, disk_await, disk_avgsz, disk_svctm, disk_iotime,
// and on kernels 4.18+ the disk_ext_* discard charts (flushes from 5.5),
// plus system.io, the sum over the physical disks (over every disk on a
// host without one). Physical disks are charted from the start; virtual
// ones (under /sys/devices/virtual/block: loop, zram, dm) once they have
// done any I/O, which is Netdata's "auto" for them. The family is the
// disk's mount point when the disk itself is mounted, else its name; the
// mount is found by major:minor in /proc/self/mountinfo, as Netdata does,
// or for filesystems whose mounts carry no device number (btrfs) by the
// source /dev/<name>. Disks that go away lose their charts.
type diskColl struct {
	root string
	read func() ([]byte, error)
	done func()

	lines   []diskLine
	fs      [][]byte
	whole   map[string]bool
	virtual map[string]bool
	family  map[string]string // disk name → mount point, from the mount's source (/dev/<name>)
	devFam  map[devNum]string // major:minor → mount point, from /proc/self/mountinfo
	scanned time.Time
	disks   map[string]*diskCharts
	seen    map[string]bool
	io      *chart
	sum     [2]float64
}

type diskCharts struct {
	io, ops, mops, qops, backlog, busy, util, iotime *chart
	await, avgsz, svctm                              *chart
	extIO, extOps, extMops, extIOTime                *chart
	extAwait, extAvgsz                               *chart
	prev                                             [dsColumns]float64
	have                                             bool
	n                                                int
}

func newDisk(root string) *diskColl {
	r := newProcReader(root + "/proc/diskstats")
	return &diskColl{root: root, read: r.read, done: r.close, disks: map[string]*diskCharts{}, seen: map[string]bool{}}
}

func (c *diskColl) name() string { return "disk" }

func (c *diskColl) close() {
	if c.done != nil {
		c.done()
	}
}

func (c *diskColl) rescan(now time.Time) {
	if c.whole != nil && now.Sub(c.scanned) < rescanEvery {
		return
	}
	c.scanned = now
	c.whole, c.virtual, c.family = map[string]bool{}, map[string]bool{}, map[string]string{}
	c.devFam = readMountDevs(c.root + "/proc/self/mountinfo")
	if es, err := os.ReadDir(c.root + "/sys/block"); err == nil {
		for _, e := range es {
			c.whole[e.Name()] = true
			if _, err := os.Stat(c.root + "/sys/devices/virtual/block/" + e.Name()); err == nil {
				c.virtual[e.Name()] = true
			}
		}
	}
	if b, err := os.ReadFile(c.root + "/proc/self/mounts"); err == nil {
		for len(b) > 0 {
			var line []byte
			line, b = nextLine(b)
			dev, rest := firstField(line)
			mp, rest := firstField(rest)
			fstype, _ := firstField(rest)
			// Any user may mount FUSE naming its source "/dev/sdb":
			// it is no disk's mount (fuseblk, root's, is).
			fuse := bytes.Equal(fstype, []byte("fuse")) || bytes.HasPrefix(fstype, []byte("fuse."))
			if bytes.HasPrefix(dev, []byte("/dev/")) && !fuse {
				if _, dup := c.family[string(dev[5:])]; !dup {
					c.family[string(dev[5:])] = unescapeMount(string(mp))
				}
			}
		}
	}
}

func (c *diskColl) collect(tk *tick) error {
	b, err := c.read()
	if err != nil {
		return fmt.Errorf("read /proc/diskstats: %w", err)
	}
	c.lines, c.fs, err = parseDiskstats(c.lines, c.fs, b)
	if err != nil {
		return fmt.Errorf("/proc/diskstats: %w", err)
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
	// system.io sums the physical disks, as Netdata's does (a dm, md or
	// loop device's I/O is also its underlying disk's), or every disk
	// when the host has no physical one.
	var virt [2]float64
	physical, rated, virtRated := false, false, false
	c.sum = [2]float64{}
	clear(c.seen)
	for i := range c.lines {
		l := &c.lines[i]
		if len(c.whole) > 0 && !c.whole[l.name] {
			continue
		}
		dc := c.disks[l.name]
		fam := c.devFam[l.dev]
		if fam == "" {
			fam = c.family[l.name]
		}
		if fam == "" {
			fam = l.name
		}
		if dc == nil || dc.io.def.Family != fam || dc.n != l.n {
			if dc == nil && c.virtual[l.name] && l.v[dsReads]+l.v[dsWrites] == 0 {
				continue // an idle virtual disk (an unused loop device)
			}
			if dc == nil && len(c.disks) >= maxInstances {
				tk.capped("disk", "disks")
				continue
			}
			if dc != nil {
				dc.remove(tk)
			}
			dc = newDiskCharts(l.name, fam, l.n)
			c.disks[l.name] = dc
		}
		c.seen[l.name] = true
		physical = physical || !c.virtual[l.name]
		if out, ok := dc.update(tk, l); ok {
			// system.io sums the disks' rates (not the rate of a sum, so a
			// disk appearing does not look like a burst).
			if c.virtual[l.name] {
				virt[0], virt[1] = virt[0]+out[0], virt[1]+out[1]
				virtRated = true
			} else {
				c.sum[0] += out[0]
				c.sum[1] += out[1]
				rated = true
			}
		}
	}
	if !physical {
		c.sum, rated = virt, virtRated
	}
	for name, dc := range c.disks {
		if !c.seen[name] {
			dc.remove(tk)
			delete(c.disks, name)
		}
	}
	if rated {
		tk.put(c.io.def, c.sum[:])
	}
	return nil
}

// update stores the disk's charts; it returns disk.io's values for
// system.io.
func (dc *diskCharts) update(tk *tick, l *diskLine) ([]float64, bool) {
	v := &l.v
	var raw [2]float64
	emit := func(c *chart, a, b float64) {
		raw[0], raw[1] = a, b
		c.emit(tk, raw[:len(c.def.Dims)])
	}
	var ioOut []float64
	ok := false
	raw[0], raw[1] = v[dsRSectors], v[dsWSectors]
	tk.collected(dc.io.def.ID, raw[:])
	if out, good := dc.io.convert(tk.now, raw[:]); good {
		tk.put(dc.io.def, out)
		if out[0] == out[0] && out[1] == out[1] {
			ioOut, ok = out, true
		}
	}
	emit(dc.ops, v[dsReads], v[dsWrites])
	emit(dc.mops, v[dsRMerged], v[dsWMerged])
	emit(dc.qops, v[dsInFlight], 0)
	emit(dc.backlog, v[dsWeighted], 0)
	emit(dc.busy, v[dsIOTicks], 0)
	emit(dc.util, v[dsIOTicks], 0)
	emit(dc.iotime, v[dsRMs], v[dsWMs])
	if dc.extIO != nil {
		emit(dc.extIO, v[dsDSectors], 0)
		emit(dc.extOps, v[dsDiscards], v[dsFlushes])
		emit(dc.extMops, v[dsDMerged], 0)
		emit(dc.extIOTime, v[dsDMs], v[dsFMs])
	}
	// Per-operation averages come from the deltas since the last read:
	// await = time spent / operations, avgsz = KiB / operations, svctm =
	// busy time / operations; no operations gives 0, as in Netdata. A
	// counter that went backwards gives no point.
	if dc.have {
		d := func(i int) float64 { return v[i] - dc.prev[i] }
		back := false
		for i := 0; i < l.n; i++ {
			if v[i] < dc.prev[i] && i != dsInFlight {
				back = true
			}
		}
		if !back {
			per := func(x, ops float64) float64 {
				if ops <= 0 {
					return 0
				}
				return x / ops
			}
			r, w := d(dsReads), d(dsWrites)
			emit(dc.await, per(d(dsRMs), r), -per(d(dsWMs), w))
			emit(dc.avgsz, per(d(dsRSectors)*512/1024, r), -per(d(dsWSectors)*512/1024, w))
			raw[0] = per(d(dsIOTicks), r+w)
			dc.svctm.emit(tk, raw[:1])
			if dc.extAwait != nil {
				ds, fl := d(dsDiscards), d(dsFlushes)
				emit(dc.extAwait, per(d(dsDMs), ds), -per(d(dsFMs), fl))
				raw[0] = per(d(dsDSectors)*512/1024, ds)
				dc.extAvgsz.emit(tk, raw[:1])
			}
		}
	}
	dc.prev, dc.have = *v, true
	return ioOut, ok
}

func (dc *diskCharts) all() []*chart {
	cs := []*chart{dc.io, dc.ops, dc.mops, dc.qops, dc.backlog, dc.busy, dc.util, dc.iotime, dc.await, dc.avgsz, dc.svctm}
	if dc.extIO != nil {
		cs = append(cs, dc.extIO, dc.extOps, dc.extMops, dc.extIOTime, dc.extAwait, dc.extAvgsz)
	}
	return cs
}

func (dc *diskCharts) remove(tk *tick) {
	for _, c := range dc.all() {
		tk.remove(c.def)
	}
}

// newDiskCharts builds the charts of one disk whose diskstats line has n
// columns.
func newDiskCharts(dev, family string, n int) *diskCharts {
	mk := func(typ, context, title, units, chartType string, prio int, dims ...store.DimDef) *chart {
		return newChart(&store.ChartDef{
			ID: typ + "." + dev, Context: context, Family: family, Title: title, Units: units, ChartType: chartType,
			Plugin: "proc.plugin", Module: "/proc/diskstats", Priority: prio, UpdateEvery: 1, Dims: dims,
		})
	}
	inc := func(id string, mul, div int64) store.DimDef { return dim(id, "", algIncremental, mul, div) }
	ab := func(id string) store.DimDef { return dim(id, "", algAbsolute, 1, 1) }
	dc := &diskCharts{
		n:  n,
		io: mk("disk", "disk.io", "Disk I/O Bandwidth", "KiB/s", "area", 2000, inc("reads", 512, 1024), inc("writes", -512, 1024)),
		ops: mk("disk_ops", "disk.ops", "Disk Completed I/O Operations", "operations/s", "line", 2010,
			inc("reads", 1, 1), inc("writes", -1, 1)),
		qops:    mk("disk_qops", "disk.qops", "Disk Current I/O Operations", "operations", "line", 2015, ab("operations")),
		backlog: mk("disk_backlog", "disk.backlog", "Disk Backlog", "milliseconds", "area", 2020, inc("backlog", 1, 10)),
		busy:    mk("disk_busy", "disk.busy", "Disk Busy Time", "milliseconds", "area", 2030, inc("busy", 1, 1)),
		util:    mk("disk_util", "disk.util", "Disk Utilization Time", "% of time working", "area", 2040, inc("utilization", 1, 10)),
		await: mk("disk_await", "disk.await", "Average Completed I/O Operation Time", "milliseconds/operation", "line", 2050,
			ab("reads"), ab("writes")),
		avgsz: mk("disk_avgsz", "disk.avgsz", "Average Completed I/O Operation Bandwidth", "KiB/operation", "area", 2060,
			ab("reads"), ab("writes")),
		svctm: mk("disk_svctm", "disk.svctm", "Average Service Time", "milliseconds/operation", "line", 2070, ab("svctm")),
		mops: mk("disk_mops", "disk.mops", "Disk Merged Operations", "merged operations/s", "line", 2080,
			inc("reads", 1, 1), inc("writes", -1, 1)),
		iotime: mk("disk_iotime", "disk.iotime", "Disk Total I/O Time", "milliseconds/s", "line", 2090,
			inc("reads", 1, 1), inc("writes", -1, 1)),
	}
	if n >= dsWithDiscards {
		opsDims := []store.DimDef{inc("discards", 1, 1)}
		timeDims := []store.DimDef{inc("discards", 1, 1)}
		awaitDims := []store.DimDef{ab("discards")}
		if n >= dsWithFlushes {
			opsDims = append(opsDims, inc("flushes", -1, 1))
			timeDims = append(timeDims, inc("flushes", -1, 1))
			awaitDims = append(awaitDims, ab("flushes"))
		}
		dc.extIO = mk("disk_ext", "disk_ext.io", "Amount of Discarded Data", "KiB/s", "area", 2001, inc("discards", 512, 1024))
		dc.extOps = mk("disk_ext_ops", "disk_ext.ops", "Disk Completed Extended I/O Operations", "operations/s", "line", 2011, opsDims...)
		dc.extAwait = mk("disk_ext_await", "disk_ext.await", "Average Completed Extended I/O Operation Time",
			"milliseconds/operation", "line", 2051, awaitDims...)
		dc.extAvgsz = mk("disk_ext_avgsz", "disk_ext.avgsz", "Average Amount of Discarded Data", "KiB/operation", "area", 2060, ab("discards"))
		dc.extMops = mk("disk_ext_mops", "disk_ext.mops", "Disk Merged Discard Operations", "merged operations/s", "line", 2081, inc("discards", 1, 1))
		dc.extIOTime = mk("disk_ext_iotime", "disk_ext.iotime", "Disk Total I/O Time for Extended Operations", "milliseconds/s", "line", 2091, timeDims...)
	}
	return dc
}

// devNum is a block device's major and minor number.
type devNum [2]uint32

func parseDevNum(major, minor []byte) devNum {
	ma, _ := parseNum(major)
	mi, _ := parseNum(minor)
	return devNum{uint32(ma), uint32(mi)}
}

// readMountDevs maps the device of each mount in a mountinfo file to its
// mount point, the first one listed when a device is mounted at several
// (Netdata's mountinfo_find), so a disk is matched to its mount by
// number: a dm device is mounted as /dev/mapper/<name>, never /dev/dm-0.
// Filesystems without a block device (tmpfs, FUSE, btrfs) have major 0,
// which no disk has.
func readMountDevs(path string) map[devNum]string {
	m := map[devNum]string{}
	b, err := os.ReadFile(path)
	if err != nil {
		return m
	}
	for len(b) > 0 {
		var line []byte
		line, b = nextLine(b)
		_, rest := firstField(line) // mount id
		_, rest = firstField(rest)  // parent id
		dev, rest := firstField(rest)
		_, rest = firstField(rest) // root within the filesystem
		mp, _ := firstField(rest)
		ma, mi, ok := bytes.Cut(dev, []byte(":"))
		if !ok || len(mp) == 0 {
			continue
		}
		d := parseDevNum(ma, mi)
		if _, dup := m[d]; !dup && d[0] != 0 {
			m[d] = unescapeMount(string(mp))
		}
	}
	return m
}

// unescapeMount undoes the octal escapes of /proc/self/mounts ("\040"
// for a space).
func unescapeMount(s string) string {
	if !bytes.Contains([]byte(s), []byte{'\\'}) {
		return s
	}
	var out []byte
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) && s[i+1] >= '0' && s[i+1] <= '3' {
			out = append(out, (s[i+1]-'0')<<6|(s[i+2]-'0')<<3|(s[i+3]-'0'))
			i += 3
			continue
		}
		out = append(out, s[i])
	}
	return string(out)
}
