package api

import (
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"peerdns/agent/health"
	"peerdns/agent/store"
	"peerdns/transport/identity"
)

// refDir holds the Netdata 1.37 responses the tests compare with (captured
// from a real Netdata, see its README).
const refDir = "testdata/netdata-1.37"

// readRef reads a reference response; a missing file fails the test.
func readRef(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(refDir, name))
	if err != nil {
		t.Fatalf("reference response: %v", err)
	}
	return b
}

// fixedAlerts is a health source with known alerts and transitions, for
// checking the alert endpoints' layouts and filters. The running-agent
// test in package agent uses the real engine.
type fixedAlerts struct {
	alerts []health.Alert
	trans  []health.Transition
}

func (f *fixedAlerts) Alerts() []health.Alert { return f.alerts }
func (f *fixedAlerts) Transitions(after uint64) []health.Transition {
	var out []health.Transition
	for _, t := range f.trans {
		if t.UniqueID > after {
			out = append(out, t)
		}
	}
	return out
}

func dimsOf(ids ...string) []store.DimDef {
	var d []store.DimDef
	for _, id := range ids {
		d = append(d, store.DimDef{ID: id, Name: id, Algorithm: "absolute", Multiplier: 1, Divisor: 1})
	}
	return d
}

// testCharts are system charts shaped like Netdata's (ids, contexts,
// families, units, hidden idle, renamed dimension, negative dimension).
func testCharts() []*store.ChartDef {
	cpu := &store.ChartDef{ID: "system.cpu", Name: "system.cpu", Type: "system", Context: "system.cpu", Family: "cpu",
		Title: "Total CPU utilization", Units: "percentage", ChartType: "stacked", Plugin: "proc.plugin", Module: "/proc/stat",
		Priority: 100, UpdateEvery: 1, Dims: dimsOf("guest_nice", "guest", "steal", "softirq", "irq", "user", "system", "nice", "iowait", "idle")}
	cpu.Dims[9].Hidden = true
	load := &store.ChartDef{ID: "system.load", Name: "system.load", Type: "system", Context: "system.load", Family: "load",
		Title: "System Load Average", Units: "load", ChartType: "line", Plugin: "proc.plugin", Module: "/proc/loadavg",
		Priority: 100, UpdateEvery: 1, Dims: dimsOf("load1", "load5", "load15")}
	space := &store.ChartDef{ID: "disk_space._", Name: "disk_space._", Type: "disk_space", Context: "disk.space", Family: "/",
		Title: "Disk Space Usage", Units: "GiB", ChartType: "stacked", Plugin: "diskspace.plugin", Priority: 2023, UpdateEvery: 1,
		Dims: dimsOf("avail", "used", "reserved_for_root")}
	space.Dims[2].Name = "reserved for root"
	disk := &store.ChartDef{ID: "disk.vda", Name: "disk.vda", Type: "disk", Context: "disk.io", Family: "vda",
		Title: "Disk I/O Bandwidth", Units: "KiB/s", ChartType: "area", Plugin: "proc.plugin", Module: "/proc/diskstats",
		Priority: 2000, UpdateEvery: 1, Dims: dimsOf("reads", "writes")}
	disk.Dims[1].Multiplier = -1
	c0 := &store.ChartDef{ID: "cpu.cpu0", Name: "cpu.cpu0", Type: "cpu", Context: "cpu.cpu", Family: "utilization",
		Title: "Core utilization", Units: "percentage", ChartType: "stacked", Plugin: "proc.plugin", Module: "/proc/stat",
		Priority: 1000, UpdateEvery: 1, Dims: dimsOf("user", "system")}
	c1 := &store.ChartDef{ID: "cpu.cpu1", Name: "cpu.cpu1", Type: "cpu", Context: "cpu.cpu", Family: "utilization",
		Title: "Core utilization", Units: "percentage", ChartType: "stacked", Plugin: "proc.plugin", Module: "/proc/stat",
		Priority: 1001, UpdateEvery: 1, Dims: dimsOf("user", "system")}
	ram := &store.ChartDef{ID: "system.ram", Name: "system.ram", Type: "system", Context: "system.ram", Family: "ram",
		Title: "System RAM", Units: "MiB", ChartType: "stacked", Plugin: "proc.plugin", Module: "/proc/meminfo",
		Priority: 200, UpdateEvery: 1, Dims: dimsOf("free", "used", "cached", "buffers")}
	return []*store.ChartDef{cpu, load, space, disk, c0, c1, ram}
}

// value is the known series every test chart holds: dimension d of a
// chart at second t. system.cpu's dims sum (with idle) to 100.
func value(chart string, d int, t int64) float64 {
	switch chart {
	case "system.cpu":
		if d == 9 {
			return 100 - 9*float64(t%5)
		}
		return float64(t % 5)
	case "disk.vda":
		if d == 1 {
			return -float64(t % 7)
		}
	}
	return float64(d+1) * 0.5 * float64(1+t%3)
}

type testEnv struct {
	url    string
	now    time.Time
	db     *store.DB
	srv    *Server
	export string
}

// newTestEnv starts the API on 127.0.0.1:0 over a real store holding 600
// seconds of the known series, ending one second before the fixed now.
// opts change the server's Options before it starts.
func newTestEnv(t testing.TB, opts ...func(*Options)) *testEnv {
	t.Helper()
	dir := t.TempDir()
	db, err := store.Open(store.Config{Dir: filepath.Join(dir, "agent")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	now := time.Now().Truncate(time.Second)
	for _, c := range testCharts() {
		if err := db.Register(c); err != nil {
			t.Fatal(err)
		}
		for ts := now.Unix() - 600; ts < now.Unix(); ts++ {
			vals := make([]float64, len(c.Dims))
			for d := range vals {
				vals[d] = value(c.ID, d, ts)
			}
			if err := db.Append(c.ID, ts, vals); err != nil {
				t.Fatal(err)
			}
		}
	}
	id, err := identity.LoadOrCreate(filepath.Join(dir, "agent", "identity.key"))
	if err != nil {
		t.Fatal(err)
	}
	last := uint64(0)
	alerts := &fixedAlerts{
		alerts: []health.Alert{
			{ID: 1, Name: "10min_cpu_usage", Chart: "system.cpu", Context: "system.cpu", Family: "cpu", Class: "Utilization", Component: "CPU", Type: "System",
				Units: "%", Info: "average CPU utilization over the last 10 minutes", Status: health.StatusWarning, Value: 80.5,
				Warn: "$this > 75", Crit: "$this > 85", LastStatusChange: now.Unix() - 30, LastUpdated: now.Unix() - 1, UpdateEvery: 60,
				LookupDimensions: "user,system,softirq,irq,guest", LookupMethod: "average", LookupAfter: -600, LookupOptions: "unaligned"},
			{ID: 2, Name: "ram_in_use", Chart: "system.ram", Context: "system.ram", Family: "ram", Class: "Utilization", Component: "Memory", Type: "System",
				Units: "%", Info: "system memory utilization", Status: health.StatusClear, Value: 0.75,
				Warn: "$this > 80", Crit: "$this > 90", LastStatusChange: now.Unix() - 300, LastUpdated: now.Unix() - 1, UpdateEvery: 10,
				Calc: "$used * 100 / ($used + $cached + $free + $buffers)"},
			{ID: 3, Name: "load_average_15", Chart: "system.load", Context: "system.load", Family: "load", Status: health.StatusUndefined,
				Units: "load", Value: math.NaN(), UpdateEvery: 60, Calc: "$load15"},
		},
	}
	for i, st := range []health.Status{health.StatusClear, health.StatusWarning} {
		last++
		old := health.StatusUninitialized
		if i > 0 {
			old = health.StatusClear
		}
		alerts.trans = append(alerts.trans, health.Transition{UniqueID: last, AlertID: 1, Name: "10min_cpu_usage", Chart: "system.cpu",
			Context: "system.cpu", Family: "cpu", When: now.Unix() - 300 + int64(i)*270, OldStatus: old, NewStatus: st,
			OldValue: math.NaN(), NewValue: 70 + float64(i)*10.5, Units: "%", Info: "average CPU utilization"})
	}
	env := &testEnv{now: now, db: db, export: filepath.Join(dir, "exports")}
	o := Options{DB: db, Health: alerts, Identity: id, ExportDir: env.export, Journal: true,
		DataDir: filepath.Join(dir, "agent"), Now: func() time.Time { return now }}
	for _, f := range opts {
		f(&o)
	}
	srv, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	env.srv = srv
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := srv.Serve(ln); err != nil {
			t.Errorf("Serve: %v", err)
		}
	}()
	t.Cleanup(func() { // Shutdown also closes ln: Serve returns even if it had not started
		if err := srv.Shutdown(); err != nil {
			t.Errorf("Shutdown: %v", err)
		}
		<-done
	})
	env.url = "http://" + ln.Addr().String()
	return env
}

// client is the tests' HTTP client. Its bound is for a hang: the large
// answers some tests ask for (12 MB of JSON) take 3-5 s to build under
// the race detector alone, and two or three times that beside the rest
// of the suite on two cores (testutil.Client's 10 s was too short).
var client = &http.Client{Timeout: 60 * time.Second}

type resp struct {
	status int
	header http.Header
	body   []byte
}

func (e *testEnv) do(t *testing.T, method, path string, hdr map[string]string) resp {
	t.Helper()
	req, err := http.NewRequest(method, e.url+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range hdr {
		if k == "Host" {
			req.Host = v // net/http sends req.Host, not a Host header
			continue
		}
		req.Header.Set(k, v)
	}
	r, err := client.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer r.Body.Close()
	b, err := io.ReadAll(r.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp{r.StatusCode, r.Header, b}
}

func (e *testEnv) get(t *testing.T, path string) resp { return e.do(t, "GET", path, nil) }

func trimBody(b []byte) string { return strings.TrimSpace(string(b)) }

// addChart registers the chart name ("wide.chart": type "wide",
// context name) with dims dimensions (d000, d001, ... or d0000, ... from
// 1,000 on) and fills its last seconds seconds with value(second,
// dimension).
func addChart(t *testing.T, env *testEnv, name string, dims, seconds int, value func(ts int64, d int) float64) {
	t.Helper()
	typ, _, _ := strings.Cut(name, ".")
	c := &store.ChartDef{ID: name, Name: name, Type: typ, Context: name, Family: typ, Units: "x", ChartType: "line", UpdateEvery: 1}
	format := "d%03d"
	if dims > 1000 {
		format = "d%04d"
	}
	for d := 0; d < dims; d++ {
		id := fmt.Sprintf(format, d)
		c.Dims = append(c.Dims, store.DimDef{ID: id, Name: id, Algorithm: "absolute", Multiplier: 1, Divisor: 1})
	}
	if err := env.db.Register(c); err != nil {
		t.Fatal(err)
	}
	vals := make([]float64, dims)
	for ts := env.now.Unix() - int64(seconds); ts < env.now.Unix(); ts++ {
		for d := range vals {
			vals[d] = value(ts, d)
		}
		if err := env.db.Append(c.ID, ts, vals); err != nil {
			t.Fatal(err)
		}
	}
}
