package api

import (
	"sort"
	"strings"
	"testing"
)

// TestMetricCorrelationsAsNetdata: metric_correlations is weights under
// Netdata's older name and layout: ks2 by default, correlated_charts
// (chart → context and dimension weights), correlated_dimensions and
// total_dimensions_count, the same charts and dimensions weights ranks.
func TestMetricCorrelationsAsNetdata(t *testing.T) {
	env := newTestEnv(t)
	addShiftChart(t, env)
	r := env.get(t, "/api/v1/metric_correlations?after=-60")
	if r.status != 200 {
		t.Fatalf("metric_correlations = %d %s", r.status, r.body)
	}
	mc := decode(t, "mc", r.body).(map[string]any)
	if mc["method"] != "ks2" {
		t.Errorf("method %v, want ks2 (Netdata's default here)", mc["method"])
	}
	if _, ok := mc["contexts"]; ok {
		t.Errorf("metric_correlations has weights' contexts nesting")
	}
	charts, ok := mc["correlated_charts"].(map[string]any)
	if !ok || charts["test.shift"] == nil {
		t.Fatalf("correlated_charts = %v, want test.shift (the chart that moved) in it", mc["correlated_charts"])
	}
	var got []string
	for id, c := range charts {
		cm := c.(map[string]any)
		if cm["context"] == nil || cm["context"] == "" {
			t.Errorf("chart %s has no context: %v", id, cm)
		}
		for d := range cm["dimensions"].(map[string]any) {
			got = append(got, id+"/"+d)
		}
	}
	if n, _ := mc["correlated_dimensions"].(float64); int(n) != len(got) {
		t.Errorf("correlated_dimensions %v, listed %d", mc["correlated_dimensions"], len(got))
	}
	if n, _ := mc["total_dimensions_count"].(float64); int(n) < len(got) {
		t.Errorf("total_dimensions_count %v < %d", mc["total_dimensions_count"], len(got))
	}
	for _, k := range []string{"after", "before", "baseline_after", "baseline_before", "statistics", "group", "options"} {
		if _, ok := mc[k]; !ok {
			t.Errorf("metric_correlations lacks the header's %s", k)
		}
	}
	// The same dimensions as weights with the same method and window.
	w := decode(t, "w", env.get(t, "/api/v1/weights?method=ks2&after=-60").body).(map[string]any)
	var want []string
	for _, c := range w["contexts"].(map[string]any) {
		for id, ch := range c.(map[string]any)["charts"].(map[string]any) {
			for d := range ch.(map[string]any)["dimensions"].(map[string]any) {
				want = append(want, id+"/"+d)
			}
		}
	}
	sort.Strings(got)
	sort.Strings(want)
	if strings.Join(got, ";") != strings.Join(want, ";") {
		t.Errorf("metric_correlations ranks %v, weights %v", got, want)
	}
	// Another method is honoured; ks2 without a window is a 400 naming after.
	if m := decode(t, "vol", env.get(t, "/api/v3/metric_correlations?method=volume&after=-60").body).(map[string]any); m["method"] != "volume" {
		t.Errorf("method=volume answered %v", m["method"])
	}
	if r := env.get(t, "/api/v1/metric_correlations"); r.status != 400 || !strings.Contains(string(r.body), "after") {
		t.Errorf("no window = %d %s, want 400 naming after", r.status, r.body)
	}
	if r := env.get(t, "/api/v1/metric_correlations?after=-60&method=bogus"); r.status != 400 || !strings.Contains(string(r.body), "bogus") {
		t.Errorf("method=bogus = %d %s", r.status, r.body)
	}
}
