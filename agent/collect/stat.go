package collect

import (
	"bytes"
	"fmt"

	"peerdns/agent/store"
)

// statCounters are the values of one read of /proc/stat.
type statCounters struct {
	total                  cpuLine   // the "cpu" line
	cpus                   []cpuLine // "cpuN" lines, reused between reads
	ctxt, intr, processes  uint64
	running, blocked       uint64
	hasCtxt, hasIntr, hasP bool
	hasProcs, hasTotal     bool
}

// cpuLine is one cpu line in cpuDims order (jiffies).
type cpuLine struct {
	n int // CPU number (cpuN)
	f [10]float64
}

// parseStat reads the text of /proc/stat into s (reusing s.cpus).
func parseStat(s *statCounters, b []byte) error {
	cpus := s.cpus[:0]
	*s = statCounters{}
	var fs [12][]byte
	for len(b) > 0 {
		var line []byte
		line, b = nextLine(b)
		if len(line) > 3 && line[0] == 'c' && bytes.HasPrefix(line, []byte("cpu")) {
			name, rest := firstField(line)
			n := 0
			for i := range fs {
				fs[i], rest = firstField(rest)
				if len(fs[i]) > 0 {
					n++
				}
			}
			if n < 4 {
				continue // an odd line: skip it
			}
			// user nice system idle iowait irq softirq steal guest guest_nice
			var v [10]float64
			ok := true
			for i := 0; i < 10 && i < n; i++ {
				x, good := parseNum(fs[i])
				if !good {
					ok = false
					break
				}
				v[i] = x
			}
			if !ok {
				continue
			}
			// /proc/stat counts guest time inside user (and guest_nice
			// inside nice); Netdata subtracts it so the stacked chart
			// does not count it twice.
			user := max(v[0]-v[8], 0)
			nice := max(v[1]-v[9], 0)
			l := cpuLine{f: [10]float64{v[9], v[8], v[7], v[6], v[5], user, v[2], nice, v[4], v[3]}}
			if len(name) == 3 {
				s.total, s.hasTotal = l, true
				continue
			}
			num, good := parseNum(name[3:])
			if !good {
				continue
			}
			l.n = int(num)
			cpus = append(cpus, l)
			continue
		}
		// Only the first two fields matter; the intr line has thousands.
		key, rest := firstField(line)
		val, _ := firstField(rest)
		v, ok := parseNum(val)
		if !ok || v < 0 {
			if len(key) > 0 && (string(key) == "ctxt" || string(key) == "processes" || string(key) == "intr") {
				return fmt.Errorf("/proc/stat %s: bad number %q", key, val)
			}
			continue
		}
		switch string(key) {
		case "ctxt":
			s.ctxt, s.hasCtxt = uint64(v), true
		case "intr":
			s.intr, s.hasIntr = uint64(v), true
		case "processes":
			s.processes, s.hasP = uint64(v), true
		case "procs_running":
			s.running, s.hasProcs = uint64(v), true
		case "procs_blocked":
			s.blocked = uint64(v)
		}
	}
	s.cpus = cpus
	if !s.hasCtxt && !s.hasIntr && !s.hasP && !s.hasProcs && !s.hasTotal {
		return fmt.Errorf("/proc/stat: no cpu, ctxt, intr, processes or procs_running line")
	}
	return nil
}

// statColl reads /proc/stat once a tick and stores system.cpu, cpu.cpuN
// (a chart per CPU line, removed when the CPU goes offline),
// system.processes, system.forks, system.ctxt and system.intr.
type statColl struct {
	read                     func() ([]byte, error)
	done                     func()
	s                        statCounters
	total                    cpuRow
	cores                    map[int]*cpuRow
	seen                     map[int]bool
	procs, forks, ctxt, intr *chart
	raw                      [2]float64
}

func newStat(root string) *statColl {
	r := newProcReader(root + "/proc/stat")
	return &statColl{read: r.read, done: r.close, cores: map[int]*cpuRow{}, seen: map[int]bool{}}
}

func (c *statColl) name() string { return "stat" }

func (c *statColl) close() {
	if c.done != nil {
		c.done()
	}
}

func (c *statColl) collect(tk *tick) error {
	b, err := c.read()
	if err != nil {
		return fmt.Errorf("read /proc/stat: %w", err)
	}
	if err := parseStat(&c.s, b); err != nil {
		return err
	}
	s := &c.s
	if c.procs == nil {
		sys := func(id, family, title, units string, prio int, dims ...store.DimDef) *chart {
			return newChart(&store.ChartDef{
				ID: "system." + id, Context: "system." + id, Family: family, Title: title, Units: units,
				ChartType: "line", Plugin: "proc.plugin", Module: "/proc/stat", Priority: prio, UpdateEvery: 1, Dims: dims,
			})
		}
		c.procs = sys("processes", "processes", "System Processes", "processes", 600,
			dim("running", "", algAbsolute, 1, 1), dim("blocked", "", algAbsolute, 1, 1))
		c.forks = sys("forks", "processes", "Started Processes", "processes/s", 700,
			dim("started", "", algIncremental, 1, 1))
		c.ctxt = sys("ctxt", "processes", "CPU Context Switches", "context switches/s", 800,
			dim("switches", "", algIncremental, 1, 1))
		c.intr = sys("intr", "interrupts", "CPU Interrupts", "interrupts/s", 900,
			dim("interrupts", "", algIncremental, 1, 1))
		c.total.def = cpuDef("system.cpu", "system.cpu", "cpu", "Total CPU utilization", 100)
	}
	if s.hasTotal {
		c.total.update(tk, s.total.f)
	}
	clear(c.seen)
	for _, l := range s.cpus {
		row := c.cores[l.n]
		if row == nil {
			if len(c.cores) >= maxInstances {
				tk.capped("stat", "cpus")
				continue
			}
			row = &cpuRow{def: cpuDef(fmt.Sprintf("cpu.cpu%d", l.n), "cpu.cpu", "utilization", "Core utilization", 1001+l.n)}
			c.cores[l.n] = row
		}
		c.seen[l.n] = true
		row.update(tk, l.f)
	}
	for n, row := range c.cores {
		if !c.seen[n] { // offline
			tk.remove(row.def)
			delete(c.cores, n)
		}
	}
	if s.hasProcs {
		c.raw[0], c.raw[1] = float64(s.running), float64(s.blocked)
		c.procs.emit(tk, c.raw[:2])
	}
	if s.hasP {
		c.raw[0] = float64(s.processes)
		c.forks.emit(tk, c.raw[:1])
	}
	if s.hasCtxt {
		c.raw[0] = float64(s.ctxt)
		c.ctxt.emit(tk, c.raw[:1])
	}
	if s.hasIntr {
		c.raw[0] = float64(s.intr)
		c.intr.emit(tk, c.raw[:1])
	}
	return nil
}
