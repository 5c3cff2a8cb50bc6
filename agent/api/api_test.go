package api

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"encoding/xml"
	"fmt"
	"io"
	"math"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/prometheus/common/expfmt"
	"github.com/valyala/fasthttp"

	"peerdns/agent/store"
)

// dynamicKeys are objects keyed by names (charts, dimensions, alarms...):
// their entries are compared by the shape of one value, not by key.
var dynamicKeys = map[string]bool{
	"charts": true, "contexts": true, "alarms": true, "dimensions": true, "host_labels": true,
	"chart_variables": true, "functions": true, "chart_labels": true, "family_variables": true,
	"host_variables": true, "labels": true, "": true,
}

// internalKeys are Netdata's rrdcontext queue internals in
// context?options=full; they describe Netdata's worker queues and have no
// meaning for this agent, so they are not served (see README).
var internalKeys = map[string]bool{
	"pp_reasons": true, "pp_last_queued": true, "pp_last_dequeued": true, "pp_executed": true,
	"queued_reasons": true, "last_queued": true, "last_dequeued": true, "scheduled_dispatch": true,
	"dispatches": true, "hub_version": true,
}

// sameShape checks that every key of the reference object exists in ours
// with the same JSON type, recursively; null on either side matches any
// type (a value can be undefined at a given moment).
func sameShape(t *testing.T, path string, ref, got any, dynamic bool) {
	t.Helper()
	for _, d := range shapeDiff(path, ref, got, dynamic) {
		t.Error(d)
	}
}

// shapeDiff lists the differences. In objects keyed by names (dynamic),
// each of our entries must match some reference entry: Netdata's entries
// differ among themselves (calc rules vs lookup rules), so each of ours is
// compared with the reference entry it is closest to.
func shapeDiff(path string, ref, got any, dynamic bool) []string {
	if ref == nil || got == nil {
		return nil
	}
	var out []string
	switch r := ref.(type) {
	case map[string]any:
		g, ok := got.(map[string]any)
		if !ok {
			return []string{fmt.Sprintf("%s: object expected, got %T", path, got)}
		}
		if dynamic {
			if len(r) == 0 || len(g) == 0 {
				return nil
			}
			for _, gk := range sortedKeys(g) {
				var best []string
				for i, rk := range sortedKeys(r) {
					if i >= 50 {
						break
					}
					d := shapeDiff(path+"."+gk, r[rk], g[gk], false)
					if best == nil || len(d) < len(best) {
						best = d
					}
					if len(d) == 0 {
						break
					}
				}
				out = append(out, best...)
			}
			return out
		}
		for k, rv := range r {
			if internalKeys[k] {
				continue
			}
			gv, ok := g[k]
			if !ok {
				out = append(out, fmt.Sprintf("%s: key %q missing", path, k))
				continue
			}
			out = append(out, shapeDiff(path+"."+k, rv, gv, dynamicKeys[k])...)
		}
	case []any:
		g, ok := got.([]any)
		if !ok {
			return []string{fmt.Sprintf("%s: array expected, got %T", path, got)}
		}
		if len(r) > 0 && len(g) > 0 {
			out = append(out, shapeDiff(path+"[0]", r[0], g[0], false)...)
		}
	default:
		if fmt.Sprintf("%T", ref) != fmt.Sprintf("%T", got) {
			out = append(out, fmt.Sprintf("%s: %T expected, got %T (%v)", path, ref, got, got))
		}
	}
	return out
}

func sortedKeys(m map[string]any) []string {
	k := make([]string, 0, len(m))
	for n := range m {
		k = append(k, n)
	}
	sort.Strings(k)
	return k
}

func decode(t *testing.T, what string, b []byte) any {
	t.Helper()
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatalf("%s is not JSON: %v\n%.400s", what, err, b)
	}
	return v
}

// TestLayoutsAgainstNetdata requests each path that has a Netdata capture
// and compares keys and types with the capture.
func TestLayoutsAgainstNetdata(t *testing.T) {
	env := newTestEnv(t)
	cases := []struct{ path, ref string }{
		{"/api/v1/info", "api_v1_info.json"},
		{"/api/v1/charts", "api_v1_charts.json"},
		{"/api/v1/chart?chart=system.cpu", "api_v1_chart_system.cpu.json"},
		{"/api/v1/chart?chart=system.load", "api_v1_chart_system.load.json"},
		{"/api/v1/chart?chart=disk_space._", "api_v1_chart_disk_space._.json"},
		{"/api/v1/data?chart=system.cpu&after=-60&points=10", "api_v1_data_system.cpu_after-60_points10.json"},
		{"/api/v1/data?chart=system.cpu&after=-60&points=10&options=jsonwrap", "api_v1_data_system.cpu_after-60_points10_options-jsonwrap.json"},
		{"/api/v1/data?chart=system.cpu&after=-60&points=10&format=array", "api_v1_data_system.cpu_after-60_points10_format-array.json"},
		{"/api/v1/data?chart=system.cpu&after=-60&points=10&format=array&options=jsonwrap", "api_v1_data_system.cpu_after-60_points10_format-array_options-jsonwrap.json"},
		{"/api/v1/data?chart=system.cpu&after=-60&points=10&format=csv&options=jsonwrap", "api_v1_data_system.cpu_after-60_points10_format-csv_options-jsonwrap.json"},
		{"/api/v1/data?chart=system.cpu&after=-60&points=10&options=objectrows", "api_v1_data_system.cpu_after-60_points10_options-objectrows.json"},
		{"/api/v1/data?context=system.cpu&after=-60&points=10&options=jsonwrap", "api_v1_data_context-system.cpu_after-60_points10_options-jsonwrap.json"},
		{"/api/v1/data?chart=system.load&after=-30&points=5&options=jsonwrap", "api_v1_data_system.load_after-30_points5_options-jsonwrap.json"},
		{"/api/v1/data?chart=disk_space._&after=-30&points=5", "api_v1_data_disk_space.__after-30_points5.json"},
		{"/api/v1/contexts", "api_v1_contexts.json"},
		{"/api/v1/context?context=system.cpu", "api_v1_context_system.cpu.json"},
		{"/api/v1/context?context=system.cpu&options=full", "api_v1_context_system.cpu_options-full.json"},
		{"/api/v1/allmetrics?format=json", "api_v1_allmetrics_json.json"},
		{"/api/v1/alarms", "api_v1_alarms.json"},
		{"/api/v1/alarms?all", "api_v1_alarms_all.json"},
		{"/api/v1/alarm_log", "api_v1_alarm_log.json"},
		{"/api/v1/alarms_values?all", "api_v1_alarms_values_all.json"},
		{"/api/v1/alarm_count", "api_v1_alarm_count.json"},
		{"/api/v1/alarm_variables?chart=system.cpu", "api_v1_alarm_variables_system.cpu.json"},
	}
	for _, c := range cases {
		t.Run(c.path, func(t *testing.T) {
			ref := readRef(t, c.ref)
			r := env.get(t, c.path)
			if r.status != 200 {
				t.Fatalf("status %d: %s", r.status, r.body)
			}
			if ct := r.header.Get("Content-Type"); ct != "application/json; charset=utf-8" {
				t.Errorf("Content-Type = %q", ct)
			}
			if o := r.header.Get("Access-Control-Allow-Origin"); o != "*" {
				t.Errorf("Access-Control-Allow-Origin = %q", o)
			}
			// allmetrics?format=json is keyed by chart id at the top.
			top := strings.Contains(c.path, "allmetrics")
			sameShape(t, "", decode(t, "reference", ref), decode(t, c.path, r.body), top)
		})
	}
}

// TestNetdataErrors compares error statuses and bodies with Netdata's.
func TestNetdataErrors(t *testing.T) {
	env := newTestEnv(t)
	cases := []struct {
		path   string
		status int
		ref    string // reference body file; "" = use body
		body   string
	}{
		{"/api/v1/chart", 400, "api_v1_chart_noparam.txt", ""},
		{"/api/v1/chart?chart=no.such_chart", 404, "api_v1_chart_nonexistent.txt", ""},
		{"/api/v1/data", 400, "api_v1_data_noparam.txt", ""},
		{"/api/v1/data?chart=no.such_chart&after=-60&points=10", 404, "api_v1_data_nonexistent.txt", ""},
		{"/api/v1/nosuchcmd", 404, "api_v1_nosuchcmd.txt", ""},
		{"/api/v1/", 404, "api_v1_slash.txt", ""},
		{"/api/v1/allmetrics?format=bogus", 400, "api_v1_allmetrics_format-bogus.txt", ""},
		{"/api/v1/badge.svg", 400, "api_v1_badge_noparam.svg", ""},
		{"/api/v3/nosuchcmd", 404, "", "Unsupported v3 API command: nosuchcmd"},
		{"/api/v9/info", 404, "", "Unsupported API version: v9"},
		{"/api/v3/context", 400, "", "No context is given at the request."},
		{"/api/v3/context?context=no.such", 404, "", "Context is not found: no.such"},
		{"/api/v3/variable", 400, "", "No chart id is given at the request."},
		{"/api/v3/variable?chart=nope", 404, "", "Chart is not found: nope"},
		{"/api/v1/q", 400, "", "No search text is given at the request: use q="},
		{"/api/v1/data?chart=system.cpu&dimensions=nosuch", 404, "", "No metrics where matched to query."},
		{"/api/v1/data?context=no.such.context", 404, "", "No metrics where matched to query."},
		{"/nosuchfile", 404, "", "Not found: /nosuchfile"},
	}
	for _, c := range cases {
		t.Run(c.path, func(t *testing.T) {
			want := c.body
			if c.ref != "" {
				want = strings.TrimSpace(string(readRef(t, c.ref)))
			}
			r := env.get(t, c.path)
			if r.status != c.status || trimBody(r.body) != want {
				t.Fatalf("GET %s = %d %q, want %d %q", c.path, r.status, r.body, c.status, want)
			}
			if ct := r.header.Get("Content-Type"); ct != "text/plain; charset=utf-8" {
				t.Errorf("Content-Type = %q", ct)
			}
			if r.header.Get("Access-Control-Allow-Origin") != "*" {
				t.Errorf("error response without CORS header")
			}
		})
	}
}

// TestBadQueryParameters: every malformed data query is a 400 with a
// message that names the parameter, never a panic or a 500.
func TestBadQueryParameters(t *testing.T) {
	env := newTestEnv(t)
	cases := []struct{ q, want string }{
		{"after=1795313790&before=1795313700", "after"},
		{"points=0", "points"},
		{"points=-3", "points"},
		{"points=99999999999", "points"},
		{"points=ten", "points"},
		{"group=bogus", "group"},
		{"format=bogus", "format"},
		{"tier=7", "tier"},
		{"tier=-1", "tier"},
		{"after=abc", "after"},
		{"before=1e99", "before"},
	}
	for _, ver := range []string{"v1", "v2", "v3"} {
		for _, c := range cases {
			if ver != "v1" && c.q == "points=0" {
				continue // v2: every stored point of the window (TestV2Points)
			}
			path := "/api/" + ver + "/data?chart=system.cpu&" + c.q
			r := env.get(t, path)
			if r.status != 400 || !strings.Contains(string(r.body), c.want) {
				t.Errorf("GET %s = %d %q, want 400 naming %q", path, r.status, r.body, c.want)
			}
		}
	}
	for _, path := range []string{
		"/api/v1/badge.svg?chart=system.cpu&precision=x",
		"/api/v1/badge.svg?chart=system.cpu&points=0",
		"/api/v1/allmetrics?format=prometheus&source=as-collected",
		"/api/v3/export?format=xml",
		"/api/v1/alarm_count?status=PURPLE",
		"/api/v1/alarm_log?after=-1",
		"/api/v3/q?q=cpu&limit=0",
	} {
		if r := env.get(t, path); r.status != 400 {
			t.Errorf("GET %s = %d %q, want 400", path, r.status, r.body)
		}
	}
}

// TestDataValues checks query results against the known series.
func TestDataValues(t *testing.T) {
	env := newTestEnv(t)
	last := env.now.Unix() - 1
	// Latest 10 seconds, one point each: user is t%5.
	r := env.get(t, "/api/v1/data?chart=system.cpu&after=-10&points=10&dimensions=user&options=flip")
	var body struct {
		Labels []string    `json:"labels"`
		Data   [][]float64 `json:"data"`
	}
	if err := json.Unmarshal(r.body, &body); err != nil {
		t.Fatalf("%v: %s", err, r.body)
	}
	if len(body.Data) != 10 || !equalStrings(body.Labels, []string{"time", "user"}) {
		t.Fatalf("data = %s", r.body)
	}
	for _, row := range body.Data {
		if ts := int64(row[0]); row[1] != float64(ts%5) {
			t.Errorf("user at %d = %v, want %v", ts, row[1], ts%5)
		}
	}
	if int64(body.Data[9][0]) != last {
		t.Errorf("newest row %v, want %d (flip puts it last)", body.Data[9][0], last)
	}
	// Group max over 5 seconds of t%5 is always 4, min is 0, sum 10, average 2.
	for g, want := range map[string]float64{"max": 4, "min": 0, "sum": 10, "average": 2, "median": 2} {
		r := env.get(t, "/api/v1/data?chart=system.cpu&after=-100&points=20&dimensions=user&format=array&group="+g)
		var arr []float64
		if err := json.Unmarshal(r.body, &arr); err != nil {
			t.Fatalf("%s: %v %s", g, err, r.body)
		}
		if len(arr) != 20 {
			t.Fatalf("%s: %d points", g, len(arr))
		}
		for i, v := range arr {
			if v != want {
				t.Errorf("group=%s point %d = %v, want %v", g, i, v, want)
			}
		}
	}
	// percentage: user is t%5 out of a total of 100 (idle included), so
	// its share in percent is t%5 again.
	r = env.get(t, "/api/v1/data?chart=system.cpu&after=-5&points=5&dimensions=user&options=percentage")
	body.Data = nil
	if err := json.Unmarshal(r.body, &body); err != nil || len(body.Data) != 5 {
		t.Fatalf("percentage: %v %s", err, r.body)
	}
	for _, row := range body.Data {
		if ts := int64(row[0]); math.Abs(row[1]-float64(ts%5)) > 1e-9 {
			t.Errorf("percentage of user at %d = %v, want %v", ts, row[1], ts%5)
		}
	}
	// abs: disk writes are stored negative (-(t%7)), abs makes them t%7.
	r = env.get(t, "/api/v1/data?chart=disk.vda&after=-20&points=20&dimensions=writes&options=abs")
	body.Data = nil
	if err := json.Unmarshal(r.body, &body); err != nil || len(body.Data) != 20 {
		t.Fatalf("abs: %v %s", err, r.body)
	}
	for _, row := range body.Data {
		if ts := int64(row[0]); row[1] != float64(ts%7) {
			t.Errorf("abs writes at %d = %v, want %v", ts, row[1], ts%7)
		}
	}
	// Tier 1 serves minutes: at most 10 of them in 600 s.
	r = env.get(t, "/api/v1/data?chart=system.load&after=-600&points=100&tier=1&options=jsonwrap")
	w := decode(t, "tier1", r.body).(map[string]any)
	if w["view_update_every"].(float64) != 60 || w["points"].(float64) > 11 {
		t.Errorf("tier 1 jsonwrap: view_update_every=%v points=%v", w["view_update_every"], w["points"])
	}
	// Context query over two charts lists each chart's dims with chart_ids.
	r = env.get(t, "/api/v1/data?context=cpu.cpu&after=-10&points=2&options=jsonwrap")
	w = decode(t, "context", r.body).(map[string]any)
	if ids := w["chart_ids"].([]any); len(ids) != 4 || ids[0] != "cpu.cpu0" || ids[3] != "cpu.cpu1" {
		t.Errorf("chart_ids = %v", w["chart_ids"])
	}
	// CSV has Netdata's \r\n lines and the dimension names as header.
	r = env.get(t, "/api/v1/data?chart=disk_space._&after=-3&points=3&format=csv")
	if !strings.HasPrefix(string(r.body), "time,avail,used,reserved for root\r\n") || r.header.Get("Content-Type") != "text/plain; charset=utf-8" {
		t.Errorf("csv = %q (%s)", r.body, r.header.Get("Content-Type"))
	}
	// A window before any data is an empty, valid answer.
	r = env.get(t, fmt.Sprintf("/api/v1/data?chart=system.cpu&after=%d&before=%d", env.now.Unix()-100000, env.now.Unix()-90000))
	if r.status != 200 || !json.Valid(r.body) {
		t.Errorf("empty window: %d %s", r.status, r.body)
	}
}

func equalStrings(a, b []string) bool {
	return strings.Join(a, "\x00") == strings.Join(b, "\x00")
}

// TestPrometheus parses allmetrics and export with Prometheus' own text
// parser and checks Netdata's naming.
func TestPrometheus(t *testing.T) {
	env := newTestEnv(t)
	for _, path := range []string{
		"/api/v1/allmetrics?format=prometheus",
		"/api/v3/allmetrics?format=prometheus&help=yes&types=yes",
		"/api/v1/allmetrics?format=prometheus&timestamps=no&types=yes",
		"/api/v1/allmetrics?format=prometheus_all_hosts",
		"/api/v3/export?format=prometheus",
	} {
		t.Run(path, func(t *testing.T) {
			r := env.get(t, path)
			if r.status != 200 || r.header.Get("Content-Type") != "text/plain; version=0.0.4" {
				t.Fatalf("%d %s", r.status, r.header.Get("Content-Type"))
			}
			var p expfmt.TextParser
			fams, err := p.TextToMetricFamilies(bytes.NewReader(r.body))
			if err != nil {
				t.Fatalf("exposition does not parse: %v\n%.600s", err, r.body)
			}
			cpu := fams["netdata_system_cpu_percentage_average"]
			if cpu == nil {
				t.Fatalf("no netdata_system_cpu_percentage_average; have %v", keys(fams))
			}
			dims := map[string]bool{}
			for _, m := range cpu.Metric {
				lbl := map[string]string{}
				for _, l := range m.Label {
					lbl[l.GetName()] = l.GetValue()
				}
				if lbl["chart"] != "system.cpu" || lbl["family"] != "cpu" {
					t.Errorf("labels %v", lbl)
				}
				dims[lbl["dimension"]] = true
			}
			if !dims["idle"] || !dims["user"] || len(dims) != 10 {
				t.Errorf("system.cpu dimensions %v (hidden idle included, like Netdata)", dims)
			}
			for _, name := range []string{"netdata_info", "netdata_disk_io_KiB_persec_average", "netdata_disk_space_GiB_average", "netdata_cpu_cpu_percentage_average", "netdata_system_load_load_average"} {
				if fams[name] == nil {
					t.Errorf("metric %s missing", name)
				}
			}
			if f := fams["netdata_disk_space_GiB_average"]; f != nil && !strings.Contains(f.String(), "reserved for root") {
				t.Errorf("disk space dims should use display names: %v", f)
			}
		})
	}
	// The reference capture uses the same names for the same charts.
	var p expfmt.TextParser
	fams, err := p.TextToMetricFamilies(bytes.NewReader(readRef(t, "api_v1_allmetrics_prometheus.txt")))
	if err != nil {
		t.Fatalf("reference does not parse: %v", err)
	}
	for _, n := range []string{"netdata_system_cpu_percentage_average", "netdata_disk_io_KiB_persec_average", "netdata_system_load_load_average", "netdata_system_ram_MiB_average", "netdata_cpu_cpu_percentage_average", "netdata_disk_space_GiB_average"} {
		if fams[n] == nil {
			t.Errorf("reference has no %s: naming assumption wrong", n)
		}
	}
	// A replaced definition is rendered anew (the name cache follows the
	// published chart list).
	c := testCharts()[1]
	c.Units = "processes"
	if err := env.db.Register(c); err != nil {
		t.Fatal(err)
	}
	r := env.get(t, "/api/v1/allmetrics?format=prometheus&filter=system.load")
	if !bytes.Contains(r.body, []byte("netdata_system_load_processes_average{")) || bytes.Contains(r.body, []byte("netdata_system_load_load_average{")) {
		t.Errorf("replaced chart definition not used:\n%s", r.body)
	}
	r = env.get(t, "/api/v1/allmetrics?format=prometheus&filter=system.cpu")
	if bytes.Contains(r.body, []byte(`chart="system.load"`)) || !bytes.Contains(r.body, []byte(`chart="system.cpu"`)) {
		t.Errorf("filter not applied:\n%s", r.body)
	}
}

// TestPrometheusInvalidUTF8 checks a scrape still parses when a chart's
// text is not UTF-8: a mount point is any bytes a user may name a
// directory (a FUSE mount needs no privilege) and it is the disk_space
// family, and Prometheus refuses a whole scrape with one label value
// that is not UTF-8.
func TestPrometheusInvalidUTF8(t *testing.T) {
	env := newTestEnv(t)
	mount := "/home/u/\xff\xfe"
	c := &store.ChartDef{ID: "disk_space._home_u___", Name: "disk_space._home_u___", Type: "disk_space", Context: "disk.space",
		Family: mount, Units: "GiB", ChartType: "stacked", UpdateEvery: 1, Dims: dimsOf("avail", "used")}
	c.Dims[1].Name = "used\xc3"
	if err := env.db.Register(c); err != nil {
		t.Fatal(err)
	}
	if err := env.db.Append(c.ID, env.now.Unix()-1, []float64{1, 2}); err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{
		"/api/v1/allmetrics?format=prometheus",
		"/api/v1/allmetrics?format=prometheus_all_hosts&help=yes&types=yes",
		"/api/v1/allmetrics?format=prometheus&names=no",
		"/api/v3/export?format=prometheus",
	} {
		r := env.get(t, path)
		var p expfmt.TextParser
		fams, err := p.TextToMetricFamilies(bytes.NewReader(r.body))
		if err != nil {
			t.Errorf("GET %s: exposition does not parse: %v", path, err)
			continue
		}
		found := false
		for _, m := range fams["netdata_disk_space_GiB_average"].GetMetric() {
			for _, l := range m.Label {
				if l.GetName() == "family" && l.GetValue() == "/home/u/\ufffd\ufffd" {
					found = true
				}
			}
		}
		if !found {
			t.Errorf("GET %s: no series of the mount point, its invalid bytes as U+FFFD", path)
		}
	}
}

func keys[V any](m map[string]V) []string {
	var k []string
	for n := range m {
		k = append(k, n)
	}
	sort.Strings(k)
	return k
}

func TestShell(t *testing.T) {
	env := newTestEnv(t)
	r := env.get(t, "/api/v1/allmetrics")
	line := regexp.MustCompile(`^NETDATA_[A-Z0-9_]+="-?[0-9]*"      # .*$`)
	var sawCPU, sawTotal, sawAlarm bool
	for _, l := range strings.Split(string(r.body), "\n") {
		if l == "" || strings.HasPrefix(l, "#") {
			continue
		}
		if strings.HasPrefix(l, "NETDATA_ALARM_") && strings.Contains(l, "_STATUS=") {
			sawAlarm = true
			continue
		}
		if !line.MatchString(l) {
			t.Errorf("bad shell line %q", l)
		}
		sawCPU = sawCPU || strings.HasPrefix(l, "NETDATA_SYSTEM_CPU_USER=")
		sawTotal = sawTotal || strings.HasPrefix(l, "NETDATA_SYSTEM_CPU_VISIBLETOTAL=")
	}
	if !sawCPU || !sawTotal || !sawAlarm {
		t.Errorf("shell output lacks cpu=%v total=%v alarm=%v:\n%s", sawCPU, sawTotal, sawAlarm, r.body)
	}
	// A renamed dimension uses its display name ("reserved for root", id
	// reserved_for_root); the value is (2+1)*0.5*(1+t%3) rounded.
	last := env.now.Unix() - 1
	want := fmt.Sprintf("NETDATA_DISK_SPACE___RESERVED_FOR_ROOT=\"%s\"", strconv.FormatFloat(1.5*float64(1+last%3), 'f', 0, 64))
	if !bytes.Contains(r.body, []byte(want)) {
		t.Errorf("shell output lacks %s:\n%s", want, r.body)
	}
}

type svgDoc struct {
	Width string `xml:"width,attr"`
	Rects []struct {
		Fill string `xml:"fill,attr"`
	} `xml:"g>rect"`
	Texts []string `xml:"g>text"`
}

func TestBadge(t *testing.T) {
	env := newTestEnv(t)
	cases := []struct {
		q, label, value, color string
	}{
		{"chart=system.cpu&dimensions=user&label=cpu", "cpu", "%", "#4c1"},
		{"chart=system.load&dimension=load1&label=load", "load", "load", "#4c1"},
		{"chart=no.such_chart", "chart not found", "-", "#999"},
		{"chart=system.ram&alarm=ram_in_use", "ram in use", "0.75%", "#4c1"},
		{"chart=system.cpu&alarm=10min_cpu_usage", "10min cpu usage", "80.5%", "#fe7d37"},
		{"chart=system.cpu&after=-60&group=max&units=%25&precision=1&value_color=green%3C50:orange%3C80:red&label=max", "max", "%", "#97CA00"},
	}
	for _, c := range cases {
		t.Run(c.q, func(t *testing.T) {
			r := env.get(t, "/api/v1/badge.svg?"+c.q)
			if r.status != 200 || r.header.Get("Content-Type") != "image/svg+xml" {
				t.Fatalf("%d %s %s", r.status, r.header.Get("Content-Type"), r.body)
			}
			var doc svgDoc
			if err := xml.Unmarshal(r.body, &doc); err != nil {
				t.Fatalf("not SVG/XML: %v\n%s", err, r.body)
			}
			if len(doc.Texts) != 4 || doc.Texts[1] != c.label || !strings.Contains(doc.Texts[3], c.value) {
				t.Errorf("texts = %q, want label %q value containing %q", doc.Texts, c.label, c.value)
			}
			if len(doc.Rects) < 2 || doc.Rects[1].Fill != c.color {
				t.Errorf("rects = %+v, want value colour %s", doc.Rects, c.color)
			}
		})
	}
}

// TestBadgeDefaults: without label= a badge of some dimensions is
// labelled with them, and without units= a percentage badge says "%",
// as Netdata's badge.svg does.
func TestBadgeDefaults(t *testing.T) {
	env := newTestEnv(t)
	for _, c := range []struct{ q, label, units string }{
		{"chart=system.cpu&dimensions=user", "user", "%"},
		{"chart=system.cpu&dim=user&dim=system", "user|system", "%"},
		{"chart=system.load", "system.load", " load"},
		{"chart=system.load&options=percentage", "system.load", "%"},
		{"chart=system.load&options=percentage&units=x", "system.load", " x"},
		{"chart=system.load&dimensions=load1&label=one", "one", " load"},
	} {
		r := env.get(t, "/api/v1/badge.svg?"+c.q)
		var doc svgDoc
		if err := xml.Unmarshal(r.body, &doc); err != nil {
			t.Fatalf("%s: not SVG/XML: %v\n%s", c.q, err, r.body)
		}
		if len(doc.Texts) != 4 || doc.Texts[1] != c.label || !strings.HasSuffix(doc.Texts[3], c.units) {
			t.Errorf("%s: texts = %q, want label %q and a value ending in %q", c.q, doc.Texts, c.label, c.units)
		}
	}
}

// TestBadgeAlarm: an alert's badge takes value_color, multiply and
// divide like a chart's, colours an undefined alert lightgrey, and an
// alert the chart does not have is the "alarm not found" badge valued
// "-", as Netdata draws them.
func TestBadgeAlarm(t *testing.T) {
	env := newTestEnv(t)
	for _, c := range []struct{ q, label, value, color string }{
		{"chart=system.ram&alarm=ram_in_use", "ram in use", "0.75%", "#4c1"},
		{"chart=system.ram&alarm=ram_in_use&value_color=blue", "ram in use", "0.75%", "#007ec6"},
		{"chart=system.ram&alarm=ram_in_use&multiply=200&divide=2", "ram in use", "75.0%", "#4c1"},
		{"chart=system.load&alarm=load_average_15", "load average 15", "-", "#9f9f9f"},
		{"chart=system.cpu&alarm=no_such_alarm", "alarm not found", "-", "#999"},
	} {
		r := env.get(t, "/api/v1/badge.svg?"+c.q)
		var doc svgDoc
		if err := xml.Unmarshal(r.body, &doc); err != nil {
			t.Fatalf("%s: not SVG/XML: %v\n%s", c.q, err, r.body)
		}
		if len(doc.Texts) != 4 || doc.Texts[1] != c.label || doc.Texts[3] != c.value {
			t.Errorf("%s: texts = %q, want label %q value %q", c.q, doc.Texts, c.label, c.value)
		}
		if len(doc.Rects) < 2 || doc.Rects[1].Fill != c.color {
			t.Errorf("%s: rects = %+v, want value colour %s", c.q, doc.Rects, c.color)
		}
	}
}

// TestBadgeValueColor: value_color is Netdata's list of "colour[op
// value]" terms separated by '|', where ':' and '=' compare for
// equality and "null" is no value (its badges README writes
// grey:null|green<10|...); the first term that holds gives the colour,
// and when none holds the last term's colour does.
func TestBadgeValueColor(t *testing.T) {
	env := newTestEnv(t)
	for _, c := range []struct{ q, color string }{
		{"chart=system.cpu&value_color=grey:null|green<1000|red", "#97CA00"},
		{"chart=system.cpu&dimensions=nosuch&value_color=grey:null|green<1000|red", "#555"},
		{"chart=system.cpu&value_color=green>1000000|blue<0", "#007ec6"},
		{"chart=system.cpu&value_color=red!=null|green", "#97CA00"}, // null compares only with no value
		{"chart=system.cpu&value_color=blue", "#007ec6"},
	} {
		r := env.get(t, "/api/v1/badge.svg?"+c.q)
		var doc svgDoc
		if err := xml.Unmarshal(r.body, &doc); err != nil {
			t.Fatalf("%s: not SVG/XML: %v\n%s", c.q, err, r.body)
		}
		if len(doc.Rects) < 2 || doc.Rects[1].Fill != c.color {
			t.Errorf("%s: rects = %+v, want value colour %s", c.q, doc.Rects, c.color)
		}
	}
}

// TestCORS: Access-Control-Allow-Origin is "*" by default and exactly
// the configured value (AGENT_REST_CORS reaches the server as
// Options.CORS) otherwise; a request's Origin is never echoed and
// credentials are never allowed, on answers, errors and preflights alike.
func TestCORS(t *testing.T) {
	for _, tt := range []struct {
		name, cors, want string
	}{
		{"default", "", "*"},
		{"configured", "https://dash.example", "https://dash.example"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			env := newTestEnv(t, func(o *Options) { o.CORS = tt.cors })
			for _, c := range []struct{ method, path string }{
				{"GET", "/api/v1/info"},
				{"GET", "/api/v1/chart?chart=no.such"}, // an error answer
				{"OPTIONS", "/api/v1/info"},
			} {
				for _, origin := range []string{"", "https://evil.example", tt.want} {
					hdr := map[string]string{}
					if origin != "" {
						hdr["Origin"] = origin
					}
					r := env.do(t, c.method, c.path, hdr)
					if got := r.header.Values("Access-Control-Allow-Origin"); len(got) != 1 || got[0] != tt.want {
						t.Errorf("%s %s (Origin %q): Access-Control-Allow-Origin = %q, want %q", c.method, c.path, origin, got, tt.want)
					}
					if got := r.header.Get("Access-Control-Allow-Credentials"); got != "" {
						t.Errorf("%s %s (Origin %q): Access-Control-Allow-Credentials = %q, want none", c.method, c.path, origin, got)
					}
				}
			}
		})
	}
}

func TestPreflightAndMethods(t *testing.T) {
	env := newTestEnv(t)
	r := env.do(t, "OPTIONS", "/api/v1/info", map[string]string{"Origin": "http://example.test"})
	if r.status != 200 || string(r.body) != "OK" || r.header.Get("Access-Control-Allow-Methods") != "GET, OPTIONS" ||
		r.header.Get("Access-Control-Max-Age") != "1209600" || r.header.Get("Access-Control-Allow-Headers") == "" {
		t.Errorf("preflight: %d %q %v", r.status, r.body, r.header)
	}
	r = env.do(t, "POST", "/api/v1/info", nil)
	if r.status != 405 || r.header.Get("Allow") != "GET, OPTIONS" {
		t.Errorf("POST = %d %v", r.status, r.header)
	}
}

// TestEveryPath requests every path of the spec's agent API under the
// versions it lists and checks status and that JSON bodies are JSON.
func TestEveryPath(t *testing.T) {
	env := newTestEnv(t)
	paths := []string{
		"/", "/api", "/health", "/api/v1/health", "/api/v3/health",
		"/api/v1/info", "/api/v2/info", "/api/v3/info", "/api/v3/db", "/api/v3/versions", "/api/v3/me",
		"/api/v3/settings", "/api/v3/config",
		"/api/v2/contexts", "/api/v3/contexts", "/api/v3/context?context=system.cpu",
		"/api/v1/charts", "/api/v1/chart?chart=system.cpu", "/api/v3/q?q=cpu",
		"/api/v1/data?chart=system.cpu", "/api/v2/data?chart=system.cpu", "/api/v3/data?context=system.cpu",
		"/api/v1/allmetrics?format=json", "/api/v3/allmetrics?format=json",
		"/api/v2/nodes", "/api/v3/nodes", "/api/v3/node_instances", "/api/v3/fleet", "/api/v3/stream_path",
		"/api/v3/export", "/api/v3/tunnel",
		"/api/v3/alerts", "/api/v2/alerts", "/api/v1/alarms", "/api/v3/alert_transitions", "/api/v1/alert_config",
		"/api/v3/variable?chart=system.cpu", "/api/v3/functions", "/api/v1/functions",
		"/api/v2/progress?transaction=x", "/api/v3/stream_info", "/api/v1/ml_info", "/api/v3/ml_info",
		"/api/v1/dbengine_stats", "/api/v1/metric_correlations?after=-60", "/api/v1/registry?action=hello",
		"/api/v3/registry?action=hello",
	}
	for _, p := range paths {
		r := env.get(t, p)
		want := 200
		if strings.Contains(p, "progress") {
			want = 404 // no transaction runs over HTTP
		}
		if r.status != want {
			t.Errorf("GET %s = %d %s", p, r.status, r.body)
			continue
		}
		if !json.Valid(r.body) {
			t.Errorf("GET %s: invalid JSON\n%.300s", p, r.body)
		}
	}
	// Keys the spec names.
	idx := decode(t, "/", env.get(t, "/").body).(map[string]any)
	db, _ := idx["db"].(map[string]any)
	if idx["peer_public_key"] == nil || len(idx["peer_public_key"].(string)) != 64 || db["public_key"] != idx["peer_public_key"] || db["discovery_key"] == nil {
		t.Errorf("index lacks keys: %v", idx)
	}
	info := decode(t, "info", env.get(t, "/api/v3/info").body).(map[string]any)
	if d, _ := info["database"].(map[string]any); d["public_key"] == nil || d["discovery_key"] == nil {
		t.Errorf("v3 info lacks database keys")
	}
	dbv := decode(t, "db", env.get(t, "/api/v3/db").body).(map[string]any)
	if cols, _ := dbv["collections"].([]any); len(cols) < 2 {
		t.Errorf("db collections = %v", dbv["collections"])
	}
	set := decode(t, "settings", env.get(t, "/api/v3/settings").body).(map[string]any)
	if set["retention"] == nil || set["storage"] == nil {
		t.Errorf("settings lacks retention/storage: %v", set)
	}
	tun := decode(t, "tunnel", env.get(t, "/api/v3/tunnel").body).(map[string]any)
	if tun["public_key"] != idx["peer_public_key"] || tun["status"] == nil {
		t.Errorf("tunnel = %v", tun)
	}
	// No function runs yet (they need the peer-to-peer RPC): none listed,
	// in functions and in info, even with the journal enabled.
	fn := decode(t, "functions", env.get(t, "/api/v1/functions").body).(map[string]any)
	if f, ok := fn["functions"].(map[string]any); !ok || len(f) != 0 {
		t.Errorf("functions = %v, want an empty functions object", fn)
	}
	fn = decode(t, "functions", env.get(t, "/api/v3/functions").body).(map[string]any)
	if f, ok := fn["functions"].([]any); !ok || len(f) != 0 {
		t.Errorf("v3 functions = %v, want an empty functions array", fn)
	}
	if f, ok := info["functions"].(map[string]any); !ok || len(f) != 0 {
		t.Errorf("info functions = %v, want {}", info["functions"])
	}
	nodes := decode(t, "nodes", env.get(t, "/api/v3/nodes").body).(map[string]any)
	if n, _ := nodes["nodes"].([]any); len(n) != 1 {
		t.Errorf("nodes = %v", nodes)
	}
	q := decode(t, "q", env.get(t, "/api/v1/q?q=CPU").body).(map[string]any)
	if q["count"].(float64) < 3 {
		t.Errorf("q=CPU found %v", q["count"])
	}
	h := decode(t, "health", env.get(t, "/health").body).(map[string]any)
	if h["status"] != "warning" { // one alert is WARNING
		t.Errorf("health = %v", h)
	}
	// alerts: v1 alarms only raised by default, v3 alerts all, log newest first.
	al := decode(t, "alarms", env.get(t, "/api/v1/alarms").body).(map[string]any)
	if a := al["alarms"].(map[string]any); len(a) != 1 || a["system.cpu.10min_cpu_usage"] == nil {
		t.Errorf("alarms = %v", a)
	}
	al = decode(t, "alerts", env.get(t, "/api/v1/alerts").body).(map[string]any)
	if a := al["alarms"].(map[string]any); len(a) != 3 {
		t.Errorf("alerts = %v", a)
	}
	lg := decode(t, "log", env.get(t, "/api/v1/alert_transitions").body).([]any)
	if len(lg) != 2 || lg[0].(map[string]any)["unique_id"].(float64) != 2 {
		t.Errorf("alert_transitions = %v", lg)
	}
	lg = decode(t, "log", env.get(t, "/api/v1/alarm_log?after=1").body).([]any)
	if len(lg) != 1 {
		t.Errorf("alarm_log after=1 = %v", lg)
	}
	if r := env.get(t, "/api/v1/alarm_count?status=CLEAR"); trimBody(r.body) != "[1]" {
		t.Errorf("alarm_count CLEAR = %s", r.body)
	}
}

// TestAlarmCountContexts: alarm_count counts the alerts of every context
// named, by context= or ctx=, repeated or in one list separated by ',',
// '|' or spaces, as Netdata's alarm_count does.
func TestAlarmCountContexts(t *testing.T) {
	env := newTestEnv(t)
	for q, want := range map[string]string{
		"status=CLEAR&context=system.cpu&context=system.ram": "[1]",
		"status=CLEAR&context=system.cpu,system.ram":         "[1]",
		"status=CLEAR&context=system.cpu|system.ram":         "[1]",
		"status=WARNING&ctx=system.ram":                      "[0]",
		"status=WARNING&ctx=system.ram&ctx=system.cpu":       "[1]",
		"context=system.load":                                "[0]",
		"status=UNDEFINED&context=system.load%20system.cpu":  "[1]",
	} {
		r := env.get(t, "/api/v1/alarm_count?"+q)
		if r.status != 200 || trimBody(r.body) != want {
			t.Errorf("alarm_count?%s = %d %s, want %s", q, r.status, r.body, want)
		}
	}
}

// TestDataCacheSeesNewPoints: a cached answer is not served once a chart
// has a newer point, even within the same second.
func TestDataCacheSeesNewPoints(t *testing.T) {
	env := newTestEnv(t)
	path := "/api/v1/data?chart=system.load&after=-3&points=3&format=csv&options=seconds"
	a := env.get(t, path)
	if b := env.get(t, path); !bytes.Equal(a.body, b.body) {
		t.Fatalf("same second, same data, different answers:\n%s\n%s", a.body, b.body)
	}
	ts := env.now.Unix() // newer than the last stored point (now-1)
	if err := env.db.Append("system.load", ts, []float64{42, 43, 44}); err != nil {
		t.Fatal(err)
	}
	c := env.get(t, path)
	if bytes.Equal(a.body, c.body) || !bytes.Contains(c.body, []byte(fmt.Sprintf("%d,42,43,44", ts))) {
		t.Fatalf("new point not in the answer:\n%s", c.body)
	}
}

// FuzzHandle sends arbitrary request URIs through the whole handler: it
// must never panic, never answer 5xx, and JSON answers must be JSON.
func FuzzHandle(f *testing.F) {
	for _, s := range []string{
		"/api/v1/data?chart=system.cpu&after=-60&points=10&options=jsonwrap|flip|nonzero",
		"/api/v3/data?context=cpu.cpu&group=median&format=csv&tier=1",
		"/api/v1/data?chart=system.cpu&after=1&before=2&points=86400&dimensions=!user,*",
		"/api/v1/allmetrics?format=prometheus&filter=system.*&help=yes&types=yes&prefix=x",
		"/api/v1/badge.svg?chart=system.cpu&value_color=red>1:green&precision=3&multiply=2",
		"/api/v1/chart?chart=disk_space._", "/api/v3/q?q=%00", "/api/v1/alarm_log?after=1",
		"/api/v3/export?format=prometheus", "/api/v2/contexts?options=full", "/api/v9/x", "/%",
		"/api/v1/data?chart=system.load&format=datasource&tqx=reqId:1;sig:5", "/api/v1/data?chart=system.cpu&group=trimmed-mean10&format=html",
		"/api/v3/logs?source=audit&since=-1h&q=x&limit=5", "/api/v3/logs?source=anomaly", "/api/v3/processes?sort=rss&filter=go*&limit=3",
		"/api/v3/ai/chart/system.cpu/summary?group=des", "/api/v1/allmetrics?format=prometheus_all_hosts&source=as-collected",
	} {
		f.Add(s)
	}
	env := newTestEnv(f)
	f.Fuzz(func(t *testing.T, uri string) {
		if strings.Contains(uri, "write") {
			return // export?write=1 writes files; covered by TestExportWrite
		}
		var ctx fasthttp.RequestCtx
		ctx.Request.Header.SetMethod("GET")
		ctx.Request.SetRequestURI(uri)
		env.srv.Handle(&ctx)
		code := ctx.Response.StatusCode()
		// 503 and 501 say a service is not on this host (a log source, the
		// process table), not that the request broke something.
		if code >= 500 && code != fasthttp.StatusServiceUnavailable && code != fasthttp.StatusNotImplemented {
			t.Fatalf("%q: %d %s", uri, code, ctx.Response.Body())
		}
		if code == 200 && strings.HasPrefix(string(ctx.Response.Header.ContentType()), "application/json") && !json.Valid(ctx.Response.Body()) {
			t.Fatalf("%q: invalid JSON %.300s", uri, ctx.Response.Body())
		}
	})
}

// TestDataFreshChart: a chart with only a few seconds of data answers
// the whole window asked for, the rows before its first point null (as
// Netdata pads them back to after), the rows over its data filled.
func TestDataFreshChart(t *testing.T) {
	env := newTestEnv(t)
	c := testCharts()[1]
	c.ID, c.Name = "system.fresh", "system.fresh"
	if err := env.db.Register(c); err != nil {
		t.Fatal(err)
	}
	last := env.now.Unix() - 1
	first := last - 11
	for ts := first; ts <= last; ts++ {
		if err := env.db.Append(c.ID, ts, []float64{1, 2, 3}); err != nil {
			t.Fatal(err)
		}
	}
	for _, tt := range []struct {
		q    string
		rows int
	}{{"after=-60&points=10", 10}, {"after=-30&points=30", 30}, {"after=-4&points=60", 4}} {
		r := env.get(t, "/api/v1/data?chart=system.fresh&options=flip&"+tt.q)
		var body struct{ Data [][]any }
		if err := json.Unmarshal(r.body, &body); err != nil {
			t.Fatal(err)
		}
		if len(body.Data) != tt.rows {
			t.Fatalf("%s: %d rows, want %d: %s", tt.q, len(body.Data), tt.rows, r.body)
		}
		nulls := 0
		for i, row := range body.Data {
			ts := int64(row[0].(float64))
			for _, v := range row[1:] {
				switch {
				case ts < first && v != nil:
					t.Errorf("%s: row %d at %d (before the data) = %v, want null", tt.q, i, ts, v)
				case ts >= first && v == nil:
					t.Errorf("%s: row %d at %d (over the data) is null", tt.q, i, ts)
				case v == nil:
					nulls++
				}
			}
		}
		if tt.rows > 12 && nulls == 0 {
			t.Errorf("%s: no padding rows: %s", tt.q, r.body)
		}
	}
}

func TestAppendFixed7(t *testing.T) {
	for _, v := range []float64{0, 1, -1, 0.5, 88.5572139, -1.9919336, 1e-8, -1e-8, 123456.1234567, 9e11 + 0.5, 1e300, -0.00000005} {
		got := string(appendFixed7(nil, v))
		want := strconv.FormatFloat(v, 'f', 7, 64)
		if got != want && !(got == "0.0000000" && want == "-0.0000000") {
			g, _ := strconv.ParseFloat(got, 64)
			if math.Abs(g-v) > 1e-7 {
				t.Errorf("appendFixed7(%v) = %s, want %s", v, got, want)
			}
		}
	}
}

// TestQueryTooLarge: a window whose copy would exceed maxQueryCells is a
// 400; a long window over little stored data is not.
func TestQueryTooLarge(t *testing.T) {
	env := newTestEnv(t)
	if r := env.get(t, "/api/v1/data?chart=system.cpu&after=-94000000&points=100"); r.status != 200 {
		t.Fatalf("long window over 600 s of data: %d %s", r.status, r.body)
	}
	// 900 more charts of 8 dimensions in one context, 600 s each: 4.3M cells.
	for i := 0; i < 900; i++ {
		id := fmt.Sprintf("big.c%d", i)
		c := &store.ChartDef{ID: id, Context: "big.ctx", Units: "x", UpdateEvery: 1, Dims: dimsOf("a", "b", "c", "d", "e", "f", "g", "h")}
		if err := env.db.Register(c); err != nil {
			t.Fatal(err)
		}
		if err := env.db.Append(id, env.now.Unix()-1, make([]float64, 8)); err != nil {
			t.Fatal(err)
		}
	}
	r := env.get(t, "/api/v1/data?context=big.ctx&after=-600&points=10")
	if r.status != 400 || !strings.Contains(string(r.body), "query too large") {
		t.Fatalf("huge context query: %d %.200s", r.status, r.body)
	}
}

// TestGzip: a client that accepts gzip gets a compressed body that
// decodes to the same answer (Go's client decodes transparently; here the
// header is set by hand to see the raw body).
func TestGzip(t *testing.T) {
	env := newTestEnv(t)
	plain := env.get(t, "/api/v1/allmetrics?format=prometheus&timestamps=no")
	r := env.do(t, "GET", "/api/v1/allmetrics?format=prometheus&timestamps=no", map[string]string{"Accept-Encoding": "gzip"})
	if r.header.Get("Content-Encoding") != "gzip" {
		t.Fatalf("Content-Encoding = %q", r.header.Get("Content-Encoding"))
	}
	zr, err := gzip.NewReader(bytes.NewReader(r.body))
	if err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(b, plain.body) || len(r.body) >= len(b) {
		t.Fatalf("gzip body: %d bytes -> %d, equal=%v", len(r.body), len(b), bytes.Equal(b, plain.body))
	}
}

// TestInfoPerVersion: the cached info body says the version it was asked
// for.
func TestInfoPerVersion(t *testing.T) {
	env := newTestEnv(t)
	for _, v := range []int{1, 3, 2, 1} {
		info := decode(t, "info", env.get(t, fmt.Sprintf("/api/v%d/info", v)).body).(map[string]any)
		if info["api"] != float64(v) {
			t.Errorf("/api/v%d/info says api %v", v, info["api"])
		}
	}
}

func TestAIHelpers(t *testing.T) {
	env := newTestEnv(t)
	snap := decode(t, "snapshot", env.get(t, "/api/v3/ai/snapshot").body).(map[string]any)
	for _, k := range []string{"health", "kpis", "anomalies", "alerts", "catalog", "storage"} {
		if snap[k] == nil {
			t.Errorf("snapshot lacks %s", k)
		}
	}
	kpis := snap["kpis"].(map[string]any)
	// system.cpu without idle is 9 * (t%5) at the newest second.
	last := env.now.Unix() - 1
	if kpis["cpu_percent"] != float64(9*(last%5)) {
		t.Errorf("cpu_percent = %v, want %d", kpis["cpu_percent"], 9*(last%5))
	}
	if a := snap["alerts"].([]any); len(a) != 1 {
		t.Errorf("raised alerts = %v", a)
	}
	ch := decode(t, "charts", env.get(t, "/api/v3/ai/charts?q=CPU&limit=2").body).(map[string]any)
	if ch["count"].(float64) != 2 || ch["matched"].(float64) < 3 {
		t.Errorf("ai/charts = %v", ch)
	}
	r := env.get(t, "/api/v3/ai/chart/system.cpu/summary?after=-100&points=20&group=max")
	sum := decode(t, "summary", r.body).(map[string]any)
	dims := sum["dimensions"].([]any)
	if len(dims) != 9 {
		t.Fatalf("summary dims = %d", len(dims))
	}
	user := dims[5].(map[string]any)
	if user["id"] != "user" || user["min"] != 4.0 || user["max"] != 4.0 || user["last"] != float64(last%5) {
		t.Errorf("user summary (group max over 5 s of t%%5 is 4) = %v", user)
	}
	for path, want := range map[string]int{
		"/api/v3/ai/chart/no.such/summary":                404,
		"/api/v3/ai/chart/system.cpu/summary?points=0":    400,
		"/api/v3/ai/charts?limit=9999":                    400,
		"/api/v3/ai/chart//summary":                       404,
		"/api/v3/ai/chart/system.cpu/summary?group=bogus": 400,
	} {
		if r := env.get(t, path); r.status != want {
			t.Errorf("GET %s = %d %s, want %d", path, r.status, r.body, want)
		}
	}
}
