package query

import (
	"bytes"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"

	"peerdns/agent/store"
)

// refDir holds the Netdata 1.37 captures the layout tests compare with
// (see its README.md).
const refDir = "testdata/netdata-1.37"

// series builds a chart with the given dims whose tier-0 window starts at
// start and holds one point per second from f(dim, t); f returning NaN
// leaves a gap.
func series(start int64, n int, dims []store.DimDef, f func(d int, t int64) float64) Series {
	c := &store.ChartDef{ID: "test.chart", Name: "test.chart", Type: "test", Context: "test.ctx", Units: "u", UpdateEvery: 1, Dims: dims}
	w := &store.Window{ChartID: c.ID, Step: 1, Start: start}
	for di, d := range dims {
		w.Dims = append(w.Dims, d.ID)
		slots := make([]store.Agg, n)
		for i := range slots {
			v := f(di, start+int64(i))
			if !math.IsNaN(v) {
				slots[i] = store.Agg{Min: v, Max: v, Sum: v, Count: 1}
			}
		}
		w.Slots = append(w.Slots, slots)
	}
	return Series{Chart: c, Window: w}
}

func dims(ids ...string) []store.DimDef {
	var out []store.DimDef
	for _, id := range ids {
		out = append(out, store.DimDef{ID: id, Name: id, Algorithm: "absolute", Multiplier: 1, Divisor: 1})
	}
	return out
}

func TestNewPlan(t *testing.T) {
	tests := []struct {
		name             string
		after, before    int64
		points           int
		now, first, last int64
		step             int64
		want             Plan
		wantErr          bool
	}{
		// The reference capture: after=-60, points=10 at last_entry 1795313781.
		{"netdata reference", -60, 0, 10, 1795313782, 1795313536, 1795313781, 1,
			Plan{After: 1795313719, Before: 1795313778, Step: 1, Group: 6, Points: 10}, false},
		{"one point per second", -60, 0, 60, 1781, 1000, 1781, 1,
			Plan{After: 1722, Before: 1781, Step: 1, Group: 1, Points: 60}, false},
		{"more points than data", -10, 0, 500, 1781, 1000, 1781, 1,
			Plan{After: 1772, Before: 1781, Step: 1, Group: 1, Points: 10}, false},
		{"positive after is relative", 10, 0, 500, 1781, 1000, 1781, 1,
			Plan{After: 1772, Before: 1781, Step: 1, Group: 1, Points: 10}, false},
		// Netdata pads a window that starts before the data with null
		// rows instead of moving after (its load_defaults capture).
		{"not clamped to first entry", -60, 0, 60, 1781, 1761, 1781, 1,
			Plan{After: 1722, Before: 1781, Step: 1, Group: 1, Points: 60}, false},
		{"before in the future clamps to now", -10, 100, 60, 1781, 1000, 1790, 1,
			Plan{After: 1772, Before: 1781, Step: 1, Group: 1, Points: 10}, false},
		{"absolute window", 1795313700, 1795313759, 6, 1795313781, 1795310000, 1795313781, 1,
			Plan{After: 1795313691, Before: 1795313750, Step: 1, Group: 10, Points: 6}, false}, // aligned to the group
		{"tier 1 minutes", -3600, 0, 10, 7200, 60, 7200, 60,
			Plan{After: 3660, Before: 7200, Step: 60, Group: 6, Points: 10}, false},
		{"no data yet", -60, 0, 60, 1781, 0, 0, 1, Plan{After: 1781, Before: 1781, Step: 1}, false},
		{"window before retention", 1795300000, 1795300100, 60, 1795313781, 1795310000, 1795313781, 1, Plan{After: 1795300001, Before: 1795300100, Step: 1, Group: 2, Points: 50}, false},
		{"after later than before", 1795313790, 1795313700, 10, 1795313799, 1, 1795313799, 1, Plan{}, true},
		{"zero points", -60, 0, 0, 1781, 1000, 1781, 1, Plan{}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := NewPlan(tt.after, tt.before, tt.points, false, tt.now, tt.first, tt.last, tt.step)
			if (err != nil) != tt.wantErr {
				t.Fatalf("NewPlan err = %v, wantErr %v", err, tt.wantErr)
			}
			if err == nil && got != tt.want {
				t.Fatalf("NewPlan = %+v, want %+v", got, tt.want)
			}
			if err == nil && got.Points > 0 {
				if got.RowTime(got.Points-1) != got.Before {
					t.Fatalf("last row time %d != before %d", got.RowTime(got.Points-1), got.Before)
				}
			}
		})
	}
}

// TestGrouping checks every grouping against values computed by hand on
// the series v(t) = t - 1000 for dim a and 2*(t-1000) for dim b.
func TestGrouping(t *testing.T) {
	s := series(1000, 120, dims("a", "b"), func(d int, t int64) float64 {
		return float64(t-1000) * float64(d+1)
	})
	plan := Plan{After: 1060, Before: 1119, Step: 1, Group: 6, Points: 10}
	for _, tt := range []struct {
		g    Group
		want func(lo, hi float64) float64 // over the a-values lo..hi of one group
	}{
		{GroupAverage, func(lo, hi float64) float64 { return (lo + hi) / 2 }},
		{GroupMin, func(lo, hi float64) float64 { return lo }},
		{GroupMax, func(lo, hi float64) float64 { return hi }},
		{GroupSum, func(lo, hi float64) float64 { return (lo + hi) * (hi - lo + 1) / 2 }},
		{GroupMedian, func(lo, hi float64) float64 { return (lo + hi) / 2 }},
	} {
		t.Run(tt.g.String(), func(t *testing.T) {
			req := &Request{Group: tt.g, Points: 10}
			res, err := Run(req, plan, []Series{s})
			if err != nil {
				t.Fatal(err)
			}
			if res.Rows() != 10 || len(res.Columns) != 2 {
				t.Fatalf("rows=%d cols=%d, want 10x2", res.Rows(), len(res.Columns))
			}
			for r := 0; r < 10; r++ {
				lo := float64(60 + 6*r)
				hi := lo + 5
				if got, want := res.At(r, 0), tt.want(lo, hi); got != want {
					t.Errorf("row %d a = %v, want %v", r, got, want)
				}
				if got, want := res.At(r, 1), 2*tt.want(lo, hi); got != want {
					t.Errorf("row %d b = %v, want %v", r, got, want)
				}
			}
			if res.DBPoints[0] != 120 {
				t.Errorf("db points = %d, want 120", res.DBPoints[0])
			}
		})
	}
}

// TestNetdataGroupings checks the groupings beyond average/min/max/sum/
// median on the same series: groups of 6 consecutive values lo..lo+5.
func TestNetdataGroupings(t *testing.T) {
	s := series(1000, 120, dims("a", "b"), func(d int, t int64) float64 {
		return float64(t-1000) * float64(d+1)
	})
	plan := Plan{After: 1060, Before: 1119, Step: 1, Group: 6, Points: 10}
	sd6 := math.Sqrt(3.5) // sample standard deviation of 6 consecutive integers
	for _, tt := range []struct {
		name string
		want func(lo float64) float64 // for dim a; dim b is twice (cv: the same)
		same bool
	}{
		{"incremental-sum", func(lo float64) float64 { return 5 }, false},
		{"incremental_sum", func(lo float64) float64 { return 5 }, false},
		{"stddev", func(lo float64) float64 { return sd6 }, false},
		{"cv", func(lo float64) float64 { return 100 * sd6 / (lo + 2.5) }, true},
		{"rsd", func(lo float64) float64 { return 100 * sd6 / (lo + 2.5) }, true},
		{"trimmed-mean", func(lo float64) float64 { return lo + 2.5 }, false},
		{"trimmed-mean25", func(lo float64) float64 { return lo + 2.5 }, false}, // drops lo and lo+5
		{"percentile", func(lo float64) float64 { return lo + 5 }, false},
		{"percentile50", func(lo float64) float64 { return lo + 2 }, false},
		{"extremes", func(lo float64) float64 { return lo + 5 }, false},
		{"des", func(lo float64) float64 { return lo + 5 }, false}, // Holt follows a line exactly
	} {
		t.Run(tt.name, func(t *testing.T) {
			g, err := ParseGroup(tt.name)
			if err != nil {
				t.Fatal(err)
			}
			res, err := Run(&Request{Group: g, Points: 10}, plan, []Series{s})
			if err != nil {
				t.Fatal(err)
			}
			for r := 0; r < 10; r++ {
				lo := float64(60 + 6*r)
				want := tt.want(lo)
				if got := res.At(r, 0); math.Abs(got-want) > 1e-9 {
					t.Errorf("row %d a = %v, want %v", r, got, want)
				}
				if !tt.same {
					want *= 2
				}
				if got := res.At(r, 1); math.Abs(got-want) > 1e-9 {
					t.Errorf("row %d b = %v, want %v", r, got, want)
				}
			}
		})
	}
	// ses: a constant stays constant; a step from 0 to 10 climbs toward 10
	// without reaching or passing it, and the level carries across points.
	step := series(0, 60, dims("a"), func(_ int, t int64) float64 {
		if t < 30 {
			return 0
		}
		return 10
	})
	res, err := Run(&Request{Group: GroupSES}, Plan{After: 0, Before: 59, Step: 1, Group: 6, Points: 10}, []Series{step})
	if err != nil {
		t.Fatal(err)
	}
	prev := -1.0
	for r := 0; r < 10; r++ {
		v := res.At(r, 0)
		switch {
		case r < 5 && v != 0:
			t.Errorf("ses row %d = %v before the step, want 0", r, v)
		case r >= 5 && !(v > prev && v < 10):
			t.Errorf("ses row %d = %v, want rising toward 10 from %v", r, v, prev)
		}
		prev = v
	}
	// countif without a condition counts the points equal to 0, as
	// Netdata's does (TestCountIf has the conditions).
	if g, err := ParseGroup("countif"); err != nil || g.String() != "countif" || parseCountIf("") != (countIf{"==", 0}) {
		t.Errorf("ParseGroup(countif) = %v, %v", g, err)
	}
	if g, _ := ParseGroup("EMA"); g != GroupSES {
		t.Errorf("ParseGroup(EMA) = %v, want ses", g)
	}
}

func TestGapsAndTier1(t *testing.T) {
	// Slots 10..19 are missing: the second group of 10 is null, the
	// third averages only what exists.
	s := series(0, 40, dims("a"), func(_ int, t int64) float64 {
		if t >= 10 && t < 25 {
			return math.NaN()
		}
		return float64(t)
	})
	res, err := Run(&Request{}, Plan{After: 0, Before: 39, Step: 1, Group: 10, Points: 4}, []Series{s})
	if err != nil {
		t.Fatal(err)
	}
	want := []float64{4.5, math.NaN(), 27, 34.5}
	for r, w := range want {
		got := res.At(r, 0)
		if !(got == w || math.IsNaN(got) && math.IsNaN(w)) {
			t.Errorf("row %d = %v, want %v", r, got, w)
		}
	}
	// Tier 1: each slot is a minute aggregate; average weights by count.
	w := &store.Window{ChartID: "x", Tier: 1, Step: 60, Start: 600, Dims: []string{"a"}, Slots: [][]store.Agg{{
		{Min: 1, Max: 3, Sum: 120, Count: 60},  // avg 2
		{Min: 0, Max: 10, Sum: 300, Count: 30}, // avg 10, only half the minute
	}}}
	ts := Series{Chart: &store.ChartDef{ID: "x", Dims: dims("a")}, Window: w}
	plan := Plan{After: 600, Before: 660, Step: 60, Group: 2, Points: 1}
	for g, want := range map[Group]float64{GroupAverage: 420.0 / 90, GroupMin: 0, GroupMax: 10, GroupSum: 420} {
		res, err := Run(&Request{Group: g, Tier: 1}, plan, []Series{ts})
		if err != nil {
			t.Fatal(err)
		}
		if got := res.At(0, 0); math.Abs(got-want) > 1e-12 {
			t.Errorf("tier 1 %v = %v, want %v", g, got, want)
		}
		if res.DBPoints[1] != 2 {
			t.Errorf("tier 1 db points = %v", res.DBPoints)
		}
	}
}

func TestOptionsAndDimensions(t *testing.T) {
	ds := dims("zero", "pos", "neg", "idle")
	ds[3].Hidden = true
	s := series(100, 10, ds, func(d int, t int64) float64 {
		switch d {
		case 0:
			return 0
		case 1:
			return 30
		case 2:
			return -10
		}
		return 60
	})
	plan := Plan{After: 100, Before: 109, Step: 1, Group: 5, Points: 2}
	run := func(dimsPat string, o Options) *Result {
		t.Helper()
		res, err := Run(&Request{Dimensions: dimsPat, Options: o}, plan, []Series{s})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	names := func(r *Result) string {
		var n []string
		for _, c := range r.Columns {
			n = append(n, c.ID)
		}
		return strings.Join(n, ",")
	}
	if got := names(run("", 0)); got != "zero,pos,neg" {
		t.Errorf("default columns = %s (hidden must be left out)", got)
	}
	if got := names(run("idle|pos", 0)); got != "pos,idle" {
		t.Errorf("pattern columns = %s, want chart order pos,idle", got)
	}
	if got := names(run("!zero,*", 0)); got != "pos,neg,idle" {
		t.Errorf("negative pattern = %s", got)
	}
	if got := names(run("", OptNonZero)); got != "pos,neg" {
		t.Errorf("nonzero columns = %s", got)
	}
	if got := run("", OptAbs).At(0, 2); got != 10 {
		t.Errorf("abs = %v", got)
	}
	// percentage: of the total of all dims, hidden ones included (|30|+|-10|+60 = 100).
	if got := run("", OptPercentage).At(0, 1); got != 30 {
		t.Errorf("percentage = %v, want 30", got)
	}
	if _, err := Run(&Request{Dimensions: "nosuch"}, plan, []Series{s}); err != ErrNoMetrics {
		t.Errorf("unmatched dimensions err = %v, want ErrNoMetrics", err)
	}
}

func TestParseRequest(t *testing.T) {
	tests := []struct {
		q       string
		wantErr string
	}{
		{"chart=system.cpu", ""},
		{"chart=system.cpu&after=-60&before=0&points=10&group=max&format=csv&options=jsonwrap|nonzero&tier=1", ""},
		{"points=0", "points must be a positive integer"},
		{"points=-5", "points must be a positive integer"},
		{"points=abc", "points must be a positive integer"},
		{"points=100000000", "points must be at most"},
		{"group=bogus", "unknown group"},
		{"format=bogus", "unknown format"},
		{"tier=2", "tier must be 0 or 1"},
		{"tier=x", "tier must be 0 or 1"},
		{"after=yesterday", "after must be"},
		{"before=1e40", "before must be"},
	}
	for _, tt := range tests {
		t.Run(tt.q, func(t *testing.T) {
			_, err := ParseRequest(getter(tt.q))
			if tt.wantErr == "" && err != nil {
				t.Fatalf("ParseRequest(%q) = %v", tt.q, err)
			}
			if tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)) {
				t.Fatalf("ParseRequest(%q) err = %v, want %q", tt.q, err, tt.wantErr)
			}
		})
	}
	r, err := ParseRequest(getter("chart=a&options=flip,seconds jsonwrap"))
	if err != nil {
		t.Fatal(err)
	}
	if r.Options != OptFlip|OptSeconds|OptJSONWrap || r.Points != DefaultPoints || r.After != DefaultAfter {
		t.Fatalf("parsed %+v", r)
	}
}

func getter(q string) Getter {
	m := map[string]string{}
	for _, kv := range strings.Split(q, "&") {
		k, v, _ := strings.Cut(kv, "=")
		m[k] = v
	}
	return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
}

// TestAppendNumberMatchesPrintf compares the fast path with strconv's
// correctly rounded "%.7f" (trimmed) over many values.
func TestAppendNumberMatchesPrintf(t *testing.T) {
	slow := func(v float64) string {
		s := strconv.FormatFloat(v, 'f', 7, 64)
		s = strings.TrimRight(s, "0")
		s = strings.TrimSuffix(s, ".")
		if s == "-0" || s == "" {
			s = "0"
		}
		return s
	}
	x := 0.123456789
	for i := 0; i < 200000; i++ {
		x = math.Mod(x*1.61803398875+0.7071, 1)
		v := (x - 0.5) * math.Pow(10, float64(i%12-4))
		got, want := string(AppendNumber(nil, v)), slow(v)
		if got != want {
			// Halfway cases may round either way at the 7th decimal.
			g, _ := strconv.ParseFloat(got, 64)
			w, _ := strconv.ParseFloat(want, 64)
			if math.Abs(g-w) > 1.01e-7 {
				t.Fatalf("AppendNumber(%v) = %s, want %s", v, got, want)
			}
		}
	}
}

func TestAppendNumber(t *testing.T) {
	for v, want := range map[float64]string{
		0: "0", 1: "1", -3: "-3", 0.6646061: "0.6646061", 10.37730394: "10.3773039",
		1.5: "1.5", -0.00000001: "0", 1795313778: "1795313778", 0.1 + 0.2: "0.3",
		-2.5: "-2.5", 0.00000005: "0.0000001", 0.0000123: "0.0000123", -1234.56789012: "-1234.5678901",
		123456789012345.5: "123456789012345.5", 1e20: "100000000000000000000", 7.0000001: "7.0000001",
	} {
		if got := string(AppendNumber(nil, v)); got != want {
			t.Errorf("AppendNumber(%v) = %s, want %s", v, got, want)
		}
	}
	if got := string(AppendNumber(nil, math.NaN())); got != "null" {
		t.Errorf("NaN = %s", got)
	}
}

// cpuResult is a system.cpu-like result for layout checks.
func cpuResult(t *testing.T, req *Request) *Result {
	t.Helper()
	ids := []string{"guest_nice", "guest", "steal", "softirq", "irq", "user", "system", "nice", "iowait", "idle"}
	ds := dims(ids...)
	ds[9].Hidden = true
	s := series(1795313700, 82, ds, func(d int, t int64) float64 {
		if d == 0 || d == 1 || d == 4 { // guest_nice, guest, irq stay 0 as in the capture
			return 0
		}
		return float64((int(t)+d)%7) / 3
	})
	s.Chart.ID, s.Chart.Context = "system.cpu", "system.cpu"
	s.Latest = make([]float64, len(ids))
	plan, err := NewPlan(req.After, req.Before, req.Points, false, 1795313782, 1795313700, 1795313781, 1)
	if err != nil {
		t.Fatal(err)
	}
	res, err := Run(req, plan, []Series{s})
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// TestLayoutsMatchNetdata renders each format/option combination that the
// reference folder has a capture of and compares the JSON shape (keys and
// value types, recursively) with Netdata's.
func TestLayoutsMatchNetdata(t *testing.T) {
	cases := []struct{ file, q string }{
		{"api_v1_data_system.cpu_after-60_points10.json", ""},
		{"api_v1_data_system.cpu_after-60_points10_options-jsonwrap.json", "options=jsonwrap"},
		{"api_v1_data_system.cpu_after-60_points10_format-array.json", "format=array"},
		{"api_v1_data_system.cpu_after-60_points10_format-array_options-jsonwrap.json", "format=array&options=jsonwrap"},
		{"api_v1_data_system.cpu_after-60_points10_format-csv_options-jsonwrap.json", "format=csv&options=jsonwrap"},
		{"api_v1_data_system.cpu_after-60_points10_options-objectrows.json", "options=objectrows"},
		{"api_v1_data_system.cpu_after-60_points10_options-ms.json", "options=ms"},
		{"api_v1_data_system.cpu_after-60_points10_options-flip.json", "options=flip"},
		{"api_v1_data_system.cpu_after-60_points10_options-jsonwrap_nonzero_flip_seconds.json", "options=jsonwrap|nonzero|flip|seconds"},
		{"api_v1_data_system.cpu_after-60_points10_dimensions-user,system.json", "dimensions=user,system"},
		{"api_v1_data_system.cpu_after-60_points1_format-array_options-reduced.json", "format=array&points=1"},
	}
	for _, c := range cases {
		t.Run(c.file, func(t *testing.T) {
			ref, err := os.ReadFile(filepath.Join(refDir, c.file))
			if err != nil {
				t.Fatal(err)
			}
			q := "chart=system.cpu&after=-60&points=10"
			if c.q != "" {
				q += "&" + c.q
			}
			req, err := ParseRequest(getter(q))
			if err != nil {
				t.Fatal(err)
			}
			res := cpuResult(t, &req)
			out := res.Append(nil, &Wrap{Host: "vm", API: 1, UpdateEvery: 1, FirstEntry: 1795313700, LastEntry: 1795313781})
			var want, got any
			if err := json.Unmarshal(ref, &want); err != nil {
				t.Fatalf("reference: %v", err)
			}
			if err := json.Unmarshal(out, &got); err != nil {
				t.Fatalf("our output is not JSON: %v\n%s", err, out)
			}
			if ws, gs := shape(want), shape(got); ws != gs {
				t.Fatalf("shape differs\nnetdata: %s\nours:    %s\n%s", ws, gs, out)
			}
			if !strings.Contains(c.q, "array") {
				if wl, gl := labels(want), labels(got); !reflect.DeepEqual(wl, gl) {
					t.Fatalf("labels = %v, want %v", gl, wl)
				}
			}
		})
	}
}

// skeleton replaces what depends on the data (times, dates, numbers,
// nulls) with placeholders, leaving Netdata's layout: delimiters, line
// ends, keys and labels.
func skeleton(b []byte) string {
	s := string(b)
	s = regexp.MustCompile(`Date\(\d+(,\d+){5}\)`).ReplaceAllString(s, "DATE")
	s = regexp.MustCompile(`"?\d{4}-\d\d-\d\d \d\d:\d\d:\d\d"?`).ReplaceAllString(s, "TIME")
	s = regexp.MustCompile(`sig:'\d+'`).ReplaceAllString(s, "sig:'N'")
	return regexp.MustCompile(`(^|[^\w.])(-?\d+(\.\d+)?|null)\b`).ReplaceAllString(s, "${1}N")
}

// TestTextLayoutsMatchNetdata renders the formats that are not plain JSON
// (and the Google ones) and compares them with Netdata's captures byte
// for byte once the data is replaced by placeholders.
func TestTextLayoutsMatchNetdata(t *testing.T) {
	cases := []struct {
		file, q, ct string
		json        bool
	}{
		{"api_v1_data_system.cpu_after-60_points10_format-csvjsonarray.json", "format=csvjsonarray", "application/json; charset=utf-8", true},
		{"api_v1_data_system.cpu_after-60_points10_format-datasource_callback.js", "format=datasource&callback=cb", "application/x-javascript; charset=utf-8", false},
		{"api_v1_data_system.cpu_after-60_points10_format-datatable.json", "format=datatable", "application/json; charset=utf-8", true},
		{"api_v1_data_system.cpu_after-60_points10_format-html.html", "format=html", "text/html; charset=utf-8", false},
		{"api_v1_data_system.cpu_after-60_points10_format-jsonp_callback.js", "format=jsonp&callback=cb", "application/x-javascript; charset=utf-8", false},
		{"api_v1_data_system.cpu_after-60_points10_format-markdown.md", "format=markdown", "text/plain; charset=utf-8", false},
	}
	for _, c := range cases {
		t.Run(c.q, func(t *testing.T) {
			ref, err := os.ReadFile(filepath.Join(refDir, c.file))
			if err != nil {
				t.Fatal(err)
			}
			req, err := ParseRequest(getter("chart=system.cpu&after=-60&points=10&" + c.q))
			if err != nil {
				t.Fatal(err)
			}
			res := cpuResult(t, &req)
			out := res.Append(nil, &Wrap{Host: "vm", API: 1, UpdateEvery: 1, FirstEntry: 1795313700, LastEntry: 1795313781})
			if got, want := skeleton(out), skeleton(ref); got != want {
				t.Fatalf("layout differs from Netdata's\nnetdata:\n%s\nours:\n%s", want, got)
			}
			if ct := res.ContentType(); ct != c.ct {
				t.Errorf("Content-Type = %q, want %q", ct, c.ct)
			}
			if c.json && !json.Valid(out) {
				t.Errorf("not valid JSON:\n%s", out)
			}
			// Inside jsonwrap the result is JSON (a string for the text tables).
			req.Options |= OptJSONWrap
			out = cpuResult(t, &req).Append(nil, &Wrap{Host: "vm", LastEntry: 1795313781})
			if req.Format == FormatJSONP || req.Format == FormatDatasource {
				i, j := bytes.IndexByte(out, '('), bytes.LastIndexByte(out, ')')
				out = out[i+1 : j]
				if req.Format == FormatDatasource {
					out = out[bytes.Index(out, []byte("table:"))+6 : len(out)-1]
				}
			}
			if !json.Valid(out) {
				t.Errorf("jsonwrap is not JSON:\n%s", out)
			}
		})
	}
	// The Google data source protocol: reqId and version are echoed, a sig
	// equal to the data's is not_modified, callbacks that are not names
	// are refused.
	req, err := ParseRequest(getter("chart=system.cpu&format=datasource&tqx=reqId:7;version:0.5;responseHandler:my.handler"))
	if err != nil {
		t.Fatal(err)
	}
	out := string(cpuResult(t, &req).Append(nil, &Wrap{LastEntry: 1795313781}))
	if !strings.HasPrefix(out, "my.handler({version:'0.5',reqId:'7',status:'ok',sig:'1795313781',table:{") || !strings.HasSuffix(out, "}});") {
		t.Errorf("datasource with tqx = %.200s", out)
	}
	req, _ = ParseRequest(getter("chart=system.cpu&format=datasource&tqx=sig:1795313781"))
	out = string(cpuResult(t, &req).Append(nil, &Wrap{LastEntry: 1795313781}))
	if want := "google.visualization.Query.setResponse({version:'0.6',reqId:'0',status:'error',errors:[{reason:'not_modified',message:'Data not modified'}]});"; out != want {
		t.Errorf("not modified = %s\nwant %s", out, want)
	}
	req, _ = ParseRequest(getter("chart=system.cpu&format=jsonp"))
	if out := string(cpuResult(t, &req).Append(nil, nil)); !strings.HasPrefix(out, "callback({") || !strings.HasSuffix(out, "});") {
		t.Errorf("jsonp without callback = %.100s", out)
	}
	for _, q := range []string{"callback=alert(1);x", "callback=a%28", "tqx=responseHandler:a(b)", "tqx=reqId:'x'", "format=xml"} {
		if _, err := ParseRequest(getter("chart=x&format=jsonp&" + q)); err == nil {
			t.Errorf("ParseRequest(%q) accepted", q)
		}
	}
	// html escapes labels: a dimension name is text, never markup.
	ds := dims("<b>x</b>")
	res, err := Run(&Request{Format: FormatHTML}, Plan{After: 0, Before: 0, Step: 1, Group: 1, Points: 1}, []Series{series(0, 1, ds, func(int, int64) float64 { return 1 })})
	if err != nil {
		t.Fatal(err)
	}
	if out := string(res.Append(nil, nil)); strings.Contains(out, "<b>") || !strings.Contains(out, "&lt;b&gt;x&lt;/b&gt;") {
		t.Errorf("html label not escaped: %s", out)
	}
}

// shape describes a decoded JSON value by keys and types; arrays by the
// shape of their first element and whether they are empty.
func shape(v any) string {
	switch x := v.(type) {
	case map[string]any:
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		var b strings.Builder
		b.WriteString("{")
		for _, k := range keys {
			b.WriteString(k + ":" + shape(x[k]) + ",")
		}
		return b.String() + "}"
	case []any:
		if len(x) == 0 {
			return "[]"
		}
		return "[" + shape(x[0]) + "]"
	case float64:
		return "num"
	case string:
		return "str"
	case bool:
		return "bool"
	case nil:
		return "null"
	}
	return "?"
}

func labels(v any) []any {
	m, _ := v.(map[string]any)
	if r, ok := m["result"].(map[string]any); ok {
		m = r
	}
	l, _ := m["labels"].([]any)
	if l == nil {
		if n, ok := m["dimension_names"].([]any); ok {
			return n
		}
	}
	return l
}

func TestCSVAndSSV(t *testing.T) {
	req, _ := ParseRequest(getter("chart=system.cpu&after=-60&points=10&format=csv&dimensions=user"))
	out := string(cpuResult(t, &req).Append(nil, nil))
	lines := strings.Split(out, "\r\n")
	if lines[0] != "time,user" || len(lines) != 12 || lines[11] != "" {
		t.Fatalf("csv = %q", out)
	}
	if len(lines[1]) < len("2026-11-22 02:16:18,") || lines[1][4] != '-' || lines[1][13] != ':' {
		t.Fatalf("csv time column = %q", lines[1])
	}
	req, _ = ParseRequest(getter("chart=system.cpu&after=-60&points=10&format=ssv"))
	if f := strings.Fields(string(cpuResult(t, &req).Append(nil, nil))); len(f) != 10 {
		t.Fatalf("ssv fields = %d", len(f))
	}
}

func TestGlob(t *testing.T) {
	for _, tt := range []struct {
		pat, s string
		want   bool
	}{
		{"user", "user", true}, {"us*", "user", true}, {"*er", "user", true}, {"u*e*r", "user", true},
		{"*", "", true}, {"a*a", "a", false}, {"x*", "user", false}, {"*s*", "user", true},
	} {
		if got := globMatch(tt.pat, tt.s); got != tt.want {
			t.Errorf("globMatch(%q,%q) = %v", tt.pat, tt.s, got)
		}
	}
}

func FuzzParseRequest(f *testing.F) {
	for _, s := range []string{"chart=a&after=-60&points=10", "points=0", "group=max&format=csv&options=jsonwrap|flip", "format=datatable&group=ses", "format=html&options=jsonwrap", "format=csvjsonarray&options=seconds", "format=datasource&tqx=reqId:1;sig:2", "after=1e300&before=-1", "tier=1&points=86400"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, q string) {
		req, err := ParseRequest(getter(q))
		if err != nil {
			return
		}
		plan, err := NewPlan(req.After, req.Before, req.Points, req.Options&OptUnaligned != 0, 1795313782, 1795310000, 1795313781, 1)
		if err != nil {
			return
		}
		if plan.Points > req.Points || plan.Points < 0 {
			t.Fatalf("plan %+v for points %d", plan, req.Points)
		}
		s := series(1795310000, 3782, dims("a", "b"), func(d int, t int64) float64 { return float64(t % 13) })
		res, err := Run(&req, plan, []Series{s})
		if err != nil {
			return
		}
		out := res.Append(nil, &Wrap{Host: "h"})
		isJSON := req.Format == FormatJSON || req.Format == FormatArray || req.Format == FormatDatatable || req.Format == FormatCSVJSONArray
		if req.Format != FormatJSONP && req.Format != FormatDatasource && (isJSON || req.Options&OptJSONWrap != 0) && !json.Valid(out) {
			t.Fatalf("invalid JSON for %q:\n%s", q, out)
		}
	})
}
