package collect

import (
	"bytes"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"peerdns/agent/store"
)

// cgroupColl is Netdata's cgroups.plugin for the two kinds of cgroup a
// user looks for: containers and VMs (docker, lxc, podman, kubepods,
// machine.slice, ...), each with its own cgroup_<name>.* charts (CPU,
// memory, writeback, page faults, I/O and, on cgroup v2, pressure), and
// systemd services (system.slice/<name>.service), which Netdata shows as
// one dimension each in the services.* charts. Both cgroup v1 (the
// cpuacct, memory and blkio hierarchies) and v2 (the unified hierarchy)
// are read; on a hybrid host v2 is used when it has the controllers.
//
// The tree is walked every cgroupScanEvery (Netdata: 10 s) down to
// cgroupMaxDepth; a cgroup that disappears loses its charts (or its
// service dimension) at the next walk; at most maxInstances cgroups are
// charted (a log line says so). Names are the cgroup's directory names
// with Netdata's rules (the docker-/crio-/libpod- prefixes and .scope
// suffix dropped, ids cut to 12 characters); Netdata's rename script
// (docker inspect for container names) is not run. User sessions
// (user.slice), init.scope and the slices themselves are not charted, as
// in Netdata's default. A host without cgroups (this VM: the hierarchies
// are mounted but empty) has no such charts.
type cgroupColl struct {
	root    string
	v2      string            // unified hierarchy with controllers, "" = use v1
	v1      map[string]string // controller → mount path
	groups  map[string]*cgroup
	scanned time.Time
	svc     *serviceCharts
	names   []string // sorted service names, reused
}

const (
	cgroupScanEvery = 10 * time.Second
	cgroupMaxDepth  = 4
)

type cgroup struct {
	name    string
	service bool
	kv      *kvColl
}

func newCgroups(root string) *cgroupColl {
	return &cgroupColl{root: root, groups: map[string]*cgroup{}}
}

func (c *cgroupColl) name() string { return "cgroups" }

func (c *cgroupColl) close() {
	for _, g := range c.groups {
		g.kv.close()
	}
}

// findHierarchies reads the mount table for cgroup2 and the v1
// controllers.
func (c *cgroupColl) findHierarchies() {
	c.v1 = map[string]string{}
	c.v2 = ""
	ms, err := readMounts(c.root)
	if err != nil {
		return
	}
	for _, m := range ms {
		switch m.Fstype {
		case "cgroup2":
			ctl, err := os.ReadFile(c.root + m.Mountpoint + "/cgroup.controllers")
			if err == nil && (bytes.Contains(ctl, []byte("cpu")) || bytes.Contains(ctl, []byte("memory"))) {
				c.v2 = c.root + m.Mountpoint
			}
		case "cgroup":
			for _, ctl := range []string{"cpuacct", "memory", "blkio"} {
				if filepath.Base(m.Mountpoint) == ctl || strings.Contains(filepath.Base(m.Mountpoint), ctl) {
					if _, dup := c.v1[ctl]; !dup {
						c.v1[ctl] = c.root + m.Mountpoint
					}
				}
			}
		}
	}
}

// kind classifies a cgroup path (relative, "/"-separated): a service, a
// container, or neither.
func cgroupKind(rel string) (name string, service, chart bool) {
	base := filepath.Base(rel)
	switch {
	case rel == "" || rel == "." || strings.HasPrefix(rel, "user.slice") || rel == "init.scope" || strings.HasSuffix(base, ".slice"),
		groupingDirs[base], strings.HasPrefix(base, "pod") && strings.Contains(rel, "kubepods"):
		// not charted; its children may be
		return "", false, false
	case strings.HasPrefix(rel, "system.slice/") && strings.HasSuffix(base, ".service") && strings.Count(rel, "/") == 1:
		return strings.TrimSuffix(base, ".service"), true, true
	case strings.HasPrefix(rel, "system.slice/"):
		// a service's own children, or a mount/socket unit
		if !strings.HasSuffix(base, ".scope") {
			return "", false, false
		}
	}
	n := strings.TrimSuffix(base, ".scope")
	for _, p := range []string{"docker-", "crio-", "libpod-", "cri-containerd-"} {
		n = strings.TrimPrefix(n, p)
	}
	if len(n) == 64 && isHex(n) {
		n = n[:12]
	}
	n = strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' {
			return r
		}
		return '_'
	}, n)
	return n, false, true
}

// groupingDirs hold containers rather than being one (Netdata's default
// excludes /docker, /lxc, /machine, /qemu, /system, /systemd and /user
// themselves and charts what is inside).
var groupingDirs = map[string]bool{
	"docker": true, "lxc": true, "machine": true, "qemu": true, "system": true, "systemd": true, "user": true,
	"kubepods": true, "burstable": true, "besteffort": true, "libpod_parent": true,
}

func isHex(s string) bool {
	for i := 0; i < len(s); i++ {
		if !(s[i] >= '0' && s[i] <= '9' || s[i] >= 'a' && s[i] <= 'f') {
			return false
		}
	}
	return true
}

// scan walks the hierarchy and adds or removes cgroups.
func (c *cgroupColl) scan(tk *tick) {
	c.scanned = tk.now
	c.findHierarchies()
	base := c.v2
	if base == "" {
		base = c.v1["cpuacct"]
		if base == "" {
			base = c.v1["memory"]
		}
	}
	present := map[string]bool{}
	capped := false
	if base != "" {
		_ = filepath.WalkDir(base, func(p string, d os.DirEntry, err error) error {
			if err != nil || !d.IsDir() {
				return nil
			}
			rel, _ := filepath.Rel(base, p)
			if rel != "." && strings.Count(rel, "/") >= cgroupMaxDepth {
				return filepath.SkipDir
			}
			name, service, ok := cgroupKind(rel)
			if !ok {
				return nil
			}
			if c.groups[rel] == nil {
				if len(c.groups) >= maxInstances {
					capped = true
					return filepath.SkipDir
				}
				c.groups[rel] = c.newCgroup(rel, name, service)
			}
			present[rel] = true
			if !service {
				return filepath.SkipDir // a container's own children are part of it
			}
			return nil
		})
	}
	if capped {
		tk.capped("cgroups", "cgroups")
	}
	for rel, g := range c.groups {
		if !present[rel] {
			g.kv.close()
			for _, l := range g.kv.charts {
				tk.remove(l.c.def)
			}
			delete(c.groups, rel)
		}
	}
}

func (c *cgroupColl) newCgroup(rel, name string, service bool) *cgroup {
	var srcs []*kvSource
	opt := func(path, prefix string, parse func([]byte, string, *kvValues) error) {
		srcs = append(srcs, &kvSource{path: path, prefix: prefix, parse: parse, optional: true})
	}
	v2 := c.v2 != ""
	if v2 {
		d := c.v2 + "/" + rel
		opt(d+"/cpu.stat", "cpu.", parseKeyValue)
		opt(d+"/memory.stat", "mem.", parseKeyValue)
		opt(d+"/memory.current", "mem.current", parseSingle)
		opt(d+"/memory.swap.current", "mem.swap", parseSingle)
		opt(d+"/io.stat", "io.", parseIOStat)
		opt(d+"/cpu.pressure", "cpu.", parsePressure)
		opt(d+"/io.pressure", "io.", parsePressure)
		opt(d+"/memory.pressure", "memory.", parsePressure)
	} else {
		if p := c.v1["cpuacct"]; p != "" {
			opt(p+"/"+rel+"/cpuacct.stat", "cpu.", parseKeyValue)
		}
		if p := c.v1["memory"]; p != "" {
			opt(p+"/"+rel+"/memory.stat", "mem.", parseKeyValue)
			opt(p+"/"+rel+"/memory.usage_in_bytes", "mem.current", parseSingle)
			opt(p+"/"+rel+"/memory.failcnt", "mem.failcnt", parseSingle)
		}
		if p := c.v1["blkio"]; p != "" {
			opt(p+"/"+rel+"/blkio.throttle.io_service_bytes", "io.bytes.", parseBlkio)
			opt(p+"/"+rel+"/blkio.throttle.io_serviced", "io.ops.", parseBlkio)
		}
	}
	var specs []kvChart
	if !service {
		specs = cgroupCharts(name, v2)
	}
	kv := newKVColl("cgroup "+rel, specs, srcs...)
	for _, k := range serviceKeys(v2) {
		kv.kv.slot(k)
	}
	if v2 && !service {
		kv.kv.slot("cpu.nr_periods")
		kv.kv.slot("cpu.nr_throttled")
		kv.derive = (&throttling{}).derive
	}
	return &cgroup{name: name, service: service, kv: kv}
}

func (c *cgroupColl) collect(tk *tick) error {
	if c.v1 == nil || tk.now.Sub(c.scanned) >= cgroupScanEvery {
		c.scan(tk)
	}
	c.names = c.names[:0]
	for _, g := range c.groups {
		if err := g.kv.collect(tk); err != nil {
			continue // a cgroup going away mid-read: the next walk drops it
		}
		if g.service {
			c.names = append(c.names, g.name)
		}
	}
	if len(c.names) == 0 {
		if c.svc != nil {
			c.svc.remove(tk)
			c.svc = nil
		}
		return nil
	}
	sort.Strings(c.names)
	if c.svc == nil || !c.svc.same(c.names) {
		if c.svc != nil {
			c.svc.remove(tk)
		}
		c.svc = newServiceCharts(c.names, c.v2 != "")
	}
	c.svc.emit(tk, c)
	return nil
}

// kThrottledPct is the derived key of cgroup.throttled.
const kThrottledPct = "=cpu.throttled_pct"

// throttling turns cpu.stat's nr_throttled and nr_periods into Netdata's
// cgroup.throttled: the throttled share, in percent, of the CPU periods
// since the previous read (the first read: since the cgroup began). No
// period since then, or counters that went backwards, give 0, as in
// Netdata.
type throttling struct {
	periods, throttled float64
}

func (t *throttling) derive(kv *kvValues) {
	p, ok1 := kv.get("cpu.nr_periods")
	th, ok2 := kv.get("cpu.nr_throttled")
	if !ok1 || !ok2 {
		return
	}
	dp, dt := max(p-t.periods, 0), max(th-t.throttled, 0)
	t.periods, t.throttled = p, th
	v := 0.0
	if dp > 0 {
		v = dt * 100 / dp
	}
	kv.put(kThrottledPct, v)
}

// parseSingle reads a file holding one number (memory.current) under the
// prefix itself.
func parseSingle(b []byte, prefix string, kv *kvValues) error {
	f, _ := firstField(b)
	v, ok := parseNum(bytes.TrimSpace(f))
	if !ok {
		if bytes.Equal(bytes.TrimSpace(f), []byte("max")) {
			return nil
		}
		return errNoValues
	}
	kv.set(prefix, nil, v)
	return nil
}

// parseIOStat sums cgroup v2 io.stat over devices:
// "8:0 rbytes=1 wbytes=2 rios=3 wios=4 dbytes=0 dios=0" → "io.rbytes" ...
func parseIOStat(b []byte, prefix string, kv *kvValues) error {
	var scratch [32]byte
	for k := range ioStatKeys {
		kv.putPrefixed(prefix, ioStatKeys[k], 0)
	}
	for len(b) > 0 {
		var line []byte
		line, b = nextLine(b)
		_, rest := firstField(line)
		for {
			var f []byte
			f, rest = firstField(rest)
			if len(f) == 0 {
				break
			}
			name, val, ok := bytes.Cut(f, []byte{'='})
			if !ok {
				continue
			}
			if v, good := parseNum(val); good {
				kv.add(append(append(scratch[:0], prefix...), name...), v)
			}
		}
	}
	return nil
}

var ioStatKeys = []string{"rbytes", "wbytes", "rios", "wios"}

// parseBlkio sums a cgroup v1 blkio.throttle file over devices:
// "8:0 Read 4096" → "<prefix>Read"; the per-device and overall "Total"
// lines are skipped.
func parseBlkio(b []byte, prefix string, kv *kvValues) error {
	var scratch [32]byte
	kv.putPrefixed(prefix, "Read", 0)
	kv.putPrefixed(prefix, "Write", 0)
	for len(b) > 0 {
		var line []byte
		line, b = nextLine(b)
		dev, rest := firstField(line)
		op, rest := firstField(rest)
		val, _ := firstField(rest)
		if len(val) == 0 || bytes.Equal(dev, []byte("Total")) || bytes.Equal(op, []byte("Total")) {
			continue
		}
		if v, ok := parseNum(val); ok {
			kv.add(append(append(scratch[:0], prefix...), op...), v)
		}
	}
	return nil
}

// serviceKeys are the values the services.* charts take from each
// service's cgroup.
func serviceKeys(v2 bool) []string {
	if v2 {
		return []string{"cpu.usage_usec", "mem.current", "io.rbytes", "io.wbytes", "io.rios", "io.wios"}
	}
	return []string{"cpu.user", "cpu.system", "mem.current", "io.bytes.Read", "io.bytes.Write", "io.ops.Read", "io.ops.Write"}
}

// serviceCharts are Netdata's services.* charts: one dimension per
// systemd service. They are rebuilt (and their history dropped) when the
// set of services changes.
type serviceCharts struct {
	names                                 []string
	v2                                    bool
	cpu, mem, ioRead, ioWrite, opsR, opsW *chart
	raw                                   [][]float64 // per chart, per service
}

func newServiceCharts(names []string, v2 bool) *serviceCharts {
	s := &serviceCharts{names: append([]string(nil), names...), v2: v2}
	mk := func(id, family, title, units, chartType string, prio int, alg string, mul, div int64) *chart {
		def := &store.ChartDef{ID: id, Context: id, Family: family, Title: title, Units: units, ChartType: chartType,
			Plugin: "cgroups.plugin", Module: "", Priority: prio, UpdateEvery: 1}
		for _, n := range names {
			def.Dims = append(def.Dims, dim(n, "", alg, mul, div))
		}
		return newChart(def)
	}
	// v1 cpuacct.stat counts USER_HZ (100/s): ticks/s = percent; v2 µs.
	cpuDiv := int64(1)
	if v2 {
		cpuDiv = 10000
	}
	s.cpu = mk("services.cpu", "cpu", "Systemd Services CPU utilization (100% = 1 core)", "percentage", "stacked", 19000, algIncremental, 1, cpuDiv)
	s.mem = mk("services.mem_usage", "mem", "Systemd Services Used Memory", "MiB", "stacked", 19010, algAbsolute, 1, 1<<20)
	s.ioRead = mk("services.io_read", "disk", "Systemd Services Disk Read Bandwidth", "KiB/s", "stacked", 19100, algIncremental, 1, 1024)
	s.ioWrite = mk("services.io_write", "disk", "Systemd Services Disk Write Bandwidth", "KiB/s", "stacked", 19101, algIncremental, -1, 1024)
	s.opsR = mk("services.io_ops_read", "disk", "Systemd Services Disk Read Operations", "operations/s", "stacked", 19110, algIncremental, 1, 1)
	s.opsW = mk("services.io_ops_write", "disk", "Systemd Services Disk Write Operations", "operations/s", "stacked", 19111, algIncremental, -1, 1)
	s.raw = make([][]float64, 6)
	for i := range s.raw {
		s.raw[i] = make([]float64, len(names))
	}
	return s
}

func (s *serviceCharts) same(names []string) bool {
	if len(names) != len(s.names) {
		return false
	}
	for i := range names {
		if names[i] != s.names[i] {
			return false
		}
	}
	return true
}

func (s *serviceCharts) all() []*chart {
	return []*chart{s.cpu, s.mem, s.ioRead, s.ioWrite, s.opsR, s.opsW}
}

func (s *serviceCharts) remove(tk *tick) {
	for _, c := range s.all() {
		tk.remove(c.def)
	}
}

func (s *serviceCharts) emit(tk *tick, c *cgroupColl) {
	keys := [6]string{"cpu.usage_usec", "mem.current", "io.rbytes", "io.wbytes", "io.rios", "io.wios"}
	if !s.v2 {
		keys = [6]string{"", "mem.current", "io.bytes.Read", "io.bytes.Write", "io.ops.Read", "io.ops.Write"}
	}
	i := 0
	for _, g := range c.groups {
		if !g.service {
			continue
		}
		// the order of s.names: find the service's column
		j := sort.SearchStrings(s.names, g.name)
		if j >= len(s.names) || s.names[j] != g.name {
			continue
		}
		for k, key := range keys {
			v, ok := 0.0, false
			if k == 0 && !s.v2 {
				u, ok1 := g.kv.kv.get("cpu.user")
				sy, ok2 := g.kv.kv.get("cpu.system")
				v, ok = u+sy, ok1 && ok2
			} else {
				v, ok = g.kv.kv.get(key)
			}
			if !ok {
				v = nan
			}
			s.raw[k][j] = v
		}
		i++
	}
	for k, ch := range s.all() {
		ch.emit(tk, s.raw[k])
	}
}

// cgroupCharts are a container's charts, Netdata's cgroup.* contexts.
func cgroupCharts(name string, v2 bool) []kvChart {
	id := func(s string) string { return "cgroup_" + name + "." + s }
	g := func(chart, context, family, title, units, chartType string, prio int, dims ...kd) kvChart {
		c := kvDef(id(chart), context, family, title, units, chartType, "", prio, dims...)
		c.def.Plugin = "cgroups.plugin"
		return c
	}
	const mib = 1 << 20
	var cs []kvChart
	if v2 {
		cs = append(cs,
			g("cpu", "cgroup.cpu", "cpu", "CPU Usage (100% = 1 core)", "percentage", "stacked", 40000,
				inc("cpu.user_usec", "user", "", 1, 10000), inc("cpu.system_usec", "system", "", 1, 10000)),
			g("throttled", "cgroup.throttled", "cpu", "CPU Throttled Runnable Periods", "percentage", "line", 40005,
				abs(kThrottledPct, "throttled", "", 1, 1)),
			g("mem", "cgroup.mem", "mem", "Memory Usage", "MiB", "stacked", 40220,
				abs("mem.anon", "anon", "", 1, mib), abs("mem.kernel_stack", "kernel_stack", "", 1, mib),
				abs("mem.slab", "slab", "", 1, mib), abs("mem.sock", "sock", "", 1, mib),
				abs("mem.anon_thp", "anon_thp", "", 1, mib), abs("mem.file", "file", "", 1, mib)),
			g("writeback", "cgroup.writeback", "mem", "Writeback Memory", "MiB", "area", 40300,
				abs("mem.file_dirty", "dirty", "", 1, mib), abs("mem.file_writeback", "writeback", "", 1, mib)),
			g("pgfaults", "cgroup.pgfaults", "mem", "Memory Page Faults", "MiB/s", "line", 40500,
				inc("mem.pgfault", "pgfault", "", 4096, mib), inc("mem.pgmajfault", "swap", "", -4096, mib)),
			g("mem_usage", "cgroup.mem_usage", "mem", "Used Memory", "MiB", "stacked", 40210,
				abs("mem.current", "ram", "", 1, mib), abs("mem.swap", "swap", "", 1, mib)),
			g("io", "cgroup.io", "disk", "I/O Bandwidth (all disks)", "KiB/s", "area", 41200,
				inc("io.rbytes", "read", "", 1, 1024), inc("io.wbytes", "write", "", -1, 1024)),
			g("serviced_ops", "cgroup.serviced_ops", "disk", "Serviced I/O Operations (all disks)", "operations/s", "line", 41210,
				inc("io.rios", "read", "", 1, 1), inc("io.wios", "write", "", -1, 1)),
		)
		for _, r := range []struct {
			key, title, family string
			prio               int
		}{{"cpu", "CPU", "cpu", 42000}, {"memory", "Memory", "mem", 42100}, {"io", "I/O", "disk", 42200}} {
			for i, kind := range []string{"some", "full"} {
				p := r.key + "." + kind + "."
				ctx := r.key + "_" + kind + "_pressure"
				cs = append(cs,
					g(ctx, "cgroup."+ctx, r.family, r.title+" "+strings.ToUpper(kind[:1])+kind[1:]+" Pressure", "percentage", "line", r.prio+i*10,
						abs(p+"avg10", "some10", "10 sec", 1, 1), abs(p+"avg60", "some60", "60 sec", 1, 1), abs(p+"avg300", "some300", "300 sec", 1, 1)),
					g(ctx+"_stall_time", "cgroup."+ctx+"_stall_time", r.family, r.title+" "+strings.ToUpper(kind[:1])+kind[1:]+" Pressure Stall Time", "ms", "line", r.prio+i*10+5,
						inc(p+"total", "time", "", 1, 1000)),
				)
			}
		}
		return cs
	}
	return []kvChart{
		g("cpu", "cgroup.cpu", "cpu", "CPU Usage (100% = 1 core)", "percentage", "stacked", 40000,
			inc("cpu.user", "user", "", 1, 1), inc("cpu.system", "system", "", 1, 1)),
		g("mem", "cgroup.mem", "mem", "Memory Usage", "MiB", "stacked", 40220,
			abs("mem.total_cache", "cache", "", 1, mib), abs("mem.total_rss", "rss", "", 1, mib),
			abs("mem.total_swap", "swap", "", 1, mib), abs("mem.total_rss_huge", "rss_huge", "", 1, mib),
			abs("mem.total_mapped_file", "mapped_file", "", 1, mib)),
		g("writeback", "cgroup.writeback", "mem", "Writeback Memory", "MiB", "area", 40300,
			abs("mem.total_dirty", "dirty", "", 1, mib), abs("mem.total_writeback", "writeback", "", 1, mib)),
		g("mem_activity", "cgroup.mem_activity", "mem", "Memory Activity", "MiB/s", "line", 40400,
			inc("mem.total_pgpgin", "pgpgin", "in", 4096, mib), inc("mem.total_pgpgout", "pgpgout", "out", -4096, mib)),
		g("pgfaults", "cgroup.pgfaults", "mem", "Memory Page Faults", "MiB/s", "line", 40500,
			inc("mem.total_pgfault", "pgfault", "", 4096, mib), inc("mem.total_pgmajfault", "swap", "", -4096, mib)),
		g("mem_usage", "cgroup.mem_usage", "mem", "Used Memory", "MiB", "stacked", 40210,
			abs("mem.current", "ram", "", 1, mib)),
		g("mem_failcnt", "cgroup.mem_failcnt", "mem", "Memory Limit Failures", "count", "line", 40250,
			inc("mem.failcnt", "failures", "", 1, 1)),
		g("io", "cgroup.io", "disk", "I/O Bandwidth (all disks)", "KiB/s", "area", 41200,
			inc("io.bytes.Read", "read", "", 1, 1024), inc("io.bytes.Write", "write", "", -1, 1024)),
		g("serviced_ops", "cgroup.serviced_ops", "disk", "Serviced I/O Operations (all disks)", "operations/s", "line", 41210,
			inc("io.ops.Read", "read", "", 1, 1), inc("io.ops.Write", "write", "", -1, 1)),
	}
}
