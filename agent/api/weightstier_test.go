package api

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"
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

// TestWeightsPastWindowReadsTierOne: a highlight older than tier 0's
// oldest point (a past incident picked on the dashboard) is read from
// tier 1, which holds it, even when highlight and baseline together are
// shorter than tier 0's retention: reading tier 0 found nothing there and
// answered no results.
func TestWeightsPastWindowReadsTierOne(t *testing.T) {
	env := newTestEnv(t)
	// Tier 0 keeps the newest 5 minutes of the 10 stored; tier 1 all 10.
	if err := env.db.SetRetention(300*time.Second, 0); err != nil {
		t.Fatal(err)
	}
	end := env.now.Unix()
	for _, q := range []string{
		fmt.Sprintf("method=value&time_group=average&after=%d&before=%d", end-540, end-420),
		fmt.Sprintf("method=volume&after=%d&before=%d&baseline_after=%d&baseline_before=%d", end-480, end-420, end-540, end-480),
	} {
		p := "/api/v2/weights?contexts=system.load&" + q
		r := env.get(t, p)
		if r.status != 200 {
			t.Fatalf("GET %s = %d %s", p, r.status, r.body)
		}
		var w weightsJSON
		if err := json.Unmarshal(r.body, &w); err != nil {
			t.Fatal(err)
		}
		if len(w.Results) != 3 {
			t.Errorf("GET %s: %d results, want system.load's 3 dimensions", p, len(w.Results))
		}
	}
}
