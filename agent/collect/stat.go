package collect

import (
	"bytes"
	"fmt"

	"peerdns/agent/store"
)

// statCounters are the /proc/stat lines gopsutil does not expose: it reads
// ctxt and procs_* in load.Misc but not intr or processes (forks), so one
// direct read serves all four charts.
type statCounters struct {
	ctxt, intr, processes  uint64
	running, blocked       uint64
	hasCtxt, hasIntr, hasP bool
	hasProcs               bool
}

// parseStat extracts the counters from the text of /proc/stat.
func parseStat(b []byte) (statCounters, error) {
	var s statCounters
	for len(b) > 0 {
		var line []byte
		line, b = nextLine(b)
		if len(line) == 0 || line[0] == 'c' && bytes.HasPrefix(line, []byte("cpu")) {
			continue
		}
		// Only the first two fields matter; the intr line has thousands.
		key, rest, ok := bytes.Cut(line, []byte{' '})
		if !ok {
			continue
		}
		val, _, _ := bytes.Cut(bytes.TrimLeft(rest, " "), []byte{' '})
		v, err := parseUint(val)
		if err != nil {
			return s, fmt.Errorf("/proc/stat %s: %w", key, err)
		}
		switch string(key) {
		case "ctxt":
			s.ctxt, s.hasCtxt = v, true
		case "intr":
			s.intr, s.hasIntr = v, true
		case "processes":
			s.processes, s.hasP = v, true
		case "procs_running":
			s.running, s.hasProcs = v, true
		case "procs_blocked":
			s.blocked = v
		}
	}
	if !s.hasCtxt && !s.hasIntr && !s.hasP && !s.hasProcs {
		return s, fmt.Errorf("/proc/stat: no ctxt, intr, processes or procs_running line")
	}
	return s, nil
}

// statColl stores system.processes, system.forks, system.ctxt and
// system.intr.
type statColl struct {
	read                     func() ([]byte, error)
	done                     func()
	procs, forks, ctxt, intr *chart
	raw                      [2]float64
}

func newStat() *statColl {
	r := newProcReader("/proc/stat")
	return &statColl{read: r.read, done: r.close}
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
	s, err := parseStat(b)
	if err != nil {
		return err
	}
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
