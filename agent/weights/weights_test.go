package weights

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"peerdns/agent/health"
	"peerdns/agent/ml"
	"peerdns/agent/store"
)

// Synthetic host: a few charts of noisy dimensions around different
// levels, and test.shift whose dimension "moved" steps up by half its
// level in the middle of the highlight. The real anomaly detector runs
// over every point as the agent runs it, so anomaly-rate reads real bits.
const (
	testBase      = int64(1_800_000_000)
	testHistory   = 1200 // seconds stored before the highlight
	testHighlight = 60
)

var testCharts = []struct {
	id, ctx, family string
	dims            []string
	levels          []float64
}{
	{"test.a", "test.a", "a", []string{"x1", "x2", "x3"}, []float64{20, 50, 200}},
	{"test.b", "test.b", "b", []string{"y1", "y2"}, []float64{30, 80}},
	{"test.c", "test.c", "c", []string{"z1", "z2", "z3", "z4"}, []float64{40, 60, 120, 500}},
	{"test.shift", "test.shift", "shift", []string{"steady", "moved"}, []float64{70, 100}},
}

// fillStore returns a store holding the synthetic host, and the unix
// second the highlight ends at (the newest point).
func fillStore(t testing.TB) (*store.DB, int64) {
	t.Helper()
	db, err := store.Open(store.Config{Tier0Retention: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	for _, c := range testCharts {
		def := &store.ChartDef{ID: c.id, Context: c.ctx, Family: c.family, Title: c.id, Units: "u"}
		for _, d := range c.dims {
			def.Dims = append(def.Dims, store.DimDef{ID: d})
		}
		if err := db.Register(def); err != nil {
			t.Fatal(err)
		}
	}
	det := ml.New(db, ml.Config{MinTrainSamples: 300, MaxTrainSeconds: 900, TrainEvery: 5 * time.Minute})
	r := rand.New(rand.NewPCG(7, 11))
	end := testBase + testHistory + testHighlight - 1
	shiftAt := end - testHighlight/2
	for ts := testBase; ts <= end; ts++ {
		for _, c := range testCharts {
			v := make([]float64, len(c.dims))
			for i, lvl := range c.levels {
				v[i] = lvl + lvl/50*r.NormFloat64() // noise of 2% of the level
				if c.id == "test.shift" && c.dims[i] == "moved" && ts >= shiftAt {
					v[i] += lvl / 2
				}
			}
			if err := db.Append(c.id, ts, v); err != nil {
				t.Fatal(err)
			}
		}
		det.Tick(ts)
	}
	return db, end
}

type fixedAlerts struct {
	alerts []health.Alert
	trans  []health.Transition
}

func (f fixedAlerts) Alerts() []health.Alert { return f.alerts }
func (f fixedAlerts) Transitions(after uint64) []health.Transition {
	var out []health.Transition
	for _, t := range f.trans {
		if t.UniqueID > after {
			out = append(out, t)
		}
	}
	return out
}

// testAlerts: test.shift went CRITICAL inside the highlight; test.a has
// been WARNING since long before it; test.b cleared long ago.
func testAlerts(end int64) fixedAlerts {
	return fixedAlerts{
		alerts: []health.Alert{
			{ID: 1, Name: "shift_level", Chart: "test.shift", Context: "test.shift", Family: "shift", Status: health.StatusCritical, LastStatusChange: end - 20},
			{ID: 2, Name: "a_level", Chart: "test.a", Context: "test.a", Family: "a", Status: health.StatusWarning, LastStatusChange: end - 900},
			{ID: 3, Name: "b_level", Chart: "test.b", Context: "test.b", Family: "b", Status: health.StatusClear, LastStatusChange: end - 800},
		},
		trans: []health.Transition{
			{UniqueID: 1, AlertID: 2, Chart: "test.a", When: end - 900, OldStatus: health.StatusClear, NewStatus: health.StatusWarning},
			{UniqueID: 2, AlertID: 3, Chart: "test.b", When: end - 800, OldStatus: health.StatusWarning, NewStatus: health.StatusClear},
			{UniqueID: 3, AlertID: 1, Chart: "test.shift", When: end - 20, OldStatus: health.StatusClear, NewStatus: health.StatusCritical},
		},
	}
}

func getter(args map[string]string) Getter {
	return func(k string) (string, bool) { v, ok := args[k]; return v, ok }
}

func mustParse(t *testing.T, args map[string]string, now int64) Request {
	t.Helper()
	r, err := ParseRequest(getter(args), now)
	if err != nil {
		t.Fatalf("ParseRequest(%v): %v", args, err)
	}
	return r
}

// TestShiftedDimensionRanksFirst: for every method, the dimension that
// moved in the highlight is the top result.
func TestShiftedDimensionRanksFirst(t *testing.T) {
	db, end := fillStore(t)
	al := testAlerts(end)
	for _, m := range []string{"volume", "ks2", "anomaly-rate", "value", "alerts"} {
		t.Run(m, func(t *testing.T) {
			req := mustParse(t, map[string]string{"method": m, "after": "-60"}, end)
			ans := Compute(db, al, req, time.Now)
			if len(ans.Results) < 2 {
				t.Fatalf("%d results", len(ans.Results))
			}
			top := ans.Results[0]
			want := "test.shift.moved"
			if m == "alerts" {
				want = "test.shift"
			}
			if top.ID != want {
				var b strings.Builder
				for _, r := range ans.Results[:min(5, len(ans.Results))] {
					fmt.Fprintf(&b, "\n  %s %.4f %v", r.ID, r.Weight, r.Info)
				}
				t.Fatalf("top result %s, want %s:%s", top.ID, want, b.String())
			}
			if top.Weight <= ans.Results[1].Weight {
				t.Errorf("top weight %v not above the second's %v", top.Weight, ans.Results[1].Weight)
			}
			if top.Context != "test.shift" || top.Family != "shift" || top.Info == nil {
				t.Errorf("top result = %+v", top)
			}
			if ans.Partial {
				t.Error("partial without a timeout")
			}
		})
	}
}

func TestBaselineDefaultsAndStats(t *testing.T) {
	db, end := fillStore(t)
	req := mustParse(t, map[string]string{"method": "ks2", "after": "-60"}, end)
	if req.Before != end || req.After != end-60 || req.BaselineBefore != end-60 || req.BaselineAfter != end-300 {
		t.Fatalf("windows = %+v", req)
	}
	ans := Compute(db, nil, req, time.Now)
	if ans.Stats.HighlightPts != 60 || ans.Stats.BaselinePts != 240 {
		t.Errorf("points: highlight %d baseline %d, want 60 and 240", ans.Stats.HighlightPts, ans.Stats.BaselinePts)
	}
	if ans.Stats.Examined != 11 || ans.Total != 11 {
		t.Errorf("examined %d, results %d; want 11 dimensions", ans.Stats.Examined, ans.Total)
	}
	// points=10: 6 seconds a point, baseline in the same points.
	req = mustParse(t, map[string]string{"method": "ks2", "after": "-60", "points": "10"}, end)
	ans = Compute(db, nil, req, time.Now)
	if ans.Stats.HighlightPts != 10 || ans.Stats.BaselinePts != 40 || ans.Results[0].ID != "test.shift.moved" {
		t.Errorf("points=10: highlight %d baseline %d top %s", ans.Stats.HighlightPts, ans.Stats.BaselinePts, ans.Results[0].ID)
	}
}

func TestFiltersLimitTimeout(t *testing.T) {
	db, end := fillStore(t)
	req := mustParse(t, map[string]string{"method": "volume", "after": "-60", "contexts": "test.a,test.b"}, end)
	ans := Compute(db, nil, req, time.Now)
	for _, r := range ans.Results {
		if r.Chart != "test.a" && r.Chart != "test.b" {
			t.Errorf("contexts filter let %s through", r.ID)
		}
	}
	if ans.Total != 5 {
		t.Errorf("%d results for two charts of 5 dimensions", ans.Total)
	}
	req = mustParse(t, map[string]string{"method": "volume", "after": "-60", "charts": "test.shift", "dimensions": "moved"}, end)
	if ans := Compute(db, nil, req, time.Now); ans.Total != 1 || ans.Results[0].ID != "test.shift.moved" {
		t.Errorf("chart and dimension filter: %+v", ans.Results)
	}
	req = mustParse(t, map[string]string{"method": "volume", "after": "-60", "limit": "3"}, end)
	if ans := Compute(db, nil, req, time.Now); len(ans.Results) != 3 || ans.Total != 11 {
		t.Errorf("limit 3: %d results of %d", len(ans.Results), ans.Total)
	}
	// A clock that moves 1 ms a call and a 2 ms budget: partial results.
	clock := time.Unix(end, 0)
	tick := func() time.Time { clock = clock.Add(time.Millisecond); return clock }
	req = mustParse(t, map[string]string{"method": "volume", "after": "-60", "timeout": "2"}, end)
	ans = Compute(db, nil, req, tick)
	if !ans.Partial || ans.Stats.Examined >= 11 {
		t.Errorf("2 ms budget: partial %v, examined %d", ans.Partial, ans.Stats.Examined)
	}
}

func TestParseRequest(t *testing.T) {
	now := int64(1_800_000_000)
	tests := []struct {
		name    string
		args    map[string]string
		wantErr string
		check   func(r Request) bool
	}{
		{"no window is alerts", map[string]string{}, "", func(r Request) bool { return r.Method == Alerts && !r.Window }},
		{"window defaults to volume", map[string]string{"after": "-60"}, "", func(r Request) bool {
			return r.Method == Volume && r.After == now-60 && r.Before == now && r.Points == 500 && r.TimeGroup == "cv"
		}},
		{"positive relative after", map[string]string{"after": "60", "before": "-10"}, "", func(r Request) bool { return r.After == now-70 && r.Before == now-10 }},
		{"absolute window", map[string]string{"after": "1799999000", "before": "1799999100"}, "", func(r Request) bool {
			return r.After == 1799999000 && r.BaselineAfter == 1799999000-400
		}},
		{"baseline given", map[string]string{"after": "-60", "baseline_after": "-600", "baseline_before": "-100"}, "", func(r Request) bool {
			return r.BaselineBefore == now-160 && r.BaselineAfter == now-760
		}},
		{"time_group", map[string]string{"method": "value", "after": "-60", "time_group": "max"}, "", func(r Request) bool { return r.TimeGroup == "max" }},
		{"unknown method", map[string]string{"method": "magic", "after": "-60"}, "unknown method", nil},
		{"method needs window", map[string]string{"method": "ks2"}, "needs a highlight window", nil},
		{"after later than before", map[string]string{"after": "1800000100", "before": "1800000000"}, "is later than", nil},
		{"empty window", map[string]string{"after": "1800000000", "before": "1800000000"}, "is later than", nil},
		{"points 0", map[string]string{"after": "-60", "points": "0"}, "points must be a positive integer", nil},
		{"points text", map[string]string{"after": "-60", "points": "x"}, "points must be a positive integer", nil},
		{"limit -1", map[string]string{"after": "-60", "limit": "-1"}, "limit must be a positive integer", nil},
		{"limit 0", map[string]string{"after": "-60", "limit": "0"}, "limit must be a positive integer", nil},
		{"timeout negative", map[string]string{"after": "-60", "timeout": "-5"}, "timeout", nil},
		{"bad time_group", map[string]string{"after": "-60", "time_group": "mode"}, "unknown time_group", nil},
		{"chart with slash", map[string]string{"after": "-60", "charts": "a/b"}, "invalid charts", nil},
		{"chart with dots", map[string]string{"after": "-60", "chart": "..secret"}, "invalid charts", nil},
		{"context with dots", map[string]string{"after": "-60", "contexts": "x..y"}, "invalid contexts", nil},
		{"long filter", map[string]string{"after": "-60", "dimensions": strings.Repeat("a", 10<<10)}, "too long", nil},
		{"after text", map[string]string{"after": "yesterday"}, "after must be an integer", nil},
		{"bad baseline", map[string]string{"after": "-60", "baseline_after": "1800000000", "baseline_before": "1799999000"}, "baseline_after", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := ParseRequest(getter(tt.args), now)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("ParseRequest(%v) error = %v, want one containing %q", tt.args, err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("ParseRequest(%v): %v", tt.args, err)
			}
			if !tt.check(r) {
				t.Errorf("ParseRequest(%v) = %+v", tt.args, r)
			}
		})
	}
}

func FuzzParseRequest(f *testing.F) {
	f.Add("ks2", "-60", "0", "500", "10", "system.*", "-600", "cv")
	f.Add("", "", "", "", "", "", "", "")
	f.Add("volume", "1799999000", "1800000000", "0", "-1", "../x", "x", "avg")
	f.Fuzz(func(t *testing.T, method, after, before, points, limit, charts, bafter, group string) {
		args := map[string]string{"method": method, "after": after, "before": before, "points": points,
			"limit": limit, "charts": charts, "baseline_after": bafter, "time_group": group}
		r, err := ParseRequest(getter(args), 1_800_000_000)
		if err != nil {
			return
		}
		if r.Window && (r.After >= r.Before || r.BaselineAfter >= r.BaselineBefore) {
			t.Fatalf("accepted an empty window: %+v", r)
		}
		if r.Points <= 0 || r.Limit < 0 {
			t.Fatalf("accepted points %d limit %d", r.Points, r.Limit)
		}
	})
}

func TestKS(t *testing.T) {
	a := []float64{1, 2, 3, 4, 5, 6, 7, 8}
	b := []float64{11, 12, 13, 14, 15, 16, 17, 18}
	d, info, ok := ks2(a, b)
	if !ok || d != 1 || info["p_value"].(float64) > 0.01 {
		t.Errorf("disjoint samples: D %v, %v", d, info)
	}
	d, info, _ = ks2([]float64{1, 2, 3, 4}, []float64{1, 2, 3, 4})
	if d != 0 || info["p_value"].(float64) != 1 {
		t.Errorf("equal samples: D %v, %v", d, info)
	}
	if _, _, ok := ks2([]float64{1}, []float64{1, 2}); ok {
		t.Error("one baseline point scored")
	}
	// The p-value falls as D grows.
	if p1, p2 := ksPValue(0.2, 50), ksPValue(0.4, 50); !(p1 > p2 && p2 > 0 && p1 < 1) {
		t.Errorf("ksPValue(0.2, 50) = %v, ksPValue(0.4, 50) = %v", p1, p2)
	}
}

func TestNetdataScores(t *testing.T) {
	rs := []Result{{Weight: 0.9}, {Weight: 0.1}, {Weight: 0.5}, {Weight: 0.5}}
	got := NetdataScores(KS2, rs)
	// Three unique values: the largest weight scores 0, the smallest 2/3.
	want := []float64{0, 2.0 / 3, 1.0 / 3, 1.0 / 3}
	for i := range want {
		if math.Abs(got[i]-want[i]) > 1e-12 {
			t.Errorf("NetdataScores = %v, want %v", got, want)
			break
		}
	}
	if got := NetdataScores(AnomalyRate, []Result{{Weight: 0.25}}); got[0] != 25 {
		t.Errorf("anomaly-rate score %v, want 25", got[0])
	}
}
