package api

import (
	"encoding/json"
	"reflect"
	"testing"
)

// TestDimensionArgs: a v1 query's dimensions go by Netdata's four names
// (dimension, dim, dimensions, dims), and every one given, repeated or
// not, joins one pattern, as Netdata joins them: dims=user answered
// every dimension, and a second dimensions= was dropped.
func TestDimensionArgs(t *testing.T) {
	env := newTestEnv(t)
	for _, c := range []struct {
		q    string
		want []string
	}{
		{"dims=user", []string{"time", "user"}},
		{"dim=user", []string{"time", "user"}},
		{"dimension=user", []string{"time", "user"}},
		{"dimensions=user&dimensions=system", []string{"time", "user", "system"}},
		{"dim=system&dims=user", []string{"time", "user", "system"}},
		{"dimensions=user|nice&dim=system", []string{"time", "user", "system", "nice"}},
	} {
		r := env.get(t, "/api/v1/data?chart=system.cpu&after=-10&points=2&"+c.q)
		var body struct {
			Labels []string `json:"labels"`
		}
		if r.status != 200 || json.Unmarshal(r.body, &body) != nil || !reflect.DeepEqual(body.Labels, c.want) {
			t.Errorf("%s: %d labels %v, want %v", c.q, r.status, body.Labels, c.want)
		}
	}
}
