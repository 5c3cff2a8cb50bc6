package collect

import (
	"strings"
	"syscall"
	"testing"
	"time"

	"peerdns/agent/store"
	"peerdns/agent/store/storetest"
)

// namedColl is a collector that only has a name and takes d to collect.
type namedColl struct {
	n string
	d time.Duration
}

func (c namedColl) name() string { return c.n }
func (c namedColl) collect(*tick) error {
	if c.d > 0 {
		time.Sleep(c.d) // stands for the work of a slow collector
	}
	return nil
}

// queryColl reads netdata.uptime's last ten seconds each round, counted
// as health's reads.
type queryColl struct{}

func (queryColl) name() string { return "query" }
func (queryColl) collect(tk *tick) error {
	_, _ = tk.m.db.QueryFor(store.ReadHealth, "netdata.uptime", 0, tk.now.Unix()-9, tk.now.Unix())
	return nil
}

// The self charts: jobs and busy time by Netdata worker group and job
// type, the busy share, the agent's CPU from getrusage and its uptime,
// the store's points written and its queries and points read by reader.
func TestSelfCharts(t *testing.T) {
	self := newSelf()
	self.started = epoch.Add(-10 * time.Second)
	calls := 0
	self.rusage = func(r *syscall.Rusage) error {
		calls++
		r.Utime = syscall.Timeval{Sec: int64(calls), Usec: 0}         // 1 s of user CPU per round
		r.Stime = syscall.Timeval{Sec: 0, Usec: int64(calls) * 250e3} // 250 ms of system CPU per round
		return nil
	}
	db := storetest.New(t, store.Config{})
	run(t, db, 3, namedColl{n: "stat"}, namedColl{n: "load", d: 20 * time.Millisecond}, namedColl{n: "diskspace"}, namedColl{n: "unknown"}, queryColl{}, self)

	checkDef(t, db, "netdata.workers_jobs_by_type_proc", "netdata.workers.proc.jobs_started_by_type", "workers plugin proc", "jobs", "stacked", 1000002, "stat", "loadavg")
	checkDef(t, db, "netdata.workers_busy_time_by_type_diskspace", "netdata.workers.diskspace.time_by_type", "workers plugin diskspace", "ms", "stacked", 1000003, "mountpoint")
	checkPoints(t, db, "netdata.workers_jobs_by_type_proc", [][]float64{{1, 1}, {1, 1}, {1, 1}})
	for i, p := range points(t, db, "netdata.workers_busy_time_by_type_proc") {
		if p[1] < 20 || p[1] > 1000 {
			t.Errorf("round %d: loadavg busy %v ms, want at least the 20 ms it slept", i, p[1])
		}
	}
	for i, p := range points(t, db, "netdata.workers_time_proc") {
		if p[0] < 2 || p[0] > 100 {
			t.Errorf("round %d: proc busy %v%%, want at least 2%% (20 ms of a second)", i, p[0])
		}
	}
	// Incremental: no point for the first round, then 1,000 and 250 ms/s.
	checkPoints(t, db, "netdata.server_cpu", [][]float64{{1000, 250}, {1000, 250}})
	checkPoints(t, db, "netdata.uptime", [][]float64{{10}, {11}, {12}})
	// Tier-0 points per second, read after uptime's append: the workers
	// charts (proc 1 + 2 + 2, diskspace 1 + 1 + 1), uptime 1, and from the
	// second round server_cpu 2; from the third also the previous round's
	// db_points_stored 2, queries 7 and db_points_read 7. No minute
	// closed: tier 1 is 0.
	checkPoints(t, db, "netdata.db_points_stored", [][]float64{{11, 0}, {27, 0}})
	// One health query a second from the second round (in the first,
	// netdata.uptime did not exist yet), reading uptime's points.
	checkPoints(t, db, "netdata.queries", [][]float64{{0, 0, 0, 1, 0, 0, 0}, {0, 0, 0, 1, 0, 0, 0}})
	for i, p := range points(t, db, "netdata.db_points_read") {
		if p[store.ReadHealth] < 1 || p[store.ReadData] != 0 {
			t.Errorf("round %d: points read %v, want some by health and none by data", i+2, p)
		}
	}
	for _, c := range db.Charts() {
		if strings.Contains(c.ID, "unknown") || strings.HasSuffix(c.ID, "_self") {
			t.Errorf("chart %s: a collector without a Netdata job is not charted", c.ID)
		}
	}
}

// Every self chart the agent makes is Netdata's: same context, family,
// title, units, type, priority, plugin and module, and dimensions among
// the job types Netdata lists.
func TestSelfChartsMatchNetdata(t *testing.T) {
	ref := refCharts(t, "testdata/netdata137_self_charts.json")
	db := storetest.New(t, store.Config{})
	var cs []collector
	for name := range netdataJob {
		cs = append(cs, namedColl{n: name})
	}
	m := newManager(db, nil, append(cs, newSelf())...)
	t.Cleanup(m.close)
	m.SetServerStats(func() ServerStats { return ServerStats{} })
	for i := range 2 {
		now := epoch.Add(time.Duration(i) * time.Second)
		m.Collect(now.Unix(), now)
	}
	seen := 0
	for _, c := range db.Charts() {
		if !strings.HasPrefix(c.ID, "netdata.") || strings.HasSuffix(c.ID, "_apps") {
			continue // apps: Netdata's apps.plugin is its own process, with no workers charts
		}
		r, ok := ref.Charts[c.ID]
		if !ok {
			t.Errorf("%s: not a chart Netdata has", c.ID)
			continue
		}
		seen++
		if c.Context != r.Context || c.Family != r.Family || c.Title != r.Title || c.Units != r.Units ||
			c.ChartType != r.ChartType || c.Priority != r.Priority || c.Plugin != r.Plugin || c.Module != r.Module {
			t.Errorf("%s = %+v, want %+v", c.ID, c, r)
		}
		netdata := map[[2]string]bool{}
		for _, d := range r.Dimensions {
			netdata[d] = true
		}
		for _, d := range c.Dims {
			if !netdata[[2]string{d.ID, d.Name}] {
				t.Errorf("%s: dimension %s/%s is not one of Netdata's %v", c.ID, d.ID, d.Name, r.Dimensions)
			}
		}
	}
	if seen != len(ref.Charts) {
		t.Errorf("%d of Netdata's %d self charts made", seen, len(ref.Charts))
	}
}

// The API server's charts follow its counters: connections, requests/s,
// kilobits/s in and (negative) out, and the average and longest answer of
// the last second.
func TestSelfServerCharts(t *testing.T) {
	self := newSelf()
	db := storetest.New(t, store.Config{})
	m := newManager(db, nil, self)
	t.Cleanup(m.close)
	rounds := []ServerStats{
		{Clients: 2, Requests: 100, BytesIn: 10_000, BytesOut: 100_000, ResponseTime: time.Second},
		{Clients: 3, Requests: 150, BytesIn: 12_000, BytesOut: 150_000, ResponseTime: time.Second + 100*time.Millisecond, MaxTime: 5 * time.Millisecond},
		{Clients: 1, Requests: 150, BytesIn: 12_000, BytesOut: 150_000, ResponseTime: time.Second + 100*time.Millisecond},
	}
	i := 0
	m.SetServerStats(func() ServerStats { return rounds[i] })
	for ; i < len(rounds); i++ {
		now := epoch.Add(time.Duration(i) * time.Second)
		m.Collect(now.Unix(), now)
	}
	checkPoints(t, db, "netdata.clients", [][]float64{{2}, {3}, {1}})
	checkPoints(t, db, "netdata.requests", [][]float64{{50}, {0}})
	checkPoints(t, db, "netdata.net", [][]float64{{16, -400}, {0, 0}})       // 2,000 B and 50,000 B in a second, in kilobits
	checkPoints(t, db, "netdata.response_time", [][]float64{{2, 5}, {0, 0}}) // 100 ms over 50 requests; max 5 ms
}
