package api

import (
	"encoding/json"
	"testing"
)

// TestV2SearchLimitCountsMatches: q with limit lists the first matching
// contexts, and __truncated__ (only when matches were left out) counts
// the matching contexts, not every context of the node: a client that
// pages on "remaining" is not sent after results that do not exist.
func TestV2SearchLimitCountsMatches(t *testing.T) {
	env := newTestEnv(t)
	type trunc struct {
		Total     int `json:"total_contexts"`
		Returned  int `json:"returned"`
		Remaining int `json:"remaining"`
	}
	for _, c := range []struct {
		q     string
		limit string
		names int
		trunc *trunc
	}{
		{"system.load", "1", 1, nil},     // one match: nothing left out
		{"cpu", "1", 1, &trunc{2, 1, 1}}, // system.cpu and cpu.cpu
		{"cpu", "5", 2, nil},
	} {
		path := "/api/v3/q?q=" + c.q + "&limit=" + c.limit
		r := env.get(t, path)
		if r.status != 200 {
			t.Fatalf("GET %s = %d %s", path, r.status, r.body)
		}
		var body struct {
			Contexts map[string]json.RawMessage `json:"contexts"`
		}
		if err := json.Unmarshal(r.body, &body); err != nil {
			t.Fatal(err)
		}
		var got *trunc
		if raw, ok := body.Contexts["__truncated__"]; ok {
			got = &trunc{}
			if err := json.Unmarshal(raw, got); err != nil {
				t.Fatal(err)
			}
			delete(body.Contexts, "__truncated__")
		}
		if len(body.Contexts) != c.names {
			t.Errorf("GET %s listed %d contexts, want %d", path, len(body.Contexts), c.names)
		}
		if (got == nil) != (c.trunc == nil) || got != nil && *got != *c.trunc {
			t.Errorf("GET %s __truncated__ = %+v, want %+v", path, got, c.trunc)
		}
	}
}
