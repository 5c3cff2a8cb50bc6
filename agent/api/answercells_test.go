package api

import (
	"strings"
	"testing"
)

// TestAnswerTooLarge: an answer of more than query.MaxAnswerCells values
// (points × columns) is a 400 before it is computed, on v1 and v2/v3:
// days asked at a point a second over a wide chart were tens of millions
// of null values, whatever the store held of them (one such GET took the
// agent from 40 MB to 680 MB and wrote 100 MB). The copy bound (stored
// points read) does not see them: the store holds ten minutes.
func TestAnswerTooLarge(t *testing.T) {
	env := newTestEnv(t)
	addChart(t, env, "wide.chart", 100, 600, func(int64, int) float64 { return 0 })
	for _, path := range []string{
		"/api/v1/data?chart=wide.chart&after=-86400&points=86400",
		"/api/v3/data?contexts=wide.chart&after=-86400&points=86400&tier=0",
		"/api/v2/data?contexts=wide.chart&after=-86400&points=0&tier=0",
		// One column, but the instance's 100 are held a point at a time.
		"/api/v3/data?contexts=wide.chart&after=-86400&points=86400&tier=0&group_by=node",
	} {
		r := env.get(t, path)
		if r.status != 400 || !strings.Contains(string(r.body), "answer too large") {
			t.Errorf("%s: %d (%d bytes) %.120s, want 400 answer too large", path, r.status, len(r.body), r.body)
		}
	}
	for _, path := range []string{
		"/api/v1/data?chart=wide.chart&after=-86400&points=600",
		"/api/v1/data?chart=wide.chart&after=-86400&points=86400&dimensions=d001",
		"/api/v3/data?contexts=wide.chart&after=-600&points=0",
	} {
		if r := env.get(t, path); r.status != 200 {
			t.Errorf("%s: %d %.120s, want 200", path, r.status, r.body)
		}
	}
}
