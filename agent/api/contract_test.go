package api

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"

	"peerdns/agent/ml"
	"peerdns/agent/store"
)

// shapeDir holds the shapes of Netdata's v2/v3 answers (see its README).
const shapeDir = "testdata/netdata-v2"

func loadShape(t *testing.T, name string) any {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(shapeDir, name))
	if err != nil {
		t.Fatal(err)
	}
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return v
}

func jsonType(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case bool:
		return "bool"
	case float64:
		return "number"
	case string:
		return "string"
	case []any:
		return "array"
	case map[string]any:
		return "object"
	}
	return "?"
}

// checkShape reports every place where got differs from the shape.
func checkShape(path string, shape, got any, errs *[]string) {
	fail := func(f string, a ...any) { *errs = append(*errs, path+": "+fmt.Sprintf(f, a...)) }
	switch sh := shape.(type) {
	case string:
		if sh == "any" {
			return
		}
		gt := jsonType(got)
		for _, alt := range strings.Split(sh, "|") {
			if alt == gt {
				return
			}
		}
		fail("is %s %.80v, want %s", gt, got, sh)
	case []any:
		arr, ok := got.([]any)
		if !ok {
			fail("is %s, want an array", jsonType(got))
			return
		}
		for i, item := range arr {
			checkShape(fmt.Sprintf("%s[%d]", path, i), sh[0], item, errs)
		}
	case map[string]any:
		obj, ok := got.(map[string]any)
		if !ok {
			fail("is %s, want an object", jsonType(got))
			return
		}
		if each, ok := sh["*"]; ok && len(sh) == 1 {
			for k, v := range obj {
				checkShape(path+"."+k, each, v, errs)
			}
			return
		}
		_, open := sh["..."]
		known := map[string]bool{}
		keys := make([]string, 0, len(sh))
		for k := range sh {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			if k == "..." {
				continue
			}
			name, optional := strings.CutPrefix(k, "?")
			known[name] = true
			v, present := obj[name]
			if !present {
				if !optional {
					fail("lacks %q", name)
				}
				continue
			}
			checkShape(path+"."+name, sh[k], v, errs)
		}
		if !open {
			for k := range obj {
				if !known[k] {
					fail("has %q, which Netdata's answer does not", k)
				}
			}
		}
	}
}

// TestV2Contract holds every v2/v3 answer against the shape Netdata's
// sources give it, on an agent with alerts, a detector and known data.
func TestV2Contract(t *testing.T) {
	env := newTestEnv(t, func(o *Options) { o.ML = fixedML{} })
	al := decode(t, "alerts", env.get(t, "/api/v1/alarms?all").body).(map[string]any)["alarms"].(map[string]any)
	var cfg string
	for _, a := range al {
		cfg = a.(map[string]any)["config_hash_id"].(string)
		break
	}
	cases := []struct {
		path, shape string
		status      int
	}{
		{"/api/v2/data?contexts=cpu.cpu&after=-60&points=6", "data_json2.json", 200},
		{"/api/v3/data?contexts=cpu.cpu&after=-60&points=6&group_by=instance", "data_json2.json", 200},
		{"/api/v3/data?contexts=system.*|cpu.*&group_by=node,context&aggregation=sum&after=-30", "data_json2.json", 200},
		{"/api/v3/data?contexts=cpu.cpu&group_by=label&group_by_label=_collect_module&options=group-by-labels&after=-30&points=3", "data_json2.json", 200},
		{"/api/v3/data?contexts=system.cpu&cardinality_limit=3&after=-30", "data_json2.json", 200},
		{"/api/v3/data?contexts=no.such&after=-30", "data_json2.json", 200},
		{"/api/v3/data?contexts=cpu.*&after=-30&points=5&options=raw", "data_json2.json", 200},
		{"/api/v2/contexts", "contexts.json", 200},
		{"/api/v3/contexts?contexts=cpu.*", "contexts.json", 200},
		{"/api/v3/q?q=cpu", "q.json", 200},
		{"/api/v2/nodes", "nodes.json", 200},
		{"/api/v3/nodes", "nodes.json", 200},
		{"/api/v2/alerts", "alerts.json", 200},
		{"/api/v3/alerts?options=summary,instances,values", "alerts.json", 200},
		{"/api/v3/alert_transitions?last=10", "alert_transitions.json", 200},
		{"/api/v3/alert_config?config=" + cfg, "alert_config.json", 200},
		{"/api/v3/functions", "functions.json", 200},
		{"/api/v2/versions", "versions.json", 200},
		{"/api/v3/me", "me.json", 200},
		{"/api/v3/settings", "settings.json", 200},
		{"/api/v3/progress?transaction=8c4e2f0a-0000-4000-8000-000000000001", "progress_404.json", 404},
		{"/api/v3/progress", "progress_404.json", 400},
		{"/api/v3/stream_info", "stream_info.json", 200},
		{"/api/v3/ml_info", "ml_info.json", 200},
		{"/api/v1/dbengine_stats", "dbengine_stats.json", 200},
		{"/api/v1/registry?action=hello", "registry_hello.json", 200},
		{"/api/v3/registry?action=hello", "registry_hello.json", 200},
	}
	for _, c := range cases {
		r := env.get(t, c.path)
		if r.status != c.status {
			t.Errorf("GET %s = %d %.300s, want %d", c.path, r.status, r.body, c.status)
			continue
		}
		var got any
		if err := json.Unmarshal(r.body, &got); err != nil {
			t.Errorf("GET %s: %v %.300s", c.path, err, r.body)
			continue
		}
		var errs []string
		checkShape(c.shape, loadShape(t, c.shape), got, &errs)
		for _, e := range errs {
			t.Errorf("GET %s: %s", c.path, e)
		}
	}
	// The shapes are not vacuous: an answer missing a member fails.
	var errs []string
	checkShape("data", loadShape(t, "data_json2.json"), map[string]any{"api": 2.0}, &errs)
	if len(errs) < 5 {
		t.Errorf("a bare {api} passed the json2 shape: %v", errs)
	}
	// minimal-stats leaves out what Netdata's jsonwrap-v2.c leaves out
	// with it (versions, totals, functions, agents, timings, the
	// summary's alerts, the nodes' status and the counts) and keeps the
	// summary's lists with their statistics, result, db and view.
	m := decode(t, "minimal", env.get(t, "/api/v3/data?contexts=cpu.cpu&after=-10&options=minimal-stats").body).(map[string]any)
	if got := strings.Join(keysOf(m), ","); got != "api,db,result,summary,view" {
		t.Errorf("minimal-stats: sections %s, want api,db,result,summary,view", got)
	}
	if sum, ok := m["summary"].(map[string]any); !ok {
		t.Errorf("minimal-stats: no summary")
	} else {
		if got := strings.Join(keysOf(sum), ","); got != "contexts,dimensions,instances,labels,nodes" {
			t.Errorf("minimal-stats: summary has %s, want every list but alerts", got)
		}
		inst := sum["instances"].([]any)[0].(map[string]any)
		if inst["ds"] != nil || inst["sts"] == nil {
			t.Errorf("minimal-stats: summary.instances[0] = %v, want statistics and no counts", inst)
		}
		if node := sum["nodes"].([]any)[0].(map[string]any); node["st"] != nil || node["mg"] == nil {
			t.Errorf("minimal-stats: summary.nodes[0] = %v, want the node without its status", node)
		}
	}
	// The summary's six lists are named in full under both key sets
	// (Netdata passes them as literals); long-json-keys names the
	// members inside them in full.
	for _, c := range []struct {
		opts, dims, stats, schema string
	}{
		{"", "ds", "sts", "point"},
		{"&options=long-json-keys", "dimensions", "statistics", "point_schema"},
	} {
		w := decode(t, "keys", env.get(t, "/api/v3/data?contexts=cpu.cpu&after=-10"+c.opts).body).(map[string]any)
		sum := w["summary"].(map[string]any)
		if got := strings.Join(keysOf(sum), ","); got != "alerts,contexts,dimensions,instances,labels,nodes" {
			t.Errorf("%q: summary has %s", c.opts, got)
			continue
		}
		inst := sum["instances"].([]any)[0].(map[string]any)
		if inst[c.dims] == nil || inst[c.stats] == nil || w["result"].(map[string]any)[c.schema] == nil {
			t.Errorf("%q: summary.instances[0] has %v", c.opts, keysOf(inst))
		}
	}
}

func keysOf(m map[string]any) []string {
	var k []string
	for x := range m {
		k = append(k, x)
	}
	sort.Strings(k)
	return k
}

type fixedML struct{}

func (fixedML) Stats() ml.Stats {
	return ml.Stats{Time: 1795313700, Total: 30, Trained: 20, Anomalous: 3, Rate: 10}
}

// json2 decodes a json2 answer's parts the tests read.
type json2 struct {
	Result struct {
		Labels []string            `json:"labels"`
		Data   [][]json.RawMessage `json:"data"`
	} `json:"result"`
	View struct {
		UpdateEvery int64 `json:"update_every"`
		Units       any   `json:"units"`
		Dimensions  struct {
			GroupedBy  []string              `json:"grouped_by"`
			IDs        []string              `json:"ids"`
			Names      []string              `json:"names"`
			Aggregated []int                 `json:"aggregated"`
			Labels     map[string][][]string `json:"labels"`
		} `json:"dimensions"`
		Cardinality *struct {
			Folded int `json:"folded"`
		} `json:"cardinality"`
	} `json:"view"`
	Summary struct {
		Instances []struct {
			ID string         `json:"id"`
			DS map[string]int `json:"ds"`
		} `json:"instances"`
		Dimensions []struct {
			ID string         `json:"id"`
			DS map[string]int `json:"ds"`
		} `json:"dimensions"`
	} `json:"summary"`
	Totals map[string]map[string]int `json:"totals"`
}

// points returns, per row (newest first), the time and each column's
// [value, anomaly rate, annotations].
func (j *json2) points(t *testing.T) (times []int64, vals [][]float64, flags [][]int) {
	t.Helper()
	for _, row := range j.Result.Data {
		var ts int64
		if err := json.Unmarshal(row[0], &ts); err != nil {
			t.Fatal(err)
		}
		times = append(times, ts)
		var vr []float64
		var fr []int
		for _, p := range row[1:] {
			var pt []*float64
			if err := json.Unmarshal(p, &pt); err != nil || len(pt) != 3 {
				t.Fatalf("point %s: %v", p, err)
			}
			v := math.NaN()
			if pt[0] != nil {
				v = *pt[0]
			}
			vr = append(vr, v)
			fr = append(fr, int(*pt[2]))
		}
		vals = append(vals, vr)
		flags = append(flags, fr)
	}
	return
}

func getJSON2(t *testing.T, env *testEnv, path string) *json2 {
	t.Helper()
	r := env.get(t, path)
	if r.status != 200 {
		t.Fatalf("GET %s = %d %s", path, r.status, r.body)
	}
	var j json2
	if err := json.Unmarshal(r.body, &j); err != nil {
		t.Fatalf("GET %s: %v %.300s", path, err, r.body)
	}
	return &j
}

// TestV2Selectors runs each selector on the known series and checks what
// it selects: contexts, instances, dimensions, labels, nodes and scopes,
// with '*' wildcards, '|' alternatives and '!' negation.
func TestV2Selectors(t *testing.T) {
	env := newTestEnv(t)
	base := "/api/v3/data?after=-10&points=1&group_by=instance,dimension"
	cases := []struct {
		q    string
		want []string // column ids
	}{
		{"&contexts=cpu.cpu", []string{"user,cpu.cpu0", "system,cpu.cpu0", "user,cpu.cpu1", "system,cpu.cpu1"}},
		{"&contexts=cpu.*&instances=*cpu1", []string{"user,cpu.cpu1", "system,cpu.cpu1"}},
		{"&contexts=cpu.cpu&instances=!cpu.cpu0|*", []string{"user,cpu.cpu1", "system,cpu.cpu1"}},
		{"&contexts=cpu.cpu&dimensions=sys*", []string{"system,cpu.cpu0", "system,cpu.cpu1"}},
		{"&contexts=system.load|disk.space&dimensions=load15|reserved*", []string{"load15,system.load", "reserved for root,disk_space._"}},
		{"&contexts=*&labels=_collect_module:/proc/loadavg", []string{"load1,system.load", "load5,system.load", "load15,system.load"}},
		{"&contexts=*&labels=_collect_plugin:diskspace*", []string{"avail,disk_space._", "used,disk_space._", "reserved for root,disk_space._"}},
		{"&scope_contexts=cpu.cpu&contexts=system.load", nil},
		{"&contexts=cpu.cpu&nodes=no-such-node", nil},
		{"&contexts=cpu.cpu&nodes=vm|*", []string{"user,cpu.cpu0", "system,cpu.cpu0", "user,cpu.cpu1", "system,cpu.cpu1"}},
		{"&contexts=no.such.context", nil},
		{"&contexts=cpu.cpu&dimensions=nothing", nil},
		{"&scope_instances=cpu.cpu0&contexts=cpu.cpu", []string{"user,cpu.cpu0", "system,cpu.cpu0"}},
	}
	for _, c := range cases {
		j := getJSON2(t, env, base+c.q)
		ids := j.View.Dimensions.IDs
		// Each column is dimension,instance; Netdata names the instance
		// id@machine_guid.
		for i := range c.want {
			c.want[i] += "@" + env.srv.host.GUID
		}
		if len(c.want) == 0 && len(ids) == 0 {
			if len(j.Result.Labels) != 1 {
				t.Errorf("%s: labels %v for an empty result", c.q, j.Result.Labels)
			}
			continue
		}
		if strings.Join(ids, ";") != strings.Join(c.want, ";") {
			t.Errorf("%s: columns %q, want %q", c.q, ids, c.want)
		}
	}
	// Excluded dimensions are counted, not queried: dimensions=user keeps
	// system in scope as excluded.
	j := getJSON2(t, env, "/api/v3/data?contexts=cpu.cpu&dimensions=user&after=-10&points=1")
	if tot := j.Totals["dimensions"]; tot["sl"] != 1 || tot["ex"] != 1 || tot["qr"] != 1 {
		t.Errorf("totals.dimensions = %v, want sl 1 ex 1 qr 1", tot)
	}
	for _, d := range j.Summary.Dimensions {
		if d.ID == "system" && (d.DS["ex"] != 2 || d.DS["sl"] != 0) {
			t.Errorf("summary dimension system = %v, want excluded on both instances", d.DS)
		}
	}
	// v1's chart= is read as instances (and their scope).
	j = getJSON2(t, env, "/api/v2/data?chart=cpu.cpu1&after=-10&points=1")
	if len(j.Summary.Instances) != 1 || j.Summary.Instances[0].ID != "cpu.cpu1" {
		t.Errorf("chart=cpu.cpu1 listed %+v", j.Summary.Instances)
	}
}

// TestV2Grouping checks every group_by and aggregation on the known
// series: the cores cpu.cpu0 and cpu.cpu1 both hold user = 0.5*(1+t%3)
// and system = 1.0*(1+t%3); system.load holds load1, load5, load15 =
// 0.5, 1.0, 1.5 times (1+t%3).
func TestV2Grouping(t *testing.T) {
	env := newTestEnv(t)
	// Netdata names an instance group id@machine_guid.
	g := "@" + env.srv.host.GUID
	k := func(ts int64) float64 { return float64(1 + ts%3) }
	type colFn func(ts int64) []float64
	cases := []struct {
		q      string
		ids    []string
		values colFn
	}{
		{"contexts=cpu.cpu", []string{"user", "system"},
			func(ts int64) []float64 { return []float64{0.5 * k(ts), k(ts)} }},
		{"contexts=cpu.cpu&group_by=dimension&aggregation=sum", []string{"user", "system"},
			func(ts int64) []float64 { return []float64{k(ts), 2 * k(ts)} }},
		{"contexts=cpu.cpu&group_by=instance&aggregation=sum", []string{"cpu.cpu0" + g, "cpu.cpu1" + g},
			func(ts int64) []float64 { return []float64{1.5 * k(ts), 1.5 * k(ts)} }},
		{"contexts=cpu.cpu&group_by=instance&aggregation=max", []string{"cpu.cpu0" + g, "cpu.cpu1" + g},
			func(ts int64) []float64 { return []float64{k(ts), k(ts)} }},
		{"contexts=cpu.cpu&group_by=instance&aggregation=min", []string{"cpu.cpu0" + g, "cpu.cpu1" + g},
			func(ts int64) []float64 { return []float64{0.5 * k(ts), 0.5 * k(ts)} }},
		{"contexts=cpu.cpu&group_by=node&aggregation=avg", []string{env.srv.host.GUID},
			func(ts int64) []float64 { return []float64{0.75 * k(ts)} }},
		{"contexts=cpu.cpu|system.load&group_by=context&aggregation=sum", []string{"system.load", "cpu.cpu"},
			func(ts int64) []float64 { return []float64{3 * k(ts), 3 * k(ts)} }},
		{"contexts=cpu.cpu|system.load&group_by=units&aggregation=sum", []string{"load", "percentage"},
			func(ts int64) []float64 { return []float64{3 * k(ts), 3 * k(ts)} }},
		{"contexts=cpu.cpu&group_by=label&group_by_label=_collect_plugin&aggregation=sum", []string{"proc.plugin"},
			func(ts int64) []float64 { return []float64{3 * k(ts)} }},
		{"contexts=cpu.cpu|system.load&group_by=label,context&group_by_label=_collect_module&aggregation=sum", []string{"/proc/loadavg,system.load", "/proc/stat,cpu.cpu"},
			func(ts int64) []float64 { return []float64{3 * k(ts), 3 * k(ts)} }},
		// percentage: a group's selected part over its selected and
		// hidden (not in dimensions) parts, as Netdata computes it; with
		// nothing hidden every group is 100.
		{"contexts=cpu.cpu&group_by=instance&aggregation=percentage", []string{"cpu.cpu0" + g, "cpu.cpu1" + g},
			func(ts int64) []float64 { return []float64{100, 100} }},
		{"contexts=cpu.cpu&dimensions=user&group_by=instance&aggregation=percentage", []string{"cpu.cpu0" + g, "cpu.cpu1" + g},
			func(ts int64) []float64 { return []float64{100.0 / 3, 100.0 / 3} }},
		// percentage-of-instance: one group per instance, its selected
		// metrics over those plus its hidden ones (not in dimensions, or
		// hidden by the collector: system.cpu's idle), as Netdata's.
		{"contexts=cpu.cpu&group_by=percentage-of-instance", []string{"cpu.cpu0" + g, "cpu.cpu1" + g},
			func(ts int64) []float64 { return []float64{100, 100} }},
		{"contexts=cpu.cpu&dimensions=system&group_by=percentage-of-instance", []string{"cpu.cpu0" + g, "cpu.cpu1" + g},
			func(ts int64) []float64 { return []float64{200.0 / 3, 200.0 / 3} }},
		{"contexts=cpu.cpu&dimensions=user&group_by=percentage-of-instance,dimension&aggregation=max", []string{"cpu.cpu0" + g, "cpu.cpu1" + g},
			func(ts int64) []float64 { return []float64{100.0 / 3, 100.0 / 3} }},
		{"contexts=system.cpu&group_by=percentage-of-instance", []string{"system.cpu" + g},
			func(ts int64) []float64 { return []float64{9 * float64(ts%5)} }},
		{"contexts=disk.io&group_by=dimension&aggregation=extremes", []string{"reads", "writes"},
			func(ts int64) []float64 { return []float64{0.5 * k(ts), -float64(ts % 7)} }},
		{"contexts=disk.io&group_by=instance&aggregation=sum", []string{"disk.vda" + g}, // mixed dims: absolute
			func(ts int64) []float64 { return []float64{0.5*k(ts) + float64(ts%7)} }},
		{"contexts=cpu.cpu&group_by=selected&aggregation=sum", []string{"selected"},
			func(ts int64) []float64 { return []float64{3 * k(ts)} }},
		// Two passes: instances summed, then their sums averaged or
		// summed per node; dimension+instance, then averaged by dimension.
		{"contexts=cpu.cpu&group_by%5B0%5D=instance&aggregation%5B0%5D=sum&group_by%5B1%5D=node&aggregation%5B1%5D=avg", []string{env.srv.host.GUID},
			func(ts int64) []float64 { return []float64{1.5 * k(ts)} }},
		{"contexts=cpu.cpu&group_by=instance&aggregation=sum&group_by%5B1%5D=node&aggregation%5B1%5D=sum", []string{env.srv.host.GUID},
			func(ts int64) []float64 { return []float64{3 * k(ts)} }},
		{"contexts=cpu.cpu|system.load&group_by=dimension,context&aggregation=sum&group_by%5B1%5D=context&aggregation%5B1%5D=max", []string{"system.load", "cpu.cpu"},
			func(ts int64) []float64 { return []float64{1.5 * k(ts), 2 * k(ts)} }},
		{"contexts=cpu.cpu&options=percentage", []string{"user", "system"},
			func(ts int64) []float64 { return []float64{100.0 / 3, 200.0 / 3} }},
		// system.cpu's guest dims are t%5: zero at t%5==0 only, so they
		// stay; idle is hidden; nonzero keeps every non-zero column.
		{"contexts=system.load&dimensions=load1&options=nonzero", []string{"load1"},
			func(ts int64) []float64 { return []float64{0.5 * k(ts)} }},
	}
	for _, c := range cases {
		j := getJSON2(t, env, "/api/v3/data?after=-10&points=10&"+c.q)
		if strings.Join(j.View.Dimensions.IDs, ";") != strings.Join(c.ids, ";") {
			t.Errorf("%s: ids %q, want %q", c.q, j.View.Dimensions.IDs, c.ids)
			continue
		}
		times, vals, flags := j.points(t)
		if len(times) != 10 {
			t.Errorf("%s: %d rows, want 10", c.q, len(times))
		}
		for r, ts := range times {
			want := c.values(ts)
			for col := range want {
				if math.Abs(vals[r][col]-want[col]) > 1e-6 || flags[r][col] != 0 {
					t.Errorf("%s: %s at %d = %v (flags %d), want %v", c.q, c.ids[col], ts, vals[r][col], flags[r][col], want[col])
				}
			}
		}
	}
	// The second pass names the grouping view.dimensions.grouped_by shows.
	j2 := getJSON2(t, env, "/api/v3/data?contexts=cpu.cpu&after=-10&points=1&group_by=instance&group_by%5B1%5D=node")
	if g := j2.View.Dimensions.GroupedBy; len(g) != 1 || g[0] != "node" || j2.View.Dimensions.Aggregated[0] != 4 {
		t.Errorf("two passes: grouped_by %v aggregated %v", g, j2.View.Dimensions.Aggregated)
	}
	// time_group on one metric: over 5-second points of t%5, max is 4,
	// min 0, sum 10, average and median 2.
	for g, want := range map[string]float64{"max": 4, "min": 0, "sum": 10, "average": 2, "median": 2} {
		j := getJSON2(t, env, "/api/v3/data?contexts=system.cpu&dimensions=user&after=-100&points=20&time_group="+g)
		_, vals, _ := j.points(t)
		if len(vals) != 20 {
			t.Fatalf("time_group=%s: %d rows", g, len(vals))
		}
		for r := range vals {
			if vals[r][0] != want {
				t.Errorf("time_group=%s row %d = %v, want %v", g, r, vals[r][0], want)
			}
		}
	}
	// time_resampling=60 on 1-second data: each point covers whole
	// minutes, and the average is scaled to per-minute.
	j := getJSON2(t, env, "/api/v3/data?contexts=system.load&dimensions=load1&after=-300&points=300&time_resampling=60")
	if j.View.UpdateEvery%60 != 0 {
		t.Errorf("time_resampling=60: view update_every %d", j.View.UpdateEvery)
	}
	_, vals, _ := j.points(t)
	for r := range vals {
		// load1 averages 0.5*2 = 1 per second over whole minutes: 60 per minute.
		if !math.IsNaN(vals[r][0]) && math.Abs(vals[r][0]-60) > 1e-6 {
			t.Errorf("resampled load1 row %d = %v, want 60", r, vals[r][0])
		}
	}
	// cardinality_limit=3 over system.cpu's 9 visible dims: two kept, the
	// other seven folded into one, which sums them.
	j = getJSON2(t, env, "/api/v3/data?contexts=system.cpu&after=-10&points=1&cardinality_limit=3")
	if ids := j.View.Dimensions.IDs; len(ids) != 3 || ids[2] != "remaining 7 dimensions" || j.View.Dimensions.Names[2] != ids[2] || j.View.Cardinality == nil || j.View.Cardinality.Folded != 7 {
		t.Errorf("cardinality_limit=3: ids %v cardinality %+v", ids, j.View.Cardinality)
	}
	// The kept columns come largest first (by |sum| over the view), and
	// the folded one holds the sum of the rest.
	all := getJSON2(t, env, "/api/v3/data?contexts=system.cpu&after=-10&points=1")
	_, av, _ := all.points(t)
	_, fv, _ := j.points(t)
	type col struct {
		id string
		v  float64
	}
	var cols []col
	for i, id := range all.View.Dimensions.IDs {
		cols = append(cols, col{id, av[0][i]})
	}
	sort.SliceStable(cols, func(a, b int) bool { return math.Abs(cols[a].v) > math.Abs(cols[b].v) })
	rest := 0.0
	for _, c := range cols[2:] {
		rest += c.v
	}
	if ids := j.View.Dimensions.IDs; len(ids) == 3 && (ids[0] != cols[0].id || ids[1] != cols[1].id || math.Abs(fv[0][2]-rest) > 1e-6) {
		t.Errorf("cardinality_limit=3: kept %v = %v, want %s, %s and the rest %v (all: %v)", ids, fv[0], cols[0].id, cols[1].id, rest, cols)
	}
	// nonzero drops a column that is zero at every point: system.cpu's
	// user is t%5, zero every fifth second; over 1 point at such a second
	// it is gone.
	for ts := env.now.Unix() - 1; ; ts-- {
		if ts%5 == 0 {
			q := "/api/v3/data?contexts=system.cpu&dimensions=user|system&after=" + strconv.FormatInt(ts, 10) + "&before=" + strconv.FormatInt(ts, 10) + "&points=1"
			if ids := getJSON2(t, env, q).View.Dimensions.IDs; len(ids) != 2 {
				t.Errorf("without nonzero: %v", ids)
			}
			j := getJSON2(t, env, q+"&options=nonzero")
			if len(j.View.Dimensions.IDs) != 2 { // both zero: all kept
				t.Errorf("nonzero, all zero: %v", j.View.Dimensions.IDs)
			}
			j = getJSON2(t, env, "/api/v3/data?contexts=system.cpu&dimensions=user|idle&after="+strconv.FormatInt(ts, 10)+"&before="+strconv.FormatInt(ts, 10)+"&points=1&options=nonzero")
			if ids := j.View.Dimensions.IDs; len(ids) != 1 || ids[0] != "idle" {
				t.Errorf("nonzero: %v, want idle only", ids)
			}
			break
		}
	}
	// group-by-labels lists each group's label values.
	j = getJSON2(t, env, "/api/v3/data?contexts=cpu.cpu|system.load&group_by=context&after=-10&points=1&options=group-by-labels")
	if l := j.View.Dimensions.Labels["_collect_module"]; len(l) != 2 || l[0][0] != "/proc/loadavg" || l[1][0] != "/proc/stat" {
		t.Errorf("group-by-labels: %v", j.View.Dimensions.Labels)
	}
}

// TestV2Annotations: a metric without data at a point makes its group
// partial there, and a group with no data at all is empty (null value).
func TestV2Annotations(t *testing.T) {
	env := newTestEnv(t)
	now := env.now.Unix()
	// A third core that only holds the newest 5 seconds.
	c2 := &store.ChartDef{ID: "cpu.cpu2", Name: "cpu.cpu2", Type: "cpu", Context: "cpu.cpu", Family: "utilization",
		Title: "Core utilization", Units: "percentage", ChartType: "stacked", Plugin: "proc.plugin", Module: "/proc/stat",
		Priority: 1002, UpdateEvery: 1, Dims: dimsOf("user", "system")}
	if err := env.db.Register(c2); err != nil {
		t.Fatal(err)
	}
	for ts := now - 5; ts < now; ts++ {
		if err := env.db.Append(c2.ID, ts, []float64{7, 7}); err != nil {
			t.Fatal(err)
		}
	}
	j := getJSON2(t, env, "/api/v3/data?contexts=cpu.cpu&after=-10&points=10&group_by=dimension&aggregation=max")
	times, vals, flags := j.points(t)
	for r, ts := range times {
		if ts >= now-5 {
			if flags[r][0] != 0 || vals[r][0] != 7 {
				t.Errorf("at %d: %v flags %d, want 7 and none", ts, vals[r][0], flags[r][0])
			}
		} else if flags[r][0] != 4 {
			t.Errorf("at %d: flags %d, want partial (4)", ts, flags[r][0])
		}
	}
	j = getJSON2(t, env, "/api/v3/data?contexts=cpu.cpu&instances=cpu.cpu2&after=-10&points=10")
	times, vals, flags = j.points(t)
	for r, ts := range times {
		if ts < now-5 && (flags[r][0] != 1 || !math.IsNaN(vals[r][0])) {
			t.Errorf("cpu2 alone at %d: %v flags %d, want null and empty (1)", ts, vals[r][0], flags[r][0])
		}
	}
}

// TestV2BadInput: bad group_by, aggregation and time_group are 400s naming
// the value; points and cardinality_limit out of range are 400 or
// clamped as the package doc says; a query past its timeout is 504.
func TestV2BadInput(t *testing.T) {
	env := newTestEnv(t)
	for _, c := range []struct{ q, want string }{
		{"group_by=dimensions", "dimensions"},
		{"group_by=label", "group_by_label"},
		{"group_by%5B1%5D=dims", "dims"},
		{"group_by%5B1%5D=node&aggregation%5B1%5D=median", "median"},
		{"aggregation=mean", "mean"},
		{"time_group=bogus", "bogus"},
		{"points=-1", "points"},
		{"points=99999999", "points"},
		{"cardinality_limit=-2", "cardinality_limit"},
		{"cardinality_limit=x", "cardinality_limit"},
		{"time_resampling=-5", "time_resampling"},
		{"timeout=soon", "timeout"},
		// Selectors are bounded like weights' filters (4096 bytes).
		{"dimensions=" + strings.Repeat("*a", 2049), "dimensions is too long"},
		{"labels=" + strings.Repeat("*a", 2049), "labels is too long"},
		{"scope_instances=" + strings.Repeat("*a", 2049), "scope_instances is too long"},
		{"format=xml", "xml"},
		{"tier=3", "tier"},
	} {
		for _, v := range []string{"v2", "v3"} {
			p := "/api/" + v + "/data?contexts=cpu.cpu&" + c.q
			r := env.get(t, p)
			if r.status != 400 || !strings.Contains(string(r.body), c.want) {
				t.Errorf("GET %s = %d %s, want 400 naming %q", p, r.status, r.body, c.want)
			}
		}
	}
	// Clamped: a huge cardinality_limit limits nothing.
	j := getJSON2(t, env, "/api/v3/data?contexts=cpu.cpu&after=-10&points=1&cardinality_limit=99999999")
	if len(j.View.Dimensions.IDs) != 2 {
		t.Errorf("cardinality_limit=99999999: %v", j.View.Dimensions.IDs)
	}
	// points=0 is every stored point of the window.
	j = getJSON2(t, env, "/api/v3/data?contexts=system.load&after=-30&points=0")
	if times, _, _ := j.points(t); len(times) != 30 || j.View.UpdateEvery != 1 {
		t.Errorf("points=0: %d rows, update_every %d, want 30 and 1", len(times), j.View.UpdateEvery)
	}
	// Everything selected is bounded: a pattern matching every dimension
	// of every chart over the whole retention is answered (a few
	// charts here) or refused as too large, never unbounded.
	r := env.get(t, "/api/v3/data?contexts=*&dimensions=*&after=-3600&points=0")
	if r.status != 200 {
		t.Errorf("everything: %d %.200s", r.status, r.body)
	}
	// The time budget: timeout=1 (ms) on a query over every chart is
	// either done in time or answered 504, never overrun silently.
	r = env.get(t, "/api/v3/data?contexts=*&after=-600&points=0&timeout=1&group_by=instance")
	if r.status != 200 && r.status != 504 {
		t.Errorf("timeout=1: %d %.200s", r.status, r.body)
	}
	// A timeout too large for a Duration is clamped to 60 s like any
	// other, not wrapped to a negative budget that answers 504 at once.
	for _, v := range []string{"v2", "v3"} {
		p := "/api/" + v + "/data?contexts=system.load&after=-10&points=1&timeout=9223372036854775807"
		if r := env.get(t, p); r.status != 200 {
			t.Errorf("GET %s = %d %.200s, want 200", p, r.status, r.body)
		}
	}
	// alert_config: no config is 400, an unknown one 404.
	if r := env.get(t, "/api/v3/alert_config"); r.status != 400 {
		t.Errorf("alert_config without config = %d", r.status)
	}
	if r := env.get(t, "/api/v3/alert_config?config=00000000-0000-0000-0000-000000000000"); r.status != 404 {
		t.Errorf("alert_config unknown = %d", r.status)
	}
	// contexts: a window in the future holds no context; bad after is 400.
	c := decode(t, "contexts", env.get(t, "/api/v3/contexts?after=4102444800&before=4102444900").body).(map[string]any)
	if n := len(c["contexts"].(map[string]any)); n != 0 {
		t.Errorf("contexts in a future window: %d", n)
	}
	c = decode(t, "contexts", env.get(t, "/api/v3/contexts?after=-60").body).(map[string]any)
	if n := len(c["contexts"].(map[string]any)); n != 6 {
		t.Errorf("contexts of the last minute: %d, want 6", n)
	}
	// after=0 and before=0 are bounds not given, not "now".
	c = decode(t, "contexts", env.get(t, "/api/v3/contexts?after=0&before=0").body).(map[string]any)
	if n := len(c["contexts"].(map[string]any)); n != 6 {
		t.Errorf("contexts with after=0&before=0: %d, want 6", n)
	}
	if r := env.get(t, "/api/v3/contexts?after=soon"); r.status != 400 {
		t.Errorf("contexts after=soon: %d", r.status)
	}
	// registry: only hello is served.
	if r := env.get(t, "/api/v1/registry?action=access"); r.status != 403 {
		t.Errorf("registry access = %d, want 403", r.status)
	}
	if r := env.get(t, "/api/v1/registry"); r.status != 400 {
		t.Errorf("registry without action = %d, want 400", r.status)
	}
}

// TestV2Combinations runs the formats, group_bys and option sets in
// pairs: each answer is a 200 whose JSON formats parse, and no
// combination panics or errors.
func TestV2Combinations(t *testing.T) {
	env := newTestEnv(t)
	formats := []string{"json2", "json", "csv", "tsv", "ssv", "ssvcomma", "array", "jsonp", "datatable", "datasource", "csvjsonarray", "html", "markdown"}
	groups := []string{"dimension", "instance", "node", "context", "units", "label&group_by_label=_collect_module", "percentage-of-instance", "selected", "dimension,instance,node"}
	opts := []string{"", "raw", "minimal-stats|long-json-keys", "nonzero|group-by-labels|flip|null2zero", "percentage|abs|ms|debug"}
	// Every format with every option set (the grouping taking turns), and
	// every grouping with every option set in json2: all pairs, a tenth
	// of the full product (seconds under -race on a loaded CI box).
	type combo struct{ f, g, o string }
	var combos []combo
	for fi, f := range formats {
		for oi, o := range opts {
			combos = append(combos, combo{f, groups[(fi+oi)%len(groups)], o})
		}
	}
	for _, g := range groups {
		for _, o := range opts {
			combos = append(combos, combo{"json2", g, o})
		}
	}
	for i, c := range combos {
		p := "/api/v3/data?contexts=cpu.*|system.*|disk.*&after=-20&points=7&cardinality_limit=4&format=" + c.f + "&group_by=" + c.g + "&options=" + c.o
		if i%2 == 1 {
			p += "&aggregation=extremes&time_group=median"
		}
		r := env.get(t, p)
		if r.status != 200 {
			t.Errorf("GET %s = %d %.200s", p, r.status, r.body)
			continue
		}
		if c.f != "jsonp" && c.f != "datasource" && !json.Valid(r.body) {
			t.Errorf("GET %s: invalid JSON %.300s", p, r.body)
		}
	}
}
