package api

import (
	"encoding/json"
	"testing"
)

// TestWeightsHighlightOnlyMethodsReadTierZero: value and anomaly-rate
// score the highlight alone, so the tier is chosen by the highlight: a
// 15-minute highlight that tier 0 holds is scored on its seconds, not on
// tier 1's minute averages because a baseline they never read would not
// fit in tier 0. A dimension that alternates 0 and 10 every second has
// a cv near 100 % over its seconds and near 0 over its minutes.
func TestWeightsHighlightOnlyMethodsReadTierZero(t *testing.T) {
	env := newTestEnv(t) // tier 0 keeps an hour: 15 minutes and a 4x baseline do not fit
	addChart(t, env, "alt.chart", 1, 600, func(ts int64, _ int) float64 { return float64(10 * (ts % 2)) })
	for _, v := range []string{"v1", "v2"} {
		p := "/api/" + v + "/weights?method=value&time_group=cv&after=-900&contexts=alt.chart"
		r := env.get(t, p)
		if r.status != 200 {
			t.Fatalf("GET %s = %d %s", p, r.status, r.body)
		}
		var w weightsJSON
		if err := json.Unmarshal(r.body, &w); err != nil {
			t.Fatal(err)
		}
		if len(w.Results) != 1 || w.Results[0].Weight < 90 {
			t.Errorf("GET %s: results %+v, want alt.chart.d000 with a cv near 100", p, w.Results)
		}
	}
}
