package collect

import (
	"sync/atomic"
	"syscall"
	"time"

	"peerdns/agent/store"
)

// selfColl stores the agent's own monitoring charts, the ones Netdata
// keeps about itself under "netdata.*" (its "Netdata Monitoring" section,
// plugin "netdata", module "stats"): the agent's CPU and uptime, and for
// each worker group of the collection loop the share of the second it was
// busy, the jobs it ran by type and the time each took
// (netdata.workers_{time,jobs_by_type,busy_time_by_type}_<group>); the
// points the store writes per tier (netdata.db_points_stored: the agent
// has two tiers, Netdata three); the queries it answers and the points
// they read, by who asked (netdata.queries, netdata.db_points_read: the
// data, weights and badge APIs, health, ml, exporters and replication;
// store.Reader).
//
// Groups and job types follow Netdata's plugins: the /proc collectors are
// the "proc" group with Netdata's job names (stat, loadavg, diskstats...),
// /proc/net/dev is "netdev" (a thread of its own in Netdata), diskspace,
// cgroups, idlejitter and timex are groups of their own, and
// the per-process collector (Netdata's separate apps.plugin) is "apps".
// Only the job types the agent runs are dimensions (Netdata lists every
// module it knows, run or not). Not charted: netdata.workers_cpu_* (the
// collection loop is a goroutine, not a thread whose CPU time the kernel
// keeps apart) and Netdata's internals the agent has no counterpart of
// (dbengine, statsd, replication, sqlite).
//
// It runs last in the loop, so the timings are those of the round just
// collected; it reads them from the manager (Manager.round).
type selfColl struct {
	started time.Time
	rusage  func(*syscall.Rusage) error
	server  atomic.Pointer[func() ServerStats] // unset until Manager.SetServerStats

	clients, requests, net, resp *chart
	stored, queries, pointsRead  *chart
	rawReads                     [store.NumReaders]float64
	prevServer                   ServerStats
	haveServer                   bool

	cpu, uptime *chart
	groups      []*workerGroup
	byColl      []jobRef // per collector index of the manager: its group and job
	raw         [2]float64
	ru          syscall.Rusage // reused: passed to rusage, it would escape
}

// workerGroup is one netdata.workers_*_<name> family.
type workerGroup struct {
	name             string
	jobs             []string
	busy             []time.Duration // this round, by job
	time, count, dur *chart
	rawTime          [1]float64
	rawCount, rawDur []float64
}

type jobRef struct{ group, job int }

// ServerStats is what the agent's API server counts about itself, for
// netdata.clients, netdata.requests, netdata.net and
// netdata.response_time: connections open now; requests answered, bytes
// read and written, and time spent answering, all cumulative; and the
// longest answer since the previous call.
type ServerStats struct {
	Clients                     int
	Requests, BytesIn, BytesOut uint64
	ResponseTime, MaxTime       time.Duration
}

// SetServerStats gives the self charts the API server's counters (may be
// called while Run runs; until then those four charts are not made).
func (m *Manager) SetServerStats(f func() ServerStats) {
	for _, c := range m.cs {
		if sc, ok := c.(*selfColl); ok {
			sc.server.Store(&f)
		}
	}
}

// netdataJob maps a collector's name to its Netdata worker group and job
// type.
var netdataJob = map[string][2]string{
	"stat": {"proc", "stat"}, "uptime": {"proc", "uptime"}, "load": {"proc", "loadavg"},
	"entropy": {"proc", "entropy"}, "pressure": {"proc", "pressure"}, "interrupts": {"proc", "interrupts"},
	"softirqs": {"proc", "softirqs"}, "vmstat": {"proc", "vmstat"}, "meminfo": {"proc", "meminfo"},
	"zram": {"proc", "zram"}, "sockstat": {"proc", "sockstat"}, "sockstat6": {"proc", "sockstat6"},
	"netstat": {"proc", "netstat"}, "softnet": {"proc", "softnet"}, "conntrack": {"proc", "conntrack"},
	"disk": {"proc", "diskstats"}, "net": {"netdev", "netdev"}, "ipc": {"proc", "ipc"},
	"diskspace": {"diskspace", "mountpoint"}, "cgroups": {"cgroups", "read"},
	"idlejitter": {"idlejitter", "measurements"}, "timex": {"timex", "clock check"},
	"apps": {"apps", "collect"},
}

func newSelf() *selfColl {
	return &selfColl{started: time.Now(), rusage: func(r *syscall.Rusage) error {
		return syscall.Getrusage(syscall.RUSAGE_SELF, r)
	}}
}

func (c *selfColl) name() string { return "self" }

// layout builds the groups from the manager's collectors (once: the list
// does not change).
func (c *selfColl) layout(names []string) {
	idx := map[string]int{}
	c.byColl = make([]jobRef, len(names))
	for i, n := range names {
		gj, ok := netdataJob[n]
		if !ok {
			c.byColl[i] = jobRef{-1, -1}
			continue
		}
		g, ok := idx[gj[0]]
		if !ok {
			g = len(c.groups)
			idx[gj[0]] = g
			c.groups = append(c.groups, &workerGroup{name: gj[0]})
		}
		wg := c.groups[g]
		j := -1
		for k, name := range wg.jobs {
			if name == gj[1] {
				j = k
			}
		}
		if j < 0 {
			j = len(wg.jobs)
			wg.jobs = append(wg.jobs, gj[1])
		}
		c.byColl[i] = jobRef{g, j}
	}
	for _, wg := range c.groups {
		wg.busy = make([]time.Duration, len(wg.jobs))
		wg.rawCount = make([]float64, len(wg.jobs))
		wg.rawDur = make([]float64, len(wg.jobs))
		family := "workers plugin " + wg.name
		if wg.name == "netdev" {
			family = "workers plugin proc netdev" // Netdata's /proc/net/dev thread
		}
		base := func(id, ctx, title, units, typ string, prio int, dims []store.DimDef) *chart {
			return newChart(&store.ChartDef{
				ID: "netdata." + id + "_" + wg.name, Context: "netdata.workers." + wg.name + "." + ctx, Family: family,
				Title: title, Units: units, ChartType: typ, Plugin: "netdata", Module: "stats",
				Priority: prio, UpdateEvery: 1, Dims: dims,
			})
		}
		jobs := func() []store.DimDef {
			d := make([]store.DimDef, len(wg.jobs))
			for k, j := range wg.jobs {
				d[k] = dim(j, "", algAbsolute, 1, 1)
			}
			return d
		}
		wg.time = base("workers_time", "time", "Netdata Workers Busy Time (100% = all workers busy)", "%", "area", 1000000,
			[]store.DimDef{dim("average", "", algAbsolute, 1, 1)})
		wg.count = base("workers_jobs_by_type", "jobs_started_by_type", "Netdata Workers Jobs Started by Type", "jobs", "stacked", 1000002, jobs())
		wg.dur = base("workers_busy_time_by_type", "time_by_type", "Netdata Workers Busy Time by Type", "ms", "stacked", 1000003, jobs())
	}
	c.cpu = newChart(&store.ChartDef{
		ID: "netdata.server_cpu", Context: "netdata.server_cpu", Family: "netdata", Title: "Netdata CPU usage",
		Units: "milliseconds/s", ChartType: "stacked", Plugin: "netdata", Module: "stats", Priority: 130000, UpdateEvery: 1,
		Dims: []store.DimDef{dim("user", "", algIncremental, 1, 1000), dim("system", "", algIncremental, 1, 1000)},
	})
	api := func(id, title, units, typ string, prio int, dims ...store.DimDef) *chart {
		return newChart(&store.ChartDef{
			ID: "netdata." + id, Context: "netdata." + id, Family: "api", Title: title, Units: units, ChartType: typ,
			Plugin: "netdata", Module: "stats", Priority: prio, UpdateEvery: 1, Dims: dims,
		})
	}
	c.clients = api("clients", "Netdata Web Clients", "connected clients", "line", 130200, dim("clients", "", algAbsolute, 1, 1))
	c.requests = api("requests", "Netdata Web Requests", "requests/s", "line", 130300, dim("requests", "", algIncremental, 1, 1))
	c.net = api("net", "Netdata Network Traffic", "kilobits/s", "area", 130400,
		dim("in", "", algIncremental, 8, 1000), dim("out", "", algIncremental, -8, 1000))
	c.resp = api("response_time", "Netdata API Response Time", "milliseconds/request", "line", 130500,
		dim("average", "", algAbsolute, 1, 1), dim("max", "", algAbsolute, 1, 1))
	c.stored = newChart(&store.ChartDef{
		ID: "netdata.db_points_stored", Context: "netdata.db_points_stored", Family: "queries", Title: "Netdata DB Points Stored",
		Units: "points/s", ChartType: "stacked", Plugin: "netdata", Module: "stats", Priority: 131003, UpdateEvery: 1,
		Dims: []store.DimDef{dim("tier0", "", algIncremental, 1, 1), dim("tier1", "", algIncremental, 1, 1)},
	})
	readers := func(id, title, units string, prio int) *chart {
		dims := make([]store.DimDef, store.NumReaders)
		for r, name := range store.ReaderNames {
			dims[r] = dim(name, "", algIncremental, 1, 1)
		}
		return newChart(&store.ChartDef{
			ID: "netdata." + id, Context: "netdata." + id, Family: "queries", Title: title,
			Units: units, ChartType: "stacked", Plugin: "netdata", Module: "stats", Priority: prio, UpdateEvery: 1, Dims: dims,
		})
	}
	c.queries = readers("queries", "Netdata DB Queries", "queries/s", 131000)
	c.pointsRead = readers("db_points_read", "Netdata DB Points Query Read", "points/s", 131001)
	c.uptime = newChart(&store.ChartDef{
		ID: "netdata.uptime", Context: "netdata.uptime", Family: "netdata", Title: "Netdata uptime",
		Units: "seconds", ChartType: "line", Plugin: "netdata", Module: "stats", Priority: 130100, UpdateEvery: 1,
		Dims: []store.DimDef{dim("uptime", "", algAbsolute, 1, 1)},
	})
}

func (c *selfColl) collect(tk *tick) error {
	m := tk.m
	if c.byColl == nil {
		names := make([]string, len(m.cs))
		for i, cl := range m.cs {
			names[i] = cl.name()
		}
		c.layout(names)
	}
	for _, wg := range c.groups {
		clear(wg.busy)
		clear(wg.rawCount)
	}
	for i, d := range m.round {
		r := c.byColl[i] // layout was built from m.cs, which never changes
		if r.group < 0 {
			continue // not a collector Netdata has a worker job for
		}
		wg := c.groups[r.group]
		wg.busy[r.job] += d
		wg.rawCount[r.job]++
	}
	for _, wg := range c.groups {
		var total time.Duration
		for k, d := range wg.busy {
			total += d
			wg.rawDur[k] = float64(d) / float64(time.Millisecond)
		}
		// One worker per group: busy share of the second.
		wg.rawTime[0] = 100 * float64(total) / float64(time.Second)
		wg.time.emit(tk, wg.rawTime[:])
		wg.count.emit(tk, wg.rawCount)
		wg.dur.emit(tk, wg.rawDur)
	}
	if err := c.rusage(&c.ru); err == nil {
		ru := &c.ru
		c.raw[0] = float64(ru.Utime.Sec)*1e6 + float64(ru.Utime.Usec)
		c.raw[1] = float64(ru.Stime.Sec)*1e6 + float64(ru.Stime.Usec)
		c.cpu.emit(tk, c.raw[:2])
	}
	c.raw[0] = float64(int64(tk.now.Sub(c.started) / time.Second))
	c.uptime.emit(tk, c.raw[:1])
	t0, t1 := m.db.PointsStored()
	c.raw[0], c.raw[1] = float64(t0), float64(t1)
	c.stored.emit(tk, c.raw[:2])
	q, p := m.db.Reads()
	for r := range q {
		c.rawReads[r] = float64(q[r])
	}
	c.queries.emit(tk, c.rawReads[:])
	for r := range p {
		c.rawReads[r] = float64(p[r])
	}
	c.pointsRead.emit(tk, c.rawReads[:])
	if f := c.server.Load(); f != nil {
		c.collectServer(tk, (*f)())
	}
	return nil
}

// collectServer stores the API server's charts from its counters.
func (c *selfColl) collectServer(tk *tick, st ServerStats) {
	c.raw[0] = float64(st.Clients)
	c.clients.emit(tk, c.raw[:1])
	c.raw[0] = float64(st.Requests)
	c.requests.emit(tk, c.raw[:1])
	c.raw[0], c.raw[1] = float64(st.BytesIn), float64(st.BytesOut)
	c.net.emit(tk, c.raw[:2])
	prev := c.prevServer
	c.prevServer = st
	if !c.haveServer {
		c.haveServer = true
		return
	}
	// Average over the requests of the last second (0 when there were
	// none, as Netdata shows), and the longest of them.
	c.raw[0] = 0
	if n := st.Requests - prev.Requests; n > 0 && st.ResponseTime >= prev.ResponseTime {
		c.raw[0] = float64(st.ResponseTime-prev.ResponseTime) / float64(n) / float64(time.Millisecond)
	}
	c.raw[1] = float64(st.MaxTime) / float64(time.Millisecond)
	c.resp.emit(tk, c.raw[:2])
}
