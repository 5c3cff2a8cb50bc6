package api

import (
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"peerdns/agent/logs"
)

// TestAISummaryKnownSeries checks the windowed summary against the known
// series: user is t%5, so every whole 5-second group averages 2.
func TestAISummaryKnownSeries(t *testing.T) {
	env := newTestEnv(t)
	last := env.now.Unix() - 1
	for _, tt := range []struct {
		q             string
		min, avg, max float64
	}{
		{"after=-100&points=20", 2, 2, 2},                                      // average of each group of 5
		{"after=-100&points=100", 0, 2, 4},                                     // every second
		{"after=-100&points=20&group=min", 0, 0, 0},                            // min of each group
		{"after=-100&points=20&group=stddev", 1.5811388, 1.5811388, 1.5811388}, // sqrt(2.5)
	} {
		sum := decode(t, tt.q, env.get(t, "/api/v3/ai/chart/system.cpu/summary?"+tt.q).body).(map[string]any)
		var user map[string]any
		for _, d := range sum["dimensions"].([]any) {
			if d.(map[string]any)["id"] == "user" {
				user = d.(map[string]any)
			}
		}
		if user == nil {
			t.Fatalf("%s: no user dimension: %v", tt.q, sum)
		}
		near := func(v any, w float64) bool { f, ok := v.(float64); return ok && f > w-1e-6 && f < w+1e-6 }
		if !near(user["min"], tt.min) || !near(user["avg"], tt.avg) || !near(user["max"], tt.max) || user["last"] != float64(last%5) {
			t.Errorf("%s: user = %v, want min %v avg %v max %v last %d", tt.q, user, tt.min, tt.avg, tt.max, last%5)
		}
	}
}

func TestAIBadInput(t *testing.T) {
	env := newTestEnv(t)
	for path, want := range map[string]int{
		"/api/v3/ai/chart/a/b/summary":                                             400,
		"/api/v3/ai/chart/a%2Fb/summary":                                           400,
		"/api/v3/ai/chart/a..b/summary":                                            400,
		"/api/v3/ai/chart/" + strings.Repeat("c", 300) + "/summary":                400,
		"/api/v3/ai/chart/system.cpu/summary?after=1795313790&before=1795313700":   400,
		"/api/v3/ai/chart/system.cpu/summary?points=0":                             400,
		"/api/v3/ai/charts?limit=-1":                                               400,
		"/api/v3/ai/charts?q=" + strings.Repeat("q", 10<<10):                       400,
		"/api/v3/ai/chart/system.cpu/summary?group=" + strings.Repeat("g", 10<<10): 400,
	} {
		r := env.get(t, path)
		if r.status != want || len(r.body) > 400 {
			t.Errorf("GET %.70s = %d %.200s, want %d", path, r.status, r.body, want)
		}
	}
}

// TestAISnapshotAnomalies: with a detector's event log the snapshot sums
// up the last ten minutes per chart and shows the newest events.
func TestAISnapshotAnomalies(t *testing.T) {
	ring := logs.NewRing(100)
	env := newTestEnv(t, func(o *Options) { o.Anomaly = ring })
	now := env.now
	ring.Add(logs.Entry{Time: now.Add(-time.Hour), Priority: logs.PriWarning, Unit: "system.load", Message: "old"})
	for i := 0; i < 6; i++ {
		chart := "system.cpu"
		if i%3 == 0 {
			chart = "system.ram"
		}
		ring.Add(logs.Entry{Time: now.Add(time.Duration(i-6) * time.Minute), Priority: logs.PriWarning, Unit: chart, Message: fmt.Sprintf("event %d", i)})
	}
	snap := decode(t, "snapshot", env.get(t, "/api/v3/ai/snapshot").body).(map[string]any)
	an := snap["anomalies"].(map[string]any)
	if an["available"] != true || an["events"] != 6.0 || an["capped"] != false {
		t.Fatalf("anomalies = %v", an)
	}
	charts := an["charts"].([]any)
	if len(charts) != 2 || charts[0].(map[string]any)["chart"] != "system.cpu" || charts[0].(map[string]any)["events"] != 4.0 {
		t.Errorf("per chart = %v, want system.cpu 4 then system.ram 2", charts)
	}
	latest := an["latest"].([]any)
	if len(latest) != 5 || latest[0].(map[string]any)["message"] != "event 5" {
		t.Errorf("latest = %v", latest)
	}
	if body := env.get(t, "/api/v3/ai/snapshot").body; len(body) > 16<<10 {
		t.Errorf("snapshot is %d bytes: too big for a model's context", len(body))
	}
}

// TestLongArguments: a 10 KB argument is a short 400 naming it on every
// endpoint that takes text, never a 500 or a scan with it.
func TestLongArguments(t *testing.T) {
	env := newTestEnv(t)
	long := strings.Repeat("x", 10<<10)
	for _, path := range []string{
		"/api/v3/q?q=" + long, "/api/v3/q?q=cpu&limit=" + long, "/api/v3/ai/charts?q=" + long, "/api/v3/ai/charts?limit=" + long,
		"/api/v3/logs?source=audit&q=" + long, "/api/v3/logs?source=audit&cursor=" + long, "/api/v3/processes?q=" + long,
		"/api/v3/processes?filter=" + long, "/api/v3/processes?limit=" + long, "/api/v1/data?chart=system.cpu&group=" + long,
		"/api/v1/data?chart=system.cpu&format=" + long, "/api/v1/data?chart=system.cpu&callback=" + long,
		"/api/v1/allmetrics?format=prometheus&source=" + long,
	} {
		r := env.get(t, path)
		if r.status != 400 || len(r.body) > 400 {
			t.Errorf("GET %.60s... = %d (%d bytes) %.120s, want a short 400", path, r.status, len(r.body), r.body)
		}
	}
	// Every other argument an error names, and a path's unknown command,
	// are cut too, whatever the status.
	for _, c := range []struct {
		path   string
		status int
	}{
		{"/api/v1/data?chart=system.cpu&points=" + long, 400}, {"/api/v1/data?chart=system.cpu&tier=" + long, 400},
		{"/api/v1/data?chart=system.cpu&after=" + long, 400}, {"/api/v1/data?chart=system.cpu&before=-" + long, 400},
		{"/api/v2/data?contexts=system.cpu&points=" + long, 400}, {"/api/v2/data?contexts=system.cpu&after=" + long, 400},
		{"/api/v1/chart?chart=" + long, 404}, {"/api/v1/context?context=" + long, 404},
		{"/api/v1/alarm_variables?chart=" + long, 404}, {"/api/v1/alarm_log?after=" + long, 400},
		{"/api/v1/alarm_count?status=" + long, 400}, {"/api/v3/export?format=" + long, 400},
		{"/api/v1/badge.svg?chart=system.cpu&precision=" + long, 400}, {"/api/v1/badge.svg?chart=system.cpu&multiply=" + long, 400},
		{"/api/v1/badge.svg?chart=system.cpu&divide=" + long, 400},
		{"/api/v1/weights?after=" + long, 400}, {"/api/v1/weights?after=-10&method=" + long, 400},
		{"/api/v1/weights?after=-10&points=" + long, 400}, {"/api/v1/weights?after=-10&method=value&time_group=" + long, 400},
		{"/api/v1/weights?after=-10&limit=" + long, 400}, {"/api/v1/weights?after=-10&timeout=" + long, 400},
		{"/api/v1/weights?after=-10&contexts=../" + long[:4000], 400},
		{"/api/v1/" + long, 404}, {"/api/v" + long, 404},
	} {
		r := env.get(t, c.path)
		if r.status != c.status || len(r.body) > 400 {
			t.Errorf("GET %.60s... = %d (%d bytes) %.120s, want a short %d", c.path, r.status, len(r.body), r.body, c.status)
		}
	}
}

func TestShort(t *testing.T) {
	for _, tt := range []struct {
		in   float64
		want string
	}{
		{float64(float32(10.32)), "10.32"}, {0.3769858, "0.3769858"}, {123456789, "123456800"}, {0, "0"}, {-2.5, "-2.5"},
		{math.NaN(), "null"}, {math.Inf(1), "null"},
	} {
		b, err := short(tt.in).MarshalJSON()
		if err != nil || string(b) != tt.want {
			t.Errorf("short(%v) = %s, %v; want %s", tt.in, b, err, tt.want)
		}
	}
}
