package collect

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"peerdns/agent/store"
	"peerdns/agent/store/storetest"
	"peerdns/internal/testutil"
)

var epoch = time.Unix(1_700_000_000, 0)

// run collects with cs at seconds 0..n-1 after epoch, exactly one second apart.
func run(t testing.TB, db *store.DB, n int, cs ...collector) *Manager {
	t.Helper()
	m := newManager(db, nil, cs...)
	t.Cleanup(m.close)
	for i := 0; i < n; i++ {
		now := epoch.Add(time.Duration(i) * time.Second)
		m.Collect(now.Unix(), now)
	}
	return m
}

// points returns the stored values of a chart as [second][dim].
func points(t *testing.T, db *store.DB, id string) [][]float64 {
	t.Helper()
	w, err := db.Query(id, 0, 0, math.MaxInt32)
	if err != nil {
		t.Fatalf("Query(%q): %v", id, err)
	}
	var out [][]float64
	for i := range w.Slots[0] {
		row := make([]float64, len(w.Slots))
		for d := range w.Slots {
			if w.Slots[d][i].Count == 0 {
				row[d] = math.NaN()
			} else {
				row[d] = w.Slots[d][i].Sum
			}
		}
		out = append(out, row)
	}
	return out
}

func near(a, b float64) bool {
	if math.IsNaN(a) || math.IsNaN(b) {
		return math.IsNaN(a) && math.IsNaN(b)
	}
	return math.Abs(a-b) <= 1e-3*math.Max(1, math.Abs(b))
}

func checkPoints(t *testing.T, db *store.DB, id string, want [][]float64) {
	t.Helper()
	got := points(t, db, id)
	if len(got) != len(want) {
		t.Fatalf("%s: %d points %v, want %d %v", id, len(got), got, len(want), want)
	}
	for i := range want {
		for d := range want[i] {
			if !near(got[i][d], want[i][d]) {
				t.Errorf("%s point %d dim %d = %v, want %v", id, i, d, got[i][d], want[i][d])
			}
		}
	}
}

func checkDef(t *testing.T, db *store.DB, id, context, family, units, chartType string, prio int, dims ...string) {
	t.Helper()
	c, ok := db.Chart(id)
	if !ok {
		t.Fatalf("chart %q not registered", id)
	}
	if c.Context != context || c.Family != family || c.Units != units || c.ChartType != chartType || c.Priority != prio {
		t.Errorf("%s = context %q family %q units %q type %q prio %d, want %q %q %q %q %d",
			id, c.Context, c.Family, c.Units, c.ChartType, c.Priority, context, family, units, chartType, prio)
	}
	var got []string
	for _, d := range c.Dims {
		got = append(got, d.ID)
	}
	if strings.Join(got, ",") != strings.Join(dims, ",") {
		t.Errorf("%s dims = %v, want %v", id, got, dims)
	}
}

func TestChartConvert(t *testing.T) {
	c := newChart(&store.ChartDef{ID: "x", Dims: []store.DimDef{
		dim("a", "", algIncremental, 8, 1000), dim("b", "", algIncremental, -1, 1), dim("c", "", algAbsolute, 1, 1024),
	}})
	steps := []struct {
		at   time.Duration
		raw  []float64
		want []float64 // nil: no point
	}{
		{0, []float64{1000, 10, 2048}, nil},
		{time.Second, []float64{2000, 20, 1024}, []float64{8, -10, 1}},
		{3 * time.Second, []float64{4000, 5, 512}, []float64{8, math.NaN(), 0.5}}, // b reset
		{4 * time.Second, []float64{4000, 6, 0}, []float64{0, -1, 0}},
	}
	for i, s := range steps {
		out, ok := c.convert(epoch.Add(s.at), s.raw)
		if ok != (s.want != nil) {
			t.Fatalf("step %d: ok = %v", i, ok)
		}
		for d := range s.want {
			if !near(out[d], s.want[d]) {
				t.Errorf("step %d dim %d = %v, want %v", i, d, out[d], s.want[d])
			}
		}
	}
}

func TestCPU(t *testing.T) {
	// cpu0: +30 user of which +10 guest, +10 system, +50 idle, +10 iowait → 100
	// cpu1: +25 user, +25 steal, +50 idle → 100
	texts := []string{
		"cpu  110 5 60 900 10 0 0 0 20 0\ncpu0 100 5 50 800 10 0 0 0 20 0\ncpu1 10 0 10 100 0 0 0 0 0 0\n",
		"cpu  165 5 70 1000 20 0 0 25 30 0\ncpu0 130 5 60 850 20 0 0 0 30 0\ncpu1 35 0 10 150 0 0 0 25 0 0\n",
	}
	c := newStat("")
	i := 0
	c.read = func() ([]byte, error) { b := texts[i]; i++; return []byte(b), nil }
	db := storetest.New(t, store.Config{})
	run(t, db, 2, c)
	dims := strings.Split("guest_nice,guest,steal,softirq,irq,user,system,nice,iowait,idle", ",")
	checkDef(t, db, "system.cpu", "system.cpu", "cpu", "percentage", "stacked", 100, dims...)
	checkDef(t, db, "cpu.cpu1", "cpu.cpu", "utilization", "percentage", "stacked", 1002, dims...)
	//                                  guest_nice guest steal softirq irq user system nice iowait idle
	checkPoints(t, db, "cpu.cpu0", [][]float64{{0, 10, 0, 0, 0, 20, 10, 0, 10, 50}})
	checkPoints(t, db, "cpu.cpu1", [][]float64{{0, 0, 25, 0, 0, 25, 0, 0, 0, 50}})
	checkPoints(t, db, "system.cpu", [][]float64{{0, 5, 12.5, 0, 0, 22.5, 5, 0, 5, 50}})
	if def, _ := db.Chart("system.cpu"); !def.Dims[9].Hidden || def.Dims[0].Hidden {
		t.Error("idle should be the only hidden dimension")
	}
}

// TestCPUIowaitBackwards: the kernel's iowait may go backwards (an idle
// CPU's iowait is estimated, see Documentation/filesystems/proc.rst);
// that dimension gives 0 for the second, as in Netdata, and the rest of
// the row is still charted.
func TestCPUIowaitBackwards(t *testing.T) {
	c := newStat("")
	c.read = fileSeq(
		"cpu  100 0 50 800 10 0 0 0 0 0\ncpu0 100 0 50 800 10 0 0 0 0 0\n",
		"cpu  130 0 60 860 9 0 0 0 0 0\ncpu0 130 0 60 860 9 0 0 0 0 0\n",
		"cpu  150 0 70 930 9 0 0 0 0 0\ncpu0 150 0 70 930 9 0 0 0 0 0\n",
	)
	db := storetest.New(t, store.Config{})
	run(t, db, 3, c)
	//                     guest_nice guest steal softirq irq user system nice iowait idle
	want := [][]float64{{0, 0, 0, 0, 0, 30, 10, 0, 0, 60}, {0, 0, 0, 0, 0, 20, 10, 0, 0, 70}}
	checkPoints(t, db, "system.cpu", want)
	checkPoints(t, db, "cpu.cpu0", want)
}

func TestCPUOfflineAndBack(t *testing.T) {
	both := "cpu  2 0 0 2 0 0 0 0 0 0\ncpu0 1 0 0 1 0 0 0 0 0 0\ncpu1 1 0 0 1 0 0 0 0 0 0\nctxt 1\n"
	one := "cpu  2 0 0 2 0 0 0 0 0 0\ncpu0 1 0 0 1 0 0 0 0 0 0\nctxt 1\n"
	texts := []string{both, both, one, both, both}
	c := newStat("")
	i := 0
	c.read = func() ([]byte, error) { b := texts[i]; i++; return []byte(b), nil }
	db := storetest.New(t, store.Config{})
	m := run(t, db, 3, c)
	if _, ok := db.Chart("cpu.cpu1"); ok {
		t.Fatal("cpu.cpu1 still listed after the CPU went offline")
	}
	for s := 3; s < 5; s++ {
		now := epoch.Add(time.Duration(s) * time.Second)
		m.Collect(now.Unix(), now)
	}
	checkPoints(t, db, "cpu.cpu1", [][]float64{{0, 0, 0, 0, 0, 0, 0, 0, 0, 0}})
}

const procStat1 = `cpu  24235 0 6760 131969 232 0 165 83 0 0
cpu0 12000 0 3000 60000 100 0 80 40 0 0
intr 1000 0 0 0 0
ctxt 5000
btime 1763776000
processes 300
procs_running 2
procs_blocked 1
softirq 10 1 2 3
`

func TestStat(t *testing.T) {
	texts := []string{procStat1,
		strings.NewReplacer("intr 1000", "intr 1600", "ctxt 5000", "ctxt 5250", "processes 300", "processes 303", "procs_running 2", "procs_running 4").Replace(procStat1),
	}
	c := newStat("")
	i := 0
	c.read = func() ([]byte, error) { b := texts[i]; i++; return []byte(b), nil }
	db := storetest.New(t, store.Config{})
	run(t, db, 2, c)
	checkDef(t, db, "system.processes", "system.processes", "processes", "processes", "line", 600, "running", "blocked")
	checkDef(t, db, "system.forks", "system.forks", "processes", "processes/s", "line", 700, "started")
	checkDef(t, db, "system.ctxt", "system.ctxt", "processes", "context switches/s", "line", 800, "switches")
	checkDef(t, db, "system.intr", "system.intr", "interrupts", "interrupts/s", "line", 900, "interrupts")
	checkPoints(t, db, "system.processes", [][]float64{{2, 1}, {4, 1}})
	checkPoints(t, db, "system.forks", [][]float64{{3}}) // first sample of a counter: no point
	checkPoints(t, db, "system.ctxt", [][]float64{{250}})
	checkPoints(t, db, "system.intr", [][]float64{{600}})

	var s statCounters
	if err := parseStat(&s, []byte("ctxt notanumber\n")); err == nil {
		t.Error("parseStat(bad number) = nil error")
	}
	if err := parseStat(&s, []byte("cpu 1 2 3\n")); err == nil {
		t.Error("parseStat(short cpu line, no counters) = nil error")
	}
}

func TestLoadUptimeEntropy(t *testing.T) {
	l := newLoad("")
	l.read = fileSeq("0.50 1.25 2.00 3/245 12345\n")
	u := newUptime("")
	u.read = fileSeq("101.25 200.00\n", "102.50 201.00\n")
	e := newEntropy("")
	e.read = func() ([]byte, error) { return []byte("256\n"), nil }
	db := storetest.New(t, store.Config{})
	run(t, db, 2, l, u, e)
	checkDef(t, db, "system.load", "system.load", "load", "load", "line", 100, "load1", "load5", "load15")
	checkPoints(t, db, "system.load", [][]float64{{0.5, 1.25, 2}, {0.5, 1.25, 2}})
	checkPoints(t, db, "system.active_processes", [][]float64{{245}, {245}})
	checkPoints(t, db, "system.uptime", [][]float64{{101.25}, {102.5}})
	for _, bad := range []string{"", "0.5 1 2", "a b c 1/2", "1 2 3 4"} {
		if _, _, _, _, err := parseLoadavg([]byte(bad)); err == nil {
			t.Errorf("parseLoadavg(%q) = nil error", bad)
		}
	}
	checkDef(t, db, "system.entropy", "system.entropy", "entropy", "entropy", "line", 1000, "entropy")
	checkPoints(t, db, "system.entropy", [][]float64{{256}, {256}})
}

// diskstats lines: 14 columns (kernel 4.x), 18 (4.18+ discards) and 20 (5.5+ flushes)
const diskstats1 = `   8       0 sdb 0 0 0 0 1 0 2 0 0 0 0
 254       0 vda 100 7 20480 300 50 4 8192 100 2 5000 9000 10 1 80 20 4 8
 254       1 vda1 1 0 2048 0 0 0 0 0 0 0 0 0 0 0 0
   7       0 loop0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0
   7       1 loop1 1 0 2 0 0 0 0 0 0 0 0 0 0 0 0 0 0
 253       0 dm-0 bogus line
`

func TestDisk(t *testing.T) {
	// vda: +10 reads of 4 KiB in 40 ms, +3 writes of 8 KiB in 30 ms, 250 ms busy,
	// +2 discards (+8 sectors) in 10 ms, +2 flushes in 6 ms; sdb: +1 read
	diskstats2 := strings.NewReplacer(
		"vda 100 7 20480 300 50 4 8192 100 2 5000 9000 10 1 80 20 4 8", "vda 110 9 20560 340 53 4 8240 130 1 5250 9400 12 1 88 30 6 14",
		"sdb 0 0 0 0 1 0 2 0", "sdb 1 0 2 0 1 0 2 0",
	).Replace(diskstats1)
	root := t.TempDir()
	for _, d := range []string{"sys/block/vda", "sys/block/sdb", "sys/block/loop0", "sys/block/loop1",
		"sys/devices/virtual/block/loop0", "sys/devices/virtual/block/loop1", "proc/self"} {
		if err := os.MkdirAll(root+"/"+d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(root+"/proc/self/mounts", []byte("/dev/vda / ext4 rw 0 0\ntmpfs /dev/shm tmpfs rw 0 0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	c := newDisk(root)
	c.read = fileSeq(diskstats1, diskstats2)
	db := storetest.New(t, store.Config{})
	run(t, db, 2, c)
	checkDef(t, db, "disk.vda", "disk.io", "/", "KiB/s", "area", 2000, "reads", "writes")
	checkDef(t, db, "disk_ops.sdb", "disk.ops", "sdb", "operations/s", "line", 2010, "reads", "writes")
	checkDef(t, db, "system.io", "system.io", "disk", "KiB/s", "area", 150, "in", "out")
	checkPoints(t, db, "disk.vda", [][]float64{{40, -24}})
	checkPoints(t, db, "disk_ops.vda", [][]float64{{10, -3}})
	checkPoints(t, db, "disk_mops.vda", [][]float64{{2, 0}})
	checkPoints(t, db, "disk_qops.vda", [][]float64{{2}, {1}})
	checkPoints(t, db, "disk_backlog.vda", [][]float64{{40}})
	checkPoints(t, db, "disk_busy.vda", [][]float64{{250}})
	checkDef(t, db, "disk_util.vda", "disk.util", "/", "% of time working", "area", 2040, "utilization")
	checkPoints(t, db, "disk_util.vda", [][]float64{{25}}) // 250 ms busy in 1 s
	checkPoints(t, db, "disk_await.vda", [][]float64{{4, -10}})
	checkPoints(t, db, "disk_avgsz.vda", [][]float64{{4, -8}})
	checkPoints(t, db, "disk_svctm.vda", [][]float64{{250.0 / 13}})
	checkPoints(t, db, "disk_iotime.vda", [][]float64{{40, -30}})
	checkPoints(t, db, "disk_ext.vda", [][]float64{{4}})
	checkPoints(t, db, "disk_ext_ops.vda", [][]float64{{2, -2}})
	checkPoints(t, db, "disk_ext_await.vda", [][]float64{{5, -3}})
	checkPoints(t, db, "disk_ext_avgsz.vda", [][]float64{{2}})
	checkPoints(t, db, "disk.sdb", [][]float64{{1, 0}})
	if _, ok := db.Chart("disk_ext.sdb"); ok {
		t.Error("disk_ext.sdb on a kernel line without discard columns")
	}
	checkPoints(t, db, "disk.loop1", [][]float64{{0, 0}})
	checkPoints(t, db, "system.io", [][]float64{{41, -24}})
	for _, id := range []string{"disk.vda1", "disk.loop0", "disk.dm-0"} {
		if _, ok := db.Chart(id); ok {
			t.Errorf("%s got a chart", id)
		}
	}
}

func TestDiskGoneAndBack(t *testing.T) {
	root := "testdata/linux-6.18"
	full, err := os.ReadFile(root + "/proc/diskstats")
	if err != nil {
		t.Fatal(err)
	}
	var without []byte
	for _, l := range strings.SplitAfter(string(full), "\n") {
		if !strings.Contains(l, " vda ") {
			without = append(without, l...)
		}
	}
	c := newDisk(root)
	c.read = fileSeq(string(full), string(full), string(without), string(full), string(full))
	db := storetest.New(t, store.Config{})
	m := run(t, db, 3, c)
	if _, ok := db.Chart("disk.vda"); ok {
		t.Fatal("disk.vda listed after the disk went away")
	}
	for s := 3; s < 5; s++ {
		now := epoch.Add(time.Duration(s) * time.Second)
		m.Collect(now.Unix(), now)
	}
	checkPoints(t, db, "disk.vda", [][]float64{{0, 0}})
	checkDef(t, db, "disk.vda", "disk.io", "/", "KiB/s", "area", 2000, "reads", "writes")
}

func FuzzParseDiskstats(f *testing.F) {
	f.Add([]byte(diskstats1))
	f.Add([]byte("1 2 x 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		_, _, _ = parseDiskstats(nil, nil, b)
	})
}

func TestDiskSpace(t *testing.T) {
	const gib = 1 << 30
	c := newDiskSpace("")
	c.readMounts = func() ([]mountEntry, error) {
		return []mountEntry{
			{Mountpoint: "/", Fstype: "ext4"}, {Mountpoint: "/dev/shm", Fstype: "tmpfs"},
			{Mountpoint: "/proc", Fstype: "proc"}, {Mountpoint: "/sys/fs/cgroup", Fstype: "cgroup2"},
			{Mountpoint: "/run/user/1000/gvfs", Fstype: "fuse.gvfsd-fuse"}, {Mountpoint: "/cg", Fstype: "cgroup2"},
			{Mountpoint: "/", Fstype: "ext4"}, // bind mounts list a path twice
		}, nil
	}
	asked := map[string]int{}
	c.usage = func(p string, u *spaceUsage) error {
		asked[p]++
		switch p {
		case "/":
			*u = spaceUsage{Total: 100 * gib, Free: 60 * gib, Used: 35 * gib, InodesTotal: 1000, InodesFree: 900, InodesUsed: 100}
			return nil
		case "/dev/shm":
			*u = spaceUsage{Total: 2 * gib, Free: 2 * gib}
			return nil
		case "/cg":
			*u = spaceUsage{}
			return nil
		}
		return errors.New("permission denied")
	}
	db := storetest.New(t, store.Config{})
	run(t, db, 2, c)
	checkDef(t, db, "disk_space._", "disk.space", "/", "GiB", "stacked", 2023, "avail", "used", "reserved_for_root")
	checkPoints(t, db, "disk_space._", [][]float64{{60, 35, 5}, {60, 35, 5}})
	checkPoints(t, db, "disk_space._dev_shm", [][]float64{{2, 0, 0}, {2, 0, 0}})
	checkDef(t, db, "disk_inodes._", "disk.inodes", "/", "inodes", "stacked", 2024, "avail", "used", "reserved_for_root")
	checkPoints(t, db, "disk_inodes._", [][]float64{{900, 100, 0}, {900, 100, 0}})
	if _, ok := db.Chart("disk_inodes._dev_shm"); ok {
		t.Error("disk_inodes for a filesystem without inodes")
	}
	for _, id := range []string{"disk_space._proc", "disk_space._sys_fs_cgroup", "disk_space._cg", "disk_space._run_user_1000_gvfs"} {
		if _, ok := db.Chart(id); ok {
			t.Errorf("%s registered", id)
		}
	}
	// /proc is asked once (no blocks, then skipped until the next rescan);
	// /run/user/... and /sys/... never.
	if asked["/"] != 2 || asked["/cg"] != 1 || asked["/sys/fs/cgroup"] != 0 || asked["/run/user/1000/gvfs"] != 0 {
		t.Errorf("statfs calls = %v", asked)
	}
	if def, _ := db.Chart("disk_space._"); def.Dims[2].Name != "reserved for root" || def.Plugin != "diskspace.plugin" {
		t.Errorf("disk_space._ def = %+v", def)
	}
}

func TestStatfsUsage(t *testing.T) {
	tests := []struct {
		name string
		st   syscall.Statfs_t
		want spaceUsage
	}{
		{"ext4", syscall.Statfs_t{Bsize: 4096, Blocks: 100, Bfree: 30, Bavail: 25, Files: 50, Ffree: 20},
			spaceUsage{Total: 409600, Free: 102400, Used: 286720, InodesTotal: 50, InodesFree: 20, InodesUsed: 30}},
		// some FUSE and network filesystems say more is free than they have
		{"more free than total", syscall.Statfs_t{Bsize: 512, Blocks: 10, Bfree: 20, Bavail: 20, Files: 5, Ffree: 1 << 40},
			spaceUsage{Total: 5120, Free: 10240, Used: 0, InodesTotal: 5, InodesFree: 1 << 40, InodesUsed: 0}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var u spaceUsage
			statfsUsage(&tt.st, &u)
			if u != tt.want {
				t.Errorf("statfsUsage(%+v) = %+v, want %+v", tt.st, u, tt.want)
			}
		})
	}
}

// TestDiskSpaceUnmounted: a filesystem unmounted between two reads of the
// mount table leaves its mount point a folder of the filesystem below, and
// statfs of it answers for that one: the mount gets no points until the
// table is read again, and one mounted there again is charted from then.
func TestDiskSpaceUnmounted(t *testing.T) {
	const gib = 1 << 30
	c := newDiskSpace("")
	c.readMounts = func() ([]mountEntry, error) {
		return []mountEntry{{Mountpoint: "/", Fstype: "ext4"}, {Mountpoint: "/mnt/data", Fstype: "xfs"}}, nil
	}
	root := spaceUsage{Total: 100 * gib, Free: 60 * gib, Used: 40 * gib, FSID: 1}
	data := spaceUsage{Total: 10 * gib, Free: 2 * gib, Used: 8 * gib, FSID: 2}
	c.usage = func(p string, u *spaceUsage) error {
		*u = root
		if p == "/mnt/data" {
			*u = data
		}
		return nil
	}
	db := storetest.New(t, store.Config{})
	m := run(t, db, 2, c)
	data = root // unmounted: the path is a folder of /
	for s := 2; s < 4; s++ {
		collectAt(m, s)
	}
	checkPoints(t, db, "disk_space._mnt_data", [][]float64{{2, 8, 0}, {2, 8, 0}})
	checkPoints(t, db, "disk_space._", [][]float64{{60, 40, 0}, {60, 40, 0}, {60, 40, 0}, {60, 40, 0}})
	// mounted again by the next read of the mount table
	data = spaceUsage{Total: 20 * gib, Free: 5 * gib, Used: 15 * gib, FSID: 3}
	now := epoch.Add(rescanEvery)
	m.Collect(now.Unix(), now)
	if at, vals, ok := db.Latest("disk_space._mnt_data"); !ok || at != now.Unix() || !near(vals[0], 5) || !near(vals[1], 15) {
		t.Errorf("disk_space._mnt_data latest = %v at %d (%v), want [5 15 0] at %d", vals, at, ok, now.Unix())
	}
}

// TestDiskSpaceHungMount: statfs on a hung network filesystem does not
// return; it stops the disk space charts until it does, never the
// collection round, so every other chart goes on.
func TestDiskSpaceHungMount(t *testing.T) {
	c := newDiskSpace("")
	c.readMounts = func() ([]mountEntry, error) {
		return []mountEntry{{Mountpoint: "/", Fstype: "ext4"}, {Mountpoint: "/nfs", Fstype: "nfs4"}}, nil
	}
	release := make(chan struct{})
	c.usage = func(p string, u *spaceUsage) error {
		if p == "/nfs" {
			<-release
		}
		*u = spaceUsage{Total: 100 << 30, Free: 60 << 30, Used: 40 << 30}
		return nil
	}
	db := storetest.New(t, store.Config{})
	m := newManager(db, nil, c, newLoad("testdata/linux-6.18"))
	t.Cleanup(m.close)
	t.Cleanup(func() {
		select {
		case <-release:
		default:
			close(release)
		}
	})
	for s := 0; s < 3; s++ {
		done := make(chan struct{})
		go func() { collectAt(m, s); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Fatalf("round %d has not returned after 10 s: a hung statfs stops every collector", s)
		}
	}
	if got := len(points(t, db, "system.load")); got != 3 {
		t.Fatalf("system.load has %d points, want 3", got)
	}
	// The filesystem answers again: its charts come back.
	close(release)
	deadline := time.Now().Add(10 * time.Second)
	for s := 3; ; s++ {
		collectAt(m, s)
		if _, ok := db.Chart("disk_space._nfs"); ok {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("disk_space._nfs never appeared after the mount answered")
		}
	}
}

const netDev = `Inter-|   Receive                                                |  Transmit
 face |bytes    packets errs drop fifo frame compressed multicast|bytes    packets errs drop fifo colls carrier compressed
    lo:  %d     445    0    0    0     0          0         0   347606     445    0    0    0     0       0          0
  ifb0:       0       0    0    0    0     0          0         0        0       0    0    0    0     0       0          0
  eth0: %d    %d    0    0    0     0          0         %d   %d    %d    0    0    0     0       0          0
 veth1: %d    10    0    0    0     0          0         0   0    0    0    0    0     0       0          0
`

func TestNet(t *testing.T) {
	texts := []string{
		fmt.Sprintf(netDev, 1000, 10000, 100, 5, 2000, 50, 500),
		fmt.Sprintf(netDev, 9000, 12000, 110, 6, 2500, 60, 1500),
	}
	c := newNet("testdata/linux-6.18") // for /sys/class/net
	i := 0
	c.read = func() ([]byte, error) { b := texts[i]; i++; return []byte(b), nil }
	c.isVirtual = func(iface string) bool { return iface != "eth0" }
	db := storetest.New(t, store.Config{})
	run(t, db, 2, c)
	checkDef(t, db, "net.eth0", "net.net", "eth0", "kilobits/s", "area", 7000, "received", "sent")
	checkDef(t, db, "net_packets.eth0", "net.packets", "eth0", "packets/s", "line", 7001, "received", "sent", "multicast")
	checkDef(t, db, "system.net", "system.net", "network", "kilobits/s", "area", 500, "InOctets", "OutOctets")
	checkPoints(t, db, "net.eth0", [][]float64{{16, -4}}) // 2000 B/s = 16 kbit/s in, 500 B/s out
	checkPoints(t, db, "net_packets.eth0", [][]float64{{10, -10, 1}})
	checkPoints(t, db, "net.veth1", [][]float64{{8, 0}})
	checkPoints(t, db, "system.net", [][]float64{{16, -4}}) // physical only
	if _, ok := db.Chart("net.lo"); ok {
		t.Error("net.lo registered")
	}
	checkPoints(t, db, "net.ifb0", [][]float64{{0, 0}})
	checkPoints(t, db, "net_operstate.eth0", [][]float64{{1, 0, 0, 0, 0, 0, 0}, {1, 0, 0, 0, 0, 0, 0}})
	checkPoints(t, db, "net_operstate.ifb0", [][]float64{{0, 1, 0, 0, 0, 0, 0}, {0, 1, 0, 0, 0, 0, 0}})
	checkPoints(t, db, "net_duplex.eth0", [][]float64{{0, 0, 1}, {0, 0, 1}})
	checkPoints(t, db, "net_speed.eth0", [][]float64{{0}, {0}}) // -1: unknown
	checkPoints(t, db, "net_mtu.eth0", [][]float64{{1400}, {1400}})
	checkPoints(t, db, "net_carrier.eth0", [][]float64{{1, 0}, {1, 0}})
	for _, id := range []string{"net_carrier.ifb0", "net_speed.ifb0"} { // no such file while down
		if _, ok := db.Chart(id); ok {
			t.Errorf("%s registered", id)
		}
	}
	if _, err := parseNetDev(nil, []byte("eth0: 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15\n")); err == nil {
		t.Error("parseNetDev(short line) = nil error")
	}
}

func TestNetInterfaceGoneAndBack(t *testing.T) {
	with := fmt.Sprintf(netDev, 1, 1000, 10, 0, 500, 5, 0)
	without := strings.Replace(with, " veth1:", " vethX:", 1)
	c := newNet("testdata/linux-6.18")
	c.read = fileSeq(with, with, without, with, with)
	c.isVirtual = func(iface string) bool { return iface != "eth0" }
	db := storetest.New(t, store.Config{})
	m := run(t, db, 3, c)
	if _, ok := db.Chart("net.veth1"); ok {
		t.Fatal("net.veth1 listed after the interface went away")
	}
	for s := 3; s < 5; s++ {
		now := epoch.Add(time.Duration(s) * time.Second)
		m.Collect(now.Unix(), now)
	}
	checkPoints(t, db, "net.veth1", [][]float64{{0, 0}})
}

// TestNetSysfsFileReturns: speed and carrier that fail to read (drivers
// refuse them while the link is down) are charted once they read again,
// within rescanEvery.
func TestNetSysfsFileReturns(t *testing.T) {
	root := t.TempDir()
	dir := root + "/sys/class/net/eth0"
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	write(t, dir+"/operstate", "down\n")
	write(t, dir+"/mtu", "1500\n")
	if err := os.Mkdir(dir+"/speed", 0o755); err != nil { // a read fails (EISDIR), like EINVAL
		t.Fatal(err)
	}
	c := newNet(root)
	c.read = fileSeq("h1\nh2\n  eth0: 1 1 0 0 0 0 0 0 1 1 0 0 0 0 0 0\n")
	c.isVirtual = func(string) bool { return false }
	db := storetest.New(t, store.Config{})
	m := run(t, db, 3, c)
	for _, id := range []string{"net_carrier.eth0", "net_speed.eth0"} {
		if _, ok := db.Chart(id); ok {
			t.Fatalf("%s registered while its file fails", id)
		}
	}
	// the link comes up
	if err := os.Remove(dir + "/speed"); err != nil {
		t.Fatal(err)
	}
	write(t, dir+"/speed", "1000\n")
	write(t, dir+"/carrier", "1\n")
	write(t, dir+"/operstate", "up\n")
	last := 3 + int(rescanEvery/time.Second)
	for s := 3; s <= last; s++ {
		collectAt(m, s)
	}
	for id, want := range map[string][]float64{"net_speed.eth0": {1e6}, "net_carrier.eth0": {1, 0}, "net_operstate.eth0": {1, 0, 0, 0, 0, 0, 0}} {
		got := points(t, db, id)
		if len(got) == 0 {
			t.Errorf("%s: no points after its file reads again", id)
			continue
		}
		for d, v := range want {
			if !near(got[len(got)-1][d], v) {
				t.Errorf("%s last point = %v, want %v", id, got[len(got)-1], want)
				break
			}
		}
	}
}

func TestNetCap(t *testing.T) {
	var b strings.Builder
	b.WriteString("h1\nh2\n")
	for i := 0; i < 10000; i++ {
		fmt.Fprintf(&b, "veth%d: 1 1 0 0 0 0 0 0 1 1 0 0 0 0 0 0\n", i)
	}
	var logs testutil.LogBuffer
	c := newNet(t.TempDir())
	c.read = fileSeq(b.String())
	c.isVirtual = func(string) bool { return true }
	db := storetest.New(t, store.Config{})
	m := newManager(db, slog.New(slog.NewTextHandler(&logs, nil)), c)
	m.Collect(epoch.Unix(), epoch)
	if len(c.charts) != maxInstances {
		t.Errorf("%d interfaces charted, want the cap %d", len(c.charts), maxInstances)
	}
	if n := strings.Count(logs.String(), "too many instances"); n != 1 {
		t.Errorf("%d cap log lines, want 1:\n%s", n, logs.String())
	}
}

func TestFailingCollectorLogsOnceAndOthersGoOn(t *testing.T) {
	var logs testutil.LogBuffer
	log := slog.New(slog.NewTextHandler(&logs, nil))
	l := newLoad("")
	fail := true
	calls := 0
	l.read = func() ([]byte, error) {
		calls++
		if fail {
			return nil, errors.New("no loadavg")
		}
		return []byte("1.00 0.00 0.00 1/10 5\n"), nil
	}
	e := newEntropy("")
	e.read = func() ([]byte, error) { return []byte("100"), nil }
	db := storetest.New(t, store.Config{})
	m := newManager(db, log, l, e)
	for i := 0; i < 3; i++ {
		now := epoch.Add(time.Duration(i) * time.Second)
		m.Collect(now.Unix(), now)
	}
	if n := strings.Count(logs.String(), "collector failed"); n != 1 || calls != 3 {
		t.Errorf("%d failure logs after %d failing calls, want 1 log and 3 calls:\n%s", n, calls, logs.String())
	}
	if _, _, failing := m.Stats(); len(failing) != 1 || failing[0] != "load" {
		t.Errorf("failing = %v", failing)
	}
	checkPoints(t, db, "system.entropy", [][]float64{{100}, {100}, {100}})
	fail = false
	now := epoch.Add(3 * time.Second)
	m.Collect(now.Unix(), now)
	if !strings.Contains(logs.String(), "collector recovered") {
		t.Errorf("no recovery log:\n%s", logs.String())
	}
	checkPoints(t, db, "system.load", [][]float64{{1, 0, 0}})
}

// TestRealHost runs the real Manager against this machine's /proc and
// /sys until the main charts have points.
func TestRealHost(t *testing.T) {
	db := storetest.New(t, store.Config{})
	var logs testutil.LogBuffer
	m := New(db, slog.New(slog.NewTextHandler(&logs, nil)), Options{})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { m.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })

	want := []string{"system.cpu", "cpu.cpu0", "system.load", "system.ram", "mem.available", "system.io",
		"system.processes", "system.forks", "system.ctxt", "system.intr", "system.uptime", "system.entropy",
		"disk_space._"}
	if hostHasTraffic(t) {
		want = append(want, "system.net")
	}
	testutil.Eventually(t, 15*time.Second, func() error {
		var missing []string
		for _, id := range want {
			if w, err := db.Query(id, 0, 0, math.MaxInt32); err != nil || len(w.Slots[0]) < 2 {
				missing = append(missing, id)
			}
		}
		if len(missing) > 0 {
			return fmt.Errorf("fewer than 2 points for %v; logs:\n%s", missing, logs.String())
		}
		return nil
	})
	_, vals, ok := db.Latest("system.cpu")
	if !ok {
		t.Fatal("system.cpu has no latest point")
	}
	sum := 0.0
	for _, v := range vals {
		sum += v
	}
	if math.Abs(sum-100) > 0.5 {
		t.Errorf("system.cpu dims sum to %v, want 100", sum)
	}
	if _, vals, ok := db.Latest("system.ram"); !ok || vals[0]+vals[1]+vals[2]+vals[3] <= 0 {
		t.Errorf("system.ram = %v (ok %v)", vals, ok)
	}
	ticks, mean, failing := m.Stats()
	if ticks < 2 || len(failing) > 0 {
		t.Errorf("%d ticks, failing %v; logs:\n%s", ticks, failing, logs.String())
	}
	t.Logf("%d ticks, mean %v per tick, failing %v, %d charts", ticks, mean, failing, len(db.Charts()))
}

// hostHasTraffic reports whether an interface other than lo has moved
// bytes, so system.net must exist.
func hostHasTraffic(t *testing.T) bool {
	r := newProcReader("/proc/net/dev")
	defer r.close()
	b, err := r.read()
	if err != nil {
		return false
	}
	ifs, err := parseNetDev(nil, b)
	if err != nil {
		t.Fatalf("this host's /proc/net/dev: %v", err)
	}
	for _, i := range ifs {
		if i.name != "lo" && i.v[0]+i.v[8] > 0 {
			return true
		}
	}
	return false
}

func FuzzParseStat(f *testing.F) {
	f.Add([]byte(procStat1))
	f.Add([]byte("intr\nctxt 1 2\n"))
	f.Add([]byte("processes -1\n"))
	var s statCounters
	f.Fuzz(func(t *testing.T, b []byte) {
		_ = parseStat(&s, b)
	})
}

func FuzzParseNetDev(f *testing.F) {
	f.Add([]byte(fmt.Sprintf(netDev, 1, 2, 3, 4, 5, 6, 7)))
	f.Add([]byte("x:1 2 3 4 5 6 7 8 9 10\n"))
	f.Add([]byte(":\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		ifs, err := parseNetDev(nil, b)
		if err == nil && len(ifs) == 0 {
			t.Fatal("no interfaces and no error")
		}
	})
}

// TestDiskSystemIOPhysical: system.io sums the physical disks only, as
// Netdata's does: on LVM (or dm-crypt, md) every read of dm-0 is a read
// of sda too, and counting both showed twice the I/O. A host with no
// physical disk sums the others.
func TestDiskSystemIOPhysical(t *testing.T) {
	root := t.TempDir()
	for _, d := range []string{"sys/block/sda", "sys/block/dm-0", "sys/devices/virtual/block/dm-0", "proc/self"} {
		if err := os.MkdirAll(root+"/"+d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	write(t, root+"/proc/self/mounts", "/dev/mapper/vg-root / ext4 rw 0 0\n")
	// dm-0 sits on sda: +100 sectors read and +20 written on both
	c := newDisk(root)
	c.read = fileSeq(
		"   8 0 sda 10 0 1000 0 10 0 200 0 0 0 0\n 253 0 dm-0 10 0 1000 0 10 0 200 0 0 0 0\n",
		"   8 0 sda 20 0 1100 0 20 0 220 0 0 0 0\n 253 0 dm-0 20 0 1100 0 20 0 220 0 0 0 0\n",
	)
	db := storetest.New(t, store.Config{})
	run(t, db, 2, c)
	checkPoints(t, db, "disk.dm-0", [][]float64{{50, -10}})
	checkPoints(t, db, "system.io", [][]float64{{50, -10}})

	root2 := t.TempDir()
	for _, d := range []string{"sys/block/md0", "sys/devices/virtual/block/md0", "proc/self"} {
		if err := os.MkdirAll(root2+"/"+d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	write(t, root2+"/proc/self/mounts", "")
	c = newDisk(root2)
	c.read = fileSeq("   9 0 md0 10 0 1000 0 10 0 200 0 0 0 0\n", "   9 0 md0 20 0 1100 0 20 0 220 0 0 0 0\n")
	db = storetest.New(t, store.Config{})
	run(t, db, 2, c)
	checkPoints(t, db, "system.io", [][]float64{{50, -10}})
}

// TestNetSystemPhysicalReset: when the physical interface's counters go
// back (the NIC was reset or re-created), system.net has a gap for that
// second; it does not show the virtual interfaces' sum instead (a bridge
// over eth0 carries the same bytes, veths a container's).
func TestNetSystemPhysicalReset(t *testing.T) {
	c := newNet("testdata/linux-6.18")
	c.read = fileSeq(
		fmt.Sprintf(netDev, 1, 10000, 100, 0, 2000, 50, 50000),
		fmt.Sprintf(netDev, 1, 12000, 110, 0, 2500, 60, 60000),
		fmt.Sprintf(netDev, 1, 100, 1, 0, 100, 1, 70000), // eth0 reset
		fmt.Sprintf(netDev, 1, 2100, 11, 0, 600, 11, 80000),
	)
	c.isVirtual = func(iface string) bool { return iface != "eth0" }
	db := storetest.New(t, store.Config{})
	run(t, db, 4, c)
	checkPoints(t, db, "net.veth1", [][]float64{{80, 0}, {80, 0}, {80, 0}})
	checkPoints(t, db, "system.net", [][]float64{{16, -4}, {nan, nan}, {16, -4}})
}

// TestDiskFamilyByDevNum: a dm device is mounted as /dev/mapper/<name>,
// never /dev/dm-0, so its family comes from the mount whose major:minor
// in /proc/self/mountinfo is the disk's, as in Netdata; a disk mounted by
// its own name still gets its mount point, and one not mounted its name.
func TestDiskFamilyByDevNum(t *testing.T) {
	root := t.TempDir()
	for _, d := range []string{"sys/block/sda", "sys/block/sdb", "sys/block/dm-0", "sys/devices/virtual/block/dm-0", "proc/self"} {
		if err := os.MkdirAll(root+"/"+d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	write(t, root+"/proc/self/mounts", "/dev/mapper/vg-root / ext4 rw 0 0\n"+
		"/dev/sda1 /boot ext4 rw 0 0\n"+
		"/dev/sdb /srv/my\\040data xfs rw 0 0\n"+
		"tmpfs /tmp tmpfs rw 0 0\n"+
		"/dev/mapper/vg-root /var/lib/x ext4 rw 0 0\n")
	write(t, root+"/proc/self/mountinfo", "25 1 253:0 / / rw,relatime shared:1 - ext4 /dev/mapper/vg-root rw\n"+
		"26 25 8:1 / /boot rw,relatime shared:2 - ext4 /dev/sda1 rw\n"+
		"27 25 8:16 / /srv/my\\040data rw,relatime shared:3 - xfs /dev/sdb rw\n"+
		"28 25 0:30 / /tmp rw,nosuid shared:4 - tmpfs tmpfs rw\n"+
		"29 25 253:0 /var/lib/x /var/lib/x rw,relatime shared:1 - ext4 /dev/mapper/vg-root rw\n")
	c := newDisk(root)
	c.read = fileSeq("   8 0 sda 1 0 2 0 1 0 2 0 0 0 0\n   8 16 sdb 1 0 2 0 1 0 2 0 0 0 0\n 253 0 dm-0 1 0 2 0 1 0 2 0 0 0 0\n")
	db := storetest.New(t, store.Config{})
	run(t, db, 2, c)
	for disk, fam := range map[string]string{"dm-0": "/", "sdb": "/srv/my data", "sda": "sda"} {
		if def, ok := db.Chart("disk." + disk); !ok || def.Family != fam {
			t.Errorf("disk.%s family = %q (%v), want %q", disk, def.Family, ok, fam)
		}
	}
}

// TestDiskFamilyNotFromFUSE: any user may mount a FUSE filesystem naming
// its source "/dev/sdb" (sshfs -o fsname=/dev/sdb); it is not sdb's
// mount, so sdb's family stays its name, and its charts are not
// redefined each time the user mounts or unmounts.
func TestDiskFamilyNotFromFUSE(t *testing.T) {
	root := t.TempDir()
	for _, d := range []string{"sys/block/sdb", "proc/self"} {
		if err := os.MkdirAll(root+"/"+d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	write(t, root+"/proc/self/mounts", "/dev/sdb /home/mallory/x fuse.sshfs rw,nosuid,nodev,user_id=1000 0 0\n")
	c := newDisk(root)
	c.read = fileSeq("   8 16 sdb 1 0 2 0 1 0 2 0 0 0 0\n")
	db := storetest.New(t, store.Config{})
	run(t, db, 2, c)
	checkDef(t, db, "disk.sdb", "disk.io", "sdb", "KiB/s", "area", 2000, "reads", "writes")
}
