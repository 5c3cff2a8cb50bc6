package api

import (
	"math"
	"testing"
)

// TestV2PercentageRawHidden: with aggregation=percentage and options=raw
// a json2 point is [value, anomaly rate, annotations, count, hidden]: the
// selected metrics' sum and the hidden (not in dimensions) ones' sum, so
// value*100/(value+hidden) is the percentage the answer without raw
// gives; without raw there is no hidden member.
func TestV2PercentageRawHidden(t *testing.T) {
	env := newTestEnv(t)
	base := "/api/v3/data?contexts=cpu.cpu&dimensions=user&group_by=instance&aggregation=percentage&after=-10&points=5"
	raw := decode(t, "raw", env.get(t, base+"&options=raw").body).(map[string]any)["result"].(map[string]any)
	schema := raw["point"].(map[string]any)
	if schema["count"] != 3.0 || schema["hidden"] != 4.0 {
		t.Fatalf("point schema %v, want count 3 and hidden 4", schema)
	}
	pct := decode(t, "pct", env.get(t, base).body).(map[string]any)["result"].(map[string]any)
	if _, ok := pct["point"].(map[string]any)["hidden"]; ok {
		t.Errorf("hidden in the point schema without raw: %v", pct["point"])
	}
	rows, prow := raw["data"].([]any), pct["data"].([]any)
	if len(rows) == 0 || len(rows) != len(prow) {
		t.Fatalf("%d raw rows, %d rows without raw", len(rows), len(prow))
	}
	checked := 0
	for i, r := range rows {
		for c, p := range r.([]any)[1:] {
			pt := p.([]any)
			if len(pt) != 5 {
				t.Fatalf("raw point %v, want 5 members", pt)
			}
			v, okv := pt[0].(float64)
			h, okh := pt[4].(float64)
			if !okv || !okh {
				continue // an empty point
			}
			// The test store's cpu.cpu: system is twice user.
			if math.Abs(h-2*v) > 1e-9*math.Max(1, math.Abs(h)) || pt[3] != 1.0 {
				t.Errorf("row %d col %d: value %v hidden %v count %v, want hidden = 2 × value, count 1", i, c, v, h, pt[3])
			}
			want := prow[i].([]any)[c+1].([]any)[0].(float64)
			if got := v * 100 / (v + h); math.Abs(got-want) > 1e-6 { // the answer is written to 7 decimals
				t.Errorf("row %d col %d: value*100/(value+hidden) = %v, the answer without raw says %v", i, c, got, want)
			}
			checked++
		}
	}
	if checked == 0 {
		t.Fatal("no raw point had both a value and a hidden part")
	}
	// Nothing hidden: every hidden member is null.
	all := decode(t, "all", env.get(t, "/api/v3/data?contexts=cpu.cpu&group_by=instance&aggregation=percentage&after=-10&points=5&options=raw").body).(map[string]any)["result"].(map[string]any)
	for _, r := range all["data"].([]any) {
		for _, p := range r.([]any)[1:] {
			if h := p.([]any)[4]; h != nil {
				t.Fatalf("hidden %v with no dimension hidden, want null", h)
			}
		}
	}
}
