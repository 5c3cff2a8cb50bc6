package api

import (
	"encoding/json"
	"net/url"
	"testing"

	"peerdns/agent/store"
)

// TestDataURLOpensTheChart: the data_url of chart, charts and v1 q opens
// that chart's data, whatever its id holds: an interface may be named
// "a&b" or "x+y", and its chart id (net.<interface>) with it.
func TestDataURLOpensTheChart(t *testing.T) {
	env := newTestEnv(t)
	for _, id := range []string{"net.a&b", "net.x+y", "net.p%41#1"} {
		c := &store.ChartDef{ID: id, Name: id, Type: "net", Context: "net.net", Family: id[4:], Units: "kilobits/s",
			ChartType: "area", UpdateEvery: 1, Dims: dimsOf("received", "sent")}
		if err := env.db.Register(c); err != nil {
			t.Fatal(err)
		}
		if err := env.db.Append(id, env.now.Unix()-1, []float64{1, 2}); err != nil {
			t.Fatal(err)
		}
		var one struct {
			DataURL string `json:"data_url"`
		}
		getInto(t, env, "/api/v1/chart?chart="+url.QueryEscape(id), &one)
		var all struct {
			Charts map[string]struct {
				DataURL string `json:"data_url"`
			} `json:"charts"`
		}
		getInto(t, env, "/api/v1/charts", &all)
		var q struct {
			Results []struct {
				ID      string `json:"id"`
				DataURL string `json:"data_url"`
			} `json:"results"`
		}
		getInto(t, env, "/api/v1/q?q="+url.QueryEscape(id), &q)
		urls := []string{one.DataURL, all.Charts[id].DataURL}
		for _, r := range q.Results {
			if r.ID == id {
				urls = append(urls, r.DataURL)
			}
		}
		if len(urls) != 3 {
			t.Fatalf("%s: q found no chart", id)
		}
		for _, u := range urls {
			r := env.get(t, u+"&after=-2&points=1&options=jsonwrap")
			var w struct {
				ID string `json:"id"`
			}
			if r.status != 200 || json.Unmarshal(r.body, &w) != nil || w.ID == "" {
				t.Errorf("%s: data_url %q: %d %.200s", id, u, r.status, r.body)
				continue
			}
			if want := "chart://host:vm/instance:" + id + "/"; len(w.ID) < len(want) || w.ID[:len(want)] != want {
				t.Errorf("%s: data_url %q answered %s", id, u, w.ID)
			}
		}
	}
}

func getInto(t *testing.T, env *testEnv, path string, v any) {
	t.Helper()
	r := env.get(t, path)
	if r.status != 200 {
		t.Fatalf("GET %s: %d %s", path, r.status, r.body)
	}
	if err := json.Unmarshal(r.body, v); err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
}
