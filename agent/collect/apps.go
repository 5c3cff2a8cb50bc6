package collect

import (
	"bytes"
	"fmt"
	"os"
	"sort"
	"strconv"
	"syscall"
	"time"

	"peerdns/agent/store"
)

// appsColl is Netdata's apps.plugin: every process of the host, read from
// /proc/<pid>/stat and /proc/<pid>/io every second (file descriptors from
// /proc/<pid>/fd every appsFDEvery), summed per application group
// (apps.*), per user (users.*) and per user group (groups.*), plus
// system.processes_state. Groups come from a built-in table modelled on
// Netdata's apps_groups.conf (appgroups.go): kernel threads are "kernel",
// processes no pattern matches are "other". A pid whose start time
// changes names a new process (the pid came round again) and is followed
// afresh, in its own groups.
//
// Differences from Netdata, on purpose:
//   - Rates (CPU, faults, I/O) are per-process deltas summed per group,
//     so a process that exits takes its share with it instead of making
//     the group's counter go backwards; exited children's time is not
//     carried over to their parents (Netdata's cutime/cstime
//     "carry-over" of apps.plugin).
//   - Open files, sockets and pipes are counted every appsFDEvery (10 s),
//     not every second: readlink(2) on each descriptor of each process
//     was most of the cost of a round.
//   - A group, user or user group gets its dimension the first time one
//     of its processes is seen and keeps it; a new one rebuilds the
//     charts of its kind, and the store drops their history then (it
//     cannot add a dimension to a chart). Groups are coarse, so this
//     happens in the first minutes and rarely after.
//   - apps.swap reads VmSwap from /proc/<pid>/status only while the host
//     has swap (SwapTotal, read every minute); without swap it is 0, as
//     there.
//   - At most maxInstances processes are followed.
type appsColl struct {
	root     string
	procDir  *os.File
	dirbuf   []byte
	procs    map[int]*proc
	gen      uint32
	sets     [3]*appSet
	state    *chart
	stateRaw [5]float64
	uptime   *procReader
	hasSwap  bool
	lastFD   time.Time
	prevAt   time.Time
	users    map[uint32]string
	groups   map[uint32]string
	namesAt  time.Time
	linkbuf  []byte
	fs       [][]byte
}

// appsFDEvery is how often open file descriptors are counted.
const appsFDEvery = 10 * time.Second

const (
	pfKthread = 0x00200000 // task flag of kernel threads (include/linux/sched.h)
	clkTck    = 100        // USER_HZ, the unit of /proc/<pid>/stat times on Linux
)

// appMetrics are the per-group values, one chart each, in appCharts order.
const (
	amCPU = iota
	amCPUUser
	amCPUSystem
	amPReads
	amPWrites
	amMem
	amVMem
	amThreads
	amProcesses
	amUptime
	amMinFlt
	amSwap
	amMajFlt
	amLReads
	amLWrites
	amFiles
	amSockets
	amPipes
	amCount
)

// appCharts are the chart of each metric: id suffix, family, title (after
// "Apps "/"Users "/"User Groups "), units, type and priority.
var appCharts = [amCount]struct {
	id, family, title, units, chartType string
	prio                                int
}{
	{"cpu", "cpu", "CPU Time (100% = 1 core)", "percentage", "stacked", 20001},
	{"cpu_user", "cpu", "CPU User Time (100% = 1 core)", "percentage", "stacked", 20020},
	{"cpu_system", "cpu", "CPU System Time (100% = 1 core)", "percentage", "stacked", 20021},
	{"preads", "disk", "Disk Reads", "KiB/s", "stacked", 20002},
	{"pwrites", "disk", "Disk Writes", "KiB/s", "stacked", 20002},
	{"mem", "mem", "Real Memory (w/o shared)", "MiB", "stacked", 20003},
	{"vmem", "mem", "Virtual Memory Size", "MiB", "stacked", 20005},
	{"threads", "processes", "Threads", "threads", "stacked", 20006},
	{"processes", "processes", "Processes", "processes", "stacked", 20007},
	{"uptime", "processes", "Carried Over Uptime", "seconds", "line", 20008},
	{"minor_faults", "mem", "Minor Page Faults", "page faults/s", "stacked", 20011},
	{"swap", "swap", "Swap Memory", "MiB", "stacked", 20011},
	{"major_faults", "swap", "Major Page Faults (swap read)", "page faults/s", "stacked", 20012},
	{"lreads", "disk", "Disk Logical Reads", "KiB/s", "stacked", 20042},
	{"lwrites", "disk", "I/O Logical Writes", "KiB/s", "stacked", 20042},
	{"files", "disk", "Open Files", "open files", "stacked", 20050},
	{"sockets", "net", "Open Sockets", "open sockets", "stacked", 20051},
	{"pipes", "processes", "Pipes", "open pipes", "stacked", 20053},
}

// proc is one followed process.
type proc struct {
	gen      uint32
	stat, io *procReader
	status   *procReader
	member   [3]int // index in each appSet
	kernel   bool   // a kernel thread: no I/O accounting, no descriptors
	have     bool
	start    float64    // start time in ticks since boot: a reused pid has another
	prev     [8]float64 // utime stime minflt majflt rchar wchar read_bytes write_bytes
	fds      [3]float64 // files sockets pipes (last count)
}

// appSet is one kind of grouping: apps, users or groups.
type appSet struct {
	kind, title string
	names       []string
	index       map[string]int
	charts      [amCount]*chart
	vals        [amCount][]float64 // by member index
	order       []int              // member indices in dimension (name) order
	out         []float64
	dirty       bool
}

func newAppSet(kind, title string) *appSet {
	return &appSet{kind: kind, title: title, index: map[string]int{}}
}

func (s *appSet) member(name string) int {
	if i, ok := s.index[name]; ok {
		return i
	}
	s.index[name] = len(s.names)
	s.names = append(s.names, name)
	for m := range s.vals {
		s.vals[m] = append(s.vals[m], 0)
	}
	s.dirty = true
	return len(s.names) - 1
}

func newApps(root string) *appsColl {
	return &appsColl{
		root:   root,
		procs:  map[int]*proc{},
		dirbuf: make([]byte, 32<<10),
		uptime: newProcReader(root + "/proc/uptime"),
		sets: [3]*appSet{
			newAppSet("apps", "Apps"), newAppSet("users", "Users"), newAppSet("groups", "User Groups"),
		},
		linkbuf: make([]byte, 256),
	}
}

func (c *appsColl) name() string { return "apps" }

func (c *appsColl) close() {
	if c.procDir != nil {
		c.procDir.Close()
		c.procDir = nil
	}
	c.uptime.close()
	for pid, p := range c.procs {
		p.close()
		delete(c.procs, pid)
	}
}

func (p *proc) close() {
	p.stat.close()
	if p.io != nil {
		p.io.close()
	}
	if p.status != nil {
		p.status.close()
	}
}

// listPids calls fn for every numeric entry of /proc, reading the
// directory with getdents(2) into a kept buffer: os.ReadDir would
// allocate a string and an entry per process every second.
func (c *appsColl) listPids(fn func(pid int)) error {
	if c.procDir == nil {
		f, err := os.Open(c.root + "/proc")
		if err != nil {
			return err
		}
		c.procDir = f
	}
	if _, err := c.procDir.Seek(0, 0); err != nil {
		c.procDir.Close()
		c.procDir = nil
		return err
	}
	fd := int(c.procDir.Fd())
	for {
		n, err := syscall.Getdents(fd, c.dirbuf)
		if err != nil {
			return err
		}
		if n <= 0 {
			return nil
		}
		b := c.dirbuf[:n]
		for len(b) >= 19 {
			reclen := int(b[16]) | int(b[17])<<8
			if reclen < 19 || reclen > len(b) {
				break
			}
			name := b[19:reclen]
			if i := bytes.IndexByte(name, 0); i >= 0 {
				name = name[:i]
			}
			pid := 0
			for _, ch := range name {
				if ch < '0' || ch > '9' {
					pid = -1
					break
				}
				pid = pid*10 + int(ch-'0')
			}
			if pid > 0 {
				fn(pid)
			}
			b = b[reclen:]
		}
	}
}

func (c *appsColl) collect(tk *tick) error {
	c.gen++
	if tk.now.Sub(c.namesAt) >= time.Minute || c.users == nil {
		c.users = readIDNames(c.root + "/etc/passwd")
		c.groups = readIDNames(c.root + "/etc/group")
		if b, err := os.ReadFile(c.root + "/proc/meminfo"); err == nil {
			kv := newKVValues()
			kv.slot("SwapTotal")
			_ = parseKeyValue(b, "", kv)
			st, _ := kv.get("SwapTotal")
			c.hasSwap = st > 0
		}
		c.namesAt = tk.now
	}
	ub, err := c.uptime.read()
	if err != nil {
		return fmt.Errorf("read /proc/uptime: %w", err)
	}
	f, _ := firstField(ub)
	uptime, _ := parseNum(f)
	dt := tk.now.Sub(c.prevAt).Seconds()
	c.prevAt = tk.now
	countFDs := tk.now.Sub(c.lastFD) >= appsFDEvery
	if countFDs {
		c.lastFD = tk.now
	}
	for _, s := range c.sets {
		for m := range s.vals {
			clear(s.vals[m])
		}
	}
	c.stateRaw = [5]float64{}
	capped := false
	err = c.listPids(func(pid int) {
		p := c.procs[pid]
		if p != nil && !c.update(p, pid, uptime, dt, countFDs) {
			// the pid names another process now: follow it afresh
			p.close()
			delete(c.procs, pid)
			p = nil
		}
		if p == nil {
			if len(c.procs) >= maxInstances {
				capped = true
				return
			}
			p = c.newProc(pid)
			if p == nil {
				return // gone already
			}
			c.procs[pid] = p
			c.update(p, pid, uptime, dt, countFDs)
		}
		p.gen = c.gen
	})
	if err != nil {
		return fmt.Errorf("list /proc: %w", err)
	}
	if capped {
		tk.capped("apps", "processes")
	}
	for pid, p := range c.procs {
		if p.gen != c.gen {
			p.close()
			delete(c.procs, pid)
		}
	}
	if c.state == nil {
		c.state = newChart(&store.ChartDef{
			ID: "system.processes_state", Context: "system.processes_state", Family: "processes",
			Title: "System Processes State", Units: "processes", ChartType: "line", Plugin: "apps.plugin",
			Priority: 601, UpdateEvery: 1,
			Dims: []store.DimDef{
				dim("running", "", algAbsolute, 1, 1), dim("sleeping_uninterruptible", "", algAbsolute, 1, 1),
				dim("sleeping_interruptible", "", algAbsolute, 1, 1), dim("zombie", "", algAbsolute, 1, 1),
				dim("stopped", "", algAbsolute, 1, 1),
			},
		})
	}
	c.state.emit(tk, c.stateRaw[:])
	for _, s := range c.sets {
		if s.dirty {
			s.rebuild(tk)
		}
		if len(s.names) == 0 {
			continue // no process seen yet
		}
		for m, ch := range s.charts {
			for j, i := range s.order {
				s.out[j] = s.vals[m][i]
			}
			ch.emit(tk, s.out)
		}
	}
	return nil
}

// newProc opens a process's files and finds its groups (allocates: once
// per new process).
func (c *appsColl) newProc(pid int) *proc {
	dir := c.root + "/proc/" + strconv.Itoa(pid)
	p := &proc{stat: newProcReader(dir + "/stat"), io: newProcReader(dir + "/io")}
	b, err := p.stat.read()
	if err != nil {
		p.close()
		return nil
	}
	comm, statRest := splitStat(b)
	c.fs = fields(c.fs[:0], statRest)
	kernel := false
	if len(c.fs) > 6 {
		if fl, ok := parseNum(c.fs[6]); ok && uint64(fl)&pfKthread != 0 {
			kernel = true
		}
	}
	uid, gid := uint32(0), uint32(0)
	p.status = newProcReader(dir + "/status")
	if sb, err := p.status.read(); err == nil {
		uid, gid = statusIDs(sb)
	}
	if !c.hasSwap {
		p.status.close() // update opens it again after a swapon
		p.status = nil
	}
	if kernel {
		// kernel threads (half the processes of a small host) do no
		// accounted I/O and hold no descriptors: skip those reads
		p.kernel = true
		p.io.close()
		p.io = nil
	}
	p.member[0] = c.sets[0].member(appGroup(string(comm), kernel))
	p.member[1] = c.sets[1].member(idName(c.users, uid))
	p.member[2] = c.sets[2].member(idName(c.groups, gid))
	return p
}

func idName(names map[uint32]string, id uint32) string {
	if n, ok := names[id]; ok {
		return n
	}
	return strconv.FormatUint(uint64(id), 10)
}

// update reads one process and adds it to its groups. It returns false,
// adding nothing, when the pid names another process than p (its start
// time changed: the pid was reused), whose groups may differ.
func (c *appsColl) update(p *proc, pid int, uptime, dt float64, countFDs bool) bool {
	b, err := p.stat.read()
	if err != nil {
		return true // exited: dropped after the listing
	}
	_, rest := splitStat(b)
	c.fs = fields(c.fs[:0], rest)
	// after "pid (comm)": state ppid pgrp session tty tpgid flags minflt
	// cminflt majflt cmajflt utime stime cutime cstime priority nice
	// num_threads itrealvalue starttime vsize rss
	if len(c.fs) < 22 {
		return true
	}
	num := func(i int) float64 { v, _ := parseNum(c.fs[i]); return v }
	if p.have && num(19) != p.start {
		return false
	}
	p.start = num(19)
	var cur [8]float64
	cur[0], cur[1], cur[2], cur[3] = num(11), num(12), num(7), num(9)
	if p.io != nil {
		if ib, err := p.io.read(); err == nil {
			cur[4], cur[5], cur[6], cur[7] = ioCounters(ib)
		} else {
			// not allowed (another user's process without
			// CAP_SYS_PTRACE): do not reopen it every second
			p.io.close()
			p.io = nil
		}
	}
	switch c.fs[0][0] {
	case 'R':
		c.stateRaw[0]++
	case 'D':
		c.stateRaw[1]++
	case 'S':
		c.stateRaw[2]++
	case 'Z':
		c.stateRaw[3]++
	case 'T', 't':
		c.stateRaw[4]++
	}
	var v [amCount]float64
	if p.have && dt > 0 {
		d := func(i int) float64 { return max(cur[i]-p.prev[i], 0) / dt }
		v[amCPUUser] = d(0) * 100 / clkTck
		v[amCPUSystem] = d(1) * 100 / clkTck
		v[amCPU] = v[amCPUUser] + v[amCPUSystem]
		v[amMinFlt] = d(2)
		v[amMajFlt] = d(3)
		v[amLReads] = d(4) / 1024
		v[amLWrites] = d(5) / 1024
		v[amPReads] = d(6) / 1024
		v[amPWrites] = d(7) / 1024
	}
	p.prev, p.have = cur, true
	page := float64(os.Getpagesize())
	v[amMem] = num(21) * page / (1 << 20)
	v[amVMem] = num(20) / (1 << 20)
	v[amThreads] = num(17)
	v[amProcesses] = 1
	v[amUptime] = max(uptime-num(19)/clkTck, 0)
	switch {
	case c.hasSwap && p.status == nil: // swap came on after p was first seen
		p.status = newProcReader(c.root + "/proc/" + strconv.Itoa(pid) + "/status")
	case !c.hasSwap && p.status != nil:
		p.status.close()
		p.status = nil
	}
	if p.status != nil {
		if sb, err := p.status.read(); err == nil {
			v[amSwap] = StatusKiB(sb, "VmSwap:") / 1024
		}
	}
	if countFDs && !p.kernel {
		p.fds = c.countFDs(pid)
	}
	v[amFiles], v[amSockets], v[amPipes] = p.fds[0], p.fds[1], p.fds[2]
	for k, s := range c.sets {
		i := p.member[k]
		for m := range v {
			if m == amUptime {
				s.vals[m][i] = max(s.vals[m][i], v[m])
			} else {
				s.vals[m][i] += v[m]
			}
		}
	}
	return true
}

// countFDs classifies a process's open descriptors by their link target.
func (c *appsColl) countFDs(pid int) (out [3]float64) {
	dir := c.root + "/proc/" + strconv.Itoa(pid) + "/fd"
	f, err := os.Open(dir)
	if err != nil {
		return out
	}
	defer f.Close()
	names, err := f.Readdirnames(-1)
	if err != nil {
		return out
	}
	for _, n := range names {
		k, err := syscall.Readlink(dir+"/"+n, c.linkbuf)
		if err != nil || k <= 0 {
			continue
		}
		l := c.linkbuf[:k]
		switch {
		case bytes.HasPrefix(l, []byte("socket:")):
			out[1]++
		case bytes.HasPrefix(l, []byte("pipe:")):
			out[2]++
		default:
			out[0]++
		}
	}
	return out
}

// rebuild makes the set's charts for its current members.
func (s *appSet) rebuild(tk *tick) {
	s.dirty = false
	s.order = s.order[:0]
	for i := range s.names {
		s.order = append(s.order, i)
	}
	sort.Slice(s.order, func(a, b int) bool { return s.names[s.order[a]] < s.names[s.order[b]] })
	s.out = make([]float64, len(s.order))
	for m, spec := range appCharts {
		if s.charts[m] != nil {
			tk.remove(s.charts[m].def)
		}
		def := &store.ChartDef{
			ID: s.kind + "." + spec.id, Context: s.kind + "." + spec.id, Family: spec.family,
			Title: s.title + " " + spec.title, Units: spec.units, ChartType: spec.chartType,
			Plugin: "apps.plugin", Priority: spec.prio, UpdateEvery: 1,
		}
		for _, i := range s.order {
			def.Dims = append(def.Dims, dim(s.names[i], "", algAbsolute, 1, 1))
		}
		s.charts[m] = newChart(def)
	}
}

// splitStat splits /proc/<pid>/stat into the command (inside the
// parentheses, which may hold spaces and parentheses) and what follows.
func splitStat(b []byte) (comm, rest []byte) {
	open := bytes.IndexByte(b, '(')
	end := bytes.LastIndexByte(b, ')')
	if open < 0 || end < open {
		return nil, nil
	}
	return b[open+1 : end], b[end+1:]
}

// statusIDs returns the real uid and gid of /proc/<pid>/status.
func statusIDs(b []byte) (uid, gid uint32) {
	for len(b) > 0 {
		var line []byte
		line, b = nextLine(b)
		key, rest := firstField(line)
		val, _ := firstField(rest)
		v, ok := parseNum(val)
		if !ok {
			continue
		}
		switch string(key) {
		case "Uid:":
			uid = uint32(v)
		case "Gid:":
			gid = uint32(v)
			return uid, gid
		}
	}
	return uid, gid
}

// StatusKiB returns the "kB" value of the line key (e.g. "VmSwap:") of a
// /proc/<pid>/status file (0 when absent); the agent reads its own
// RssFile with it too. The key must start a line: the Name line holds
// the process's own name, which may read "VmSwap:9999999 ".
func StatusKiB(b []byte, key string) float64 {
	for len(b) > 0 {
		var line []byte
		line, b = nextLine(b)
		if rest, ok := bytes.CutPrefix(line, []byte(key)); ok {
			val, _ := firstField(rest)
			v, _ := parseNum(val)
			return v
		}
	}
	return 0
}

// ioCounters returns rchar, wchar, read_bytes and write_bytes of
// /proc/<pid>/io.
func ioCounters(b []byte) (rchar, wchar, rb, wb float64) {
	for len(b) > 0 {
		var line []byte
		line, b = nextLine(b)
		key, rest := firstField(line)
		val, _ := firstField(rest)
		v, _ := parseNum(val)
		switch string(key) {
		case "rchar:":
			rchar = v
		case "wchar:":
			wchar = v
		case "read_bytes:":
			rb = v
		case "write_bytes:":
			wb = v
		}
	}
	return
}

// readIDNames maps the ids of /etc/passwd or /etc/group to names.
func readIDNames(path string) map[uint32]string {
	m := map[uint32]string{}
	b, err := os.ReadFile(path)
	if err != nil {
		return m
	}
	for len(b) > 0 {
		var line []byte
		line, b = nextLine(b)
		parts := bytes.SplitN(line, []byte{':'}, 4)
		if len(parts) < 3 {
			continue
		}
		if id, err := strconv.ParseUint(string(parts[2]), 10, 32); err == nil {
			if _, dup := m[uint32(id)]; !dup {
				m[uint32(id)] = string(parts[0])
			}
		}
	}
	return m
}
