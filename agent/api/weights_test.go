package api

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/url"
	"strings"
	"testing"

	"peerdns/agent/store"
)

// addShiftChart adds test.shift to the env's store: "steady" noise and
// "moved", which steps up by half its level 30 s before the newest point;
// the detector's bits are set where a detector would flag the step.
func addShiftChart(t *testing.T, env *testEnv) {
	t.Helper()
	def := &store.ChartDef{ID: "test.shift", Context: "test.shift", Family: "shift", Title: "shift", Units: "u",
		Dims: dimsOf("steady", "moved")}
	if err := env.db.Register(def); err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(3, 5))
	end := env.now.Unix() - 1
	for ts := end - 599; ts <= end; ts++ {
		moved := 100 + 2*r.NormFloat64()
		if ts >= end-30 {
			moved += 50
		}
		if err := env.db.Append(def.ID, ts, []float64{70 + r.NormFloat64(), moved}); err != nil {
			t.Fatal(err)
		}
		if ts >= end-30 && ts < end-24 {
			if _, err := env.db.MarkAnomalous(def.ID, ts, []bool{false, true}); err != nil {
				t.Fatal(err)
			}
		}
	}
}

type weightsJSON struct {
	Method string `json:"method"`
	View   struct {
		Highlight *struct {
			After, Before, Duration int64
			Points                  int
		} `json:"highlight"`
		Baseline *struct {
			After, Before, Duration int64
			Points                  int
		} `json:"baseline"`
	} `json:"view"`
	Results []struct {
		ID      string         `json:"id"`
		Weight  float64        `json:"weight"`
		Context string         `json:"context"`
		Family  string         `json:"family"`
		Info    map[string]any `json:"info"`
	} `json:"results"`
	Partial bool `json:"partial"`
}

func TestWeightsOverHTTP(t *testing.T) {
	env := newTestEnv(t)
	addShiftChart(t, env)
	end := env.now.Unix()
	for _, v := range []string{"v1", "v2", "v3"} {
		for _, m := range []string{"ks2", "volume", "anomaly-rate"} {
			t.Run(v+"/"+m, func(t *testing.T) {
				r := env.get(t, "/api/"+v+"/weights?method="+m+"&after=-60")
				if r.status != 200 || !strings.HasPrefix(r.header.Get("Content-Type"), "application/json") {
					t.Fatalf("status %d %q: %s", r.status, r.header.Get("Content-Type"), r.body)
				}
				var w weightsJSON
				if err := json.Unmarshal(r.body, &w); err != nil {
					t.Fatalf("decode: %v\n%s", err, r.body)
				}
				if w.Method != m || len(w.Results) == 0 {
					t.Fatalf("method %q, %d results", w.Method, len(w.Results))
				}
				top := w.Results[0]
				if top.ID != "test.shift.moved" || top.Context != "test.shift" || top.Family != "shift" || top.Info["chart"] != "test.shift" {
					t.Errorf("top result = %+v", top)
				}
				if len(w.Results) > 1 && w.Results[1].Weight >= top.Weight {
					t.Errorf("results not sorted by weight: %v then %v", top.Weight, w.Results[1].Weight)
				}
				h := w.View.Highlight
				if h == nil || h.After != end-60 || h.Before != end || h.Duration != 60 {
					t.Errorf("view.highlight = %+v", h)
				}
				if b := w.View.Baseline; (m == "anomaly-rate") != (b == nil) || b != nil && (b.Before != end-60 || b.After != end-300) {
					t.Errorf("view.baseline = %+v", b)
				}
				// points count the stored points each window held
				// (points=500 groups none of them): the highlight's
				// newest second is not stored yet, so 59; 240 before it.
				if want := map[string]int{"ks2": 59, "volume": 59, "anomaly-rate": 60}[m]; h != nil && h.Points != want {
					t.Errorf("view.highlight.points = %d, want %d", h.Points, want)
				}
				if b := w.View.Baseline; b != nil && b.Points != 240 {
					t.Errorf("view.baseline.points = %d, want 240", b.Points)
				}
				var raw map[string]any
				json.Unmarshal(r.body, &raw)
				if _, ok := raw["contexts"]; ok != (v == "v1") {
					t.Errorf("Netdata's contexts member present = %v on %s", ok, v)
				}
			})
		}
	}
}

// TestWeightsV1NetdataLayout: the v1 answer has every member of Netdata
// 1.37's answer to the same query, and the contexts nesting in its shape.
func TestWeightsV1NetdataLayout(t *testing.T) {
	env := newTestEnv(t)
	for _, c := range []struct{ ref, path string }{
		{"api_v1_weights_method-volume_after-60_before-0_context-system.cpu.json", "/api/v1/weights?method=volume&after=-60&before=0&context=system.cpu"},
		{"api_v1_weights_method-ks2_after-60_before-0.json", "/api/v1/weights?method=ks2&after=-60&before=0"},
	} {
		var want, got map[string]any
		if err := json.Unmarshal(readRef(t, c.ref), &want); err != nil {
			t.Fatal(err)
		}
		r := env.get(t, c.path)
		if r.status != 200 {
			t.Fatalf("%s: %d %s", c.path, r.status, r.body)
		}
		if err := json.Unmarshal(r.body, &got); err != nil {
			t.Fatal(err)
		}
		for _, k := range keys(want) {
			if _, ok := got[k]; !ok {
				t.Errorf("%s: Netdata member %q missing", c.path, k)
			}
		}
		for _, k := range keys(want["statistics"].(map[string]any)) {
			if _, ok := got["statistics"].(map[string]any)[k]; !ok {
				t.Errorf("%s: statistics.%s missing", c.path, k)
			}
		}
		ctxs, _ := got["contexts"].(map[string]any)
		if len(ctxs) == 0 {
			t.Fatalf("%s: no contexts:\n%s", c.path, r.body)
		}
		for name, cv := range ctxs {
			charts := cv.(map[string]any)["charts"].(map[string]any)
			for chart, ch := range charts {
				dims, ok := ch.(map[string]any)["dimensions"].(map[string]any)
				if !ok || len(dims) == 0 {
					t.Errorf("contexts.%s.charts.%s has no dimensions", name, chart)
				}
				for d, v := range dims {
					if f, ok := v.(float64); !ok || f < 0 || f > 1 {
						t.Errorf("contexts.%s.charts.%s.dimensions.%s = %v, want a score in [0, 1]", name, chart, d, v)
					}
				}
			}
		}
		if strings.Contains(c.path, "system.cpu") && len(ctxs) != 1 {
			t.Errorf("context filter: contexts %v", keys(ctxs))
		}
	}
}

func TestWeightsAlertsWithoutWindow(t *testing.T) {
	env := newTestEnv(t)
	r := env.get(t, "/api/v3/weights")
	var w weightsJSON
	if err := json.Unmarshal(r.body, &w); err != nil || r.status != 200 {
		t.Fatalf("%d %v: %s", r.status, err, r.body)
	}
	// The env's alerts: system.cpu WARNING now, system.ram CLEAR, load UNDEFINED.
	if w.Method != "alerts" || len(w.Results) != 1 || w.Results[0].ID != "system.cpu" || w.Results[0].Weight != 0.5 {
		t.Errorf("alerts now = %s", r.body)
	}
	if w.View.Highlight != nil {
		t.Errorf("a highlight without a window: %+v", w.View.Highlight)
	}
}

func TestWeightsLimitAndFilters(t *testing.T) {
	env := newTestEnv(t)
	addShiftChart(t, env)
	var w weightsJSON
	r := env.get(t, "/api/v2/weights?method=ks2&after=-60&limit=2")
	json.Unmarshal(r.body, &w)
	if len(w.Results) != 2 || w.Results[0].ID != "test.shift.moved" {
		t.Errorf("limit=2: %s", r.body)
	}
	r = env.get(t, "/api/v2/weights?method=volume&after=-60&contexts=cpu.*&dimensions=user")
	w = weightsJSON{}
	json.Unmarshal(r.body, &w)
	if len(w.Results) != 2 {
		t.Errorf("contexts=cpu.*&dimensions=user: %s", r.body)
	}
	for _, res := range w.Results {
		if !strings.HasPrefix(res.ID, "cpu.cpu") || !strings.HasSuffix(res.ID, ".user") {
			t.Errorf("filtered result %s", res.ID)
		}
	}
}

func TestWeightsBadInput(t *testing.T) {
	env := newTestEnv(t)
	end := env.now.Unix()
	for _, c := range []struct{ query, want string }{
		{"method=magic&after=-60", "unknown method"},
		{fmt.Sprintf("after=%d&before=%d", end, end-100), "is later than"},
		{"after=-60&points=0", "points must be a positive integer"},
		{"after=-60&limit=-1", "limit must be a positive integer"},
		{"after=-60&charts=" + url.QueryEscape("../../etc/passwd"), "invalid charts"},
		{"after=-60&chart=a/b", "invalid charts"},
		{"method=ks2", "needs a highlight window"},
		{"after=-60&time_group=mode", "unknown time_group"},
		{"after=-60&timeout=soon", "timeout"},
	} {
		for _, v := range []string{"v1", "v2", "v3"} {
			r := env.get(t, "/api/"+v+"/weights?"+c.query)
			if r.status != 400 || !strings.HasPrefix(r.header.Get("Content-Type"), "text/plain") || !strings.Contains(string(r.body), c.want) {
				t.Errorf("%s weights?%.60s = %d %q %q, want 400 text containing %q", v, c.query, r.status, r.header.Get("Content-Type"), r.body, c.want)
			}
		}
	}
}

// An explicit baseline (baseline_after, baseline_before] is the window the
// highlight is compared with, as Netdata queries it: the seconds between
// baseline_before and the highlight's after are not part of it.
func TestWeightsExplicitBaseline(t *testing.T) {
	env := newTestEnv(t)
	now := env.now.Unix()
	// 10 in the baseline (now-600, now-300] and in the highlight (now-60,
	// now], 0 in the gap between them.
	addChart(t, env, "test.base", 1, 600, func(ts int64, _ int) float64 {
		if ts > now-300 && ts <= now-60 {
			return 0
		}
		return 10
	})
	path := fmt.Sprintf("/api/v3/weights?method=volume&charts=test.base&after=%d&before=%d&baseline_after=%d&baseline_before=%d",
		now-60, now, now-600, now-300)
	r := env.get(t, path)
	if r.status != 200 {
		t.Fatalf("%s = %d %s", path, r.status, r.body)
	}
	var w weightsJSON
	if err := json.Unmarshal(r.body, &w); err != nil {
		t.Fatalf("decode: %v\n%s", err, r.body)
	}
	if b := w.View.Baseline; b == nil || b.After != now-600 || b.Before != now-300 || b.Points != 300 {
		t.Errorf("view.baseline = %+v, want after %d, before %d and its 300 points", b, now-600, now-300)
	}
	for _, res := range w.Results {
		if res.ID == "test.base.d000" && res.Weight != 0 {
			t.Errorf("weight of a dimension whose highlight equals its baseline = %v, want 0 (the gap was read as baseline)", res.Weight)
		}
	}
}

// TestWeightsRelativeWindowSign: a positive relative before counts back
// from now, as Netdata reads it (before=30 is before=-30), so the
// highlight is the past and not a window in the future with no data; and
// after=0 is the default window, as Netdata reads it, not an empty one.
func TestWeightsRelativeWindowSign(t *testing.T) {
	env := newTestEnv(t)
	addShiftChart(t, env)
	end := env.now.Unix()
	for _, v := range []string{"v1", "v2", "v3"} {
		for _, c := range []struct {
			q                 string
			wantAfter, wantBf int64
		}{
			{"after=-60&before=30", end - 90, end - 30},
			{"after=60&before=30", end - 90, end - 30},
			{"after=0", end - 300, end},
			{"after=0&before=-30", end - 330, end - 30},
		} {
			p := "/api/" + v + "/weights?method=volume&" + c.q
			r := env.get(t, p)
			if r.status != 200 {
				t.Errorf("GET %s = %d %s", p, r.status, r.body)
				continue
			}
			if v == "v1" {
				var w struct{ After, Before int64 }
				if err := json.Unmarshal(r.body, &w); err != nil {
					t.Fatal(err)
				}
				if w.After != c.wantAfter || w.Before != c.wantBf {
					t.Errorf("GET %s: highlight (%d, %d], want (%d, %d]", p, w.After, w.Before, c.wantAfter, c.wantBf)
				}
				continue
			}
			var w weightsJSON
			if err := json.Unmarshal(r.body, &w); err != nil {
				t.Fatal(err)
			}
			h := w.View.Highlight
			if h == nil || h.After != c.wantAfter || h.Before != c.wantBf || h.Points == 0 || len(w.Results) == 0 {
				t.Errorf("GET %s: highlight %+v, %d results; want (%d, %d] with points and results", p, h, len(w.Results), c.wantAfter, c.wantBf)
			}
		}
	}
}
