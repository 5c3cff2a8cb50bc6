package api

import (
	"bytes"
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

// TestDimensionNamesWithSpaces: a v1 query's dimensions pattern is split
// at ',' and '|' (and tabs and line breaks), not at spaces, as Netdata
// splits it, so a dimension whose name has spaces (disk_space's
// "reserved for root") can be asked for by name, on data and badges.
func TestDimensionNamesWithSpaces(t *testing.T) {
	env := newTestEnv(t)
	for _, c := range []struct {
		q    string
		want []string
	}{
		{"dimensions=reserved%20for%20root", []string{"time", "reserved for root"}},
		{"dimensions=used,reserved%20for%20root", []string{"time", "used", "reserved for root"}},
		{"dims=avail|reserved%20for*", []string{"time", "avail", "reserved for root"}},
	} {
		r := env.get(t, "/api/v1/data?chart=disk_space._&after=-10&points=2&"+c.q)
		var body struct {
			Labels []string `json:"labels"`
		}
		if r.status != 200 || json.Unmarshal(r.body, &body) != nil || !reflect.DeepEqual(body.Labels, c.want) {
			t.Errorf("%s: %d %.100s labels %v, want %v", c.q, r.status, r.body, body.Labels, c.want)
		}
	}
	r := env.get(t, "/api/v1/badge.svg?chart=disk_space._&dimensions=reserved%20for%20root&units=GiB")
	if r.status != 200 || bytes.Contains(r.body, []byte(">-<")) {
		t.Errorf("badge of \"reserved for root\": %d %s", r.status, r.body)
	}
}
