package api

import (
	"encoding/json"
	"testing"
)

// TestAnomalyBit: options=anomaly-bit answers each point's anomaly rate
// (the share of its stored points the detector flagged, in percent)
// instead of its value, as Netdata does, on v1 and v2/v3. test.shift's
// "moved" is flagged for the 6 seconds from 30 s before the newest point.
func TestAnomalyBit(t *testing.T) {
	env := newTestEnv(t)
	addShiftChart(t, env)
	end := env.now.Unix() - 1
	flagged := func(ts int64) bool { return ts >= end-30 && ts < end-24 }

	var v1 struct {
		Data [][]float64 `json:"data"`
	}
	r := env.get(t, "/api/v1/data?chart=test.shift&dimensions=moved&after=-60&points=60&options=anomaly-bit|seconds")
	if r.status != 200 {
		t.Fatalf("v1: %d %s", r.status, r.body)
	}
	if err := json.Unmarshal(r.body, &v1); err != nil || len(v1.Data) == 0 {
		t.Fatalf("v1: %v\n%s", err, r.body)
	}
	for _, row := range v1.Data {
		if ts := int64(row[0]); row[1] != map[bool]float64{true: 100, false: 0}[flagged(ts)] {
			t.Errorf("v1 at %d: %v, want %v", ts, row[1], map[bool]float64{true: 100, false: 0}[flagged(ts)])
		}
	}
	// Two seconds a point: the point holding one flagged second is 50%.
	r = env.get(t, "/api/v1/data?chart=test.shift&dimensions=moved&after=-60&points=30&options=anomaly-bit|seconds|unaligned")
	if err := json.Unmarshal(r.body, &v1); err != nil || len(v1.Data) == 0 {
		t.Fatalf("v1 points=30: %v\n%s", err, r.body)
	}
	for _, row := range v1.Data {
		ts := int64(row[0])
		want := 0.0
		for _, s := range []int64{ts - 1, ts} {
			if flagged(s) {
				want += 50
			}
		}
		if row[1] != want {
			t.Errorf("v1 points=30 at %d: %v, want %v", ts, row[1], want)
		}
	}

	j := getJSON2(t, env, "/api/v3/data?contexts=test.shift&dimensions=moved&after=-60&points=60&options=anomaly-bit")
	times, vals, _ := j.points(t)
	if len(times) == 0 {
		t.Fatal("v3: no points")
	}
	for i, ts := range times {
		if want := map[bool]float64{true: 100, false: 0}[flagged(ts)]; vals[i][0] != want {
			t.Errorf("v3 at %d: %v, want %v", ts, vals[i][0], want)
		}
	}
}
