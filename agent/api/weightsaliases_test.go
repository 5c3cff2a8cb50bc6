package api

import (
	"encoding/json"
	"reflect"
	"testing"
)

// TestWeightsHighlightAliases: weights and metric_correlations read
// Netdata's other names for the window and resolution (highlight_after,
// highlight_before, max_points), which its dashboard's correlations
// send, as after, before and points.
func TestWeightsHighlightAliases(t *testing.T) {
	env := newTestEnv(t)
	addShiftChart(t, env)
	for _, cmd := range []string{"/api/v1/weights", "/api/v2/weights", "/api/v1/metric_correlations"} {
		for _, m := range []string{"ks2", "volume"} {
			var want, got struct {
				View    json.RawMessage `json:"view"`
				Results []struct {
					ID string `json:"id"`
				} `json:"results"`
			}
			a := env.get(t, cmd+"?method="+m+"&after=-60&before=-5&points=30")
			b := env.get(t, cmd+"?method="+m+"&highlight_after=-60&highlight_before=-5&max_points=30")
			if a.status != 200 || b.status != 200 {
				t.Fatalf("%s %s: %d and %d: %s", cmd, m, a.status, b.status, b.body)
			}
			if err := json.Unmarshal(a.body, &want); err != nil {
				t.Fatal(err)
			}
			if err := json.Unmarshal(b.body, &got); err != nil {
				t.Fatal(err)
			}
			if string(got.View) != string(want.View) || !reflect.DeepEqual(got.Results, want.Results) {
				t.Errorf("%s %s: highlight_*/max_points gave view %s, %d results; after/before/points gave %s, %d", cmd, m, got.View, len(got.Results), want.View, len(want.Results))
			}
		}
	}
}
