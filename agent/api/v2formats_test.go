package api

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestV2FormatsWrapped: under v2/v3 every format is the result of the
// json2 envelope (Netdata's v2 data always sets jsonwrap); json adds
// anomaly_rates in the result's layout, and jsonp and datasource call
// their function with the envelope.
func TestV2FormatsWrapped(t *testing.T) {
	env := newTestEnv(t)
	now := env.now.Unix()
	// system.load's load5 is anomalous at three known seconds.
	marked := map[int64]bool{now - 2: true, now - 4: true, now - 6: true}
	for ts := range marked {
		if _, err := env.db.MarkAnomalous("system.load", ts, []bool{false, true, false}); err != nil {
			t.Fatal(err)
		}
	}
	const q = "/api/v3/data?contexts=system.load&after=-8&points=8"
	var j struct {
		API    int `json:"api"`
		Result struct {
			Labels []string    `json:"labels"`
			Data   [][]float64 `json:"data"`
		} `json:"result"`
		AR *struct {
			Labels []string    `json:"labels"`
			Data   [][]float64 `json:"data"`
		} `json:"anomaly_rates"`
		View map[string]any `json:"view"`
	}
	r := env.get(t, q+"&format=json")
	if err := json.Unmarshal(r.body, &j); err != nil || r.status != 200 {
		t.Fatalf("format=json: %d %v %.300s", r.status, err, r.body)
	}
	if j.API != 3 || j.View == nil || j.AR == nil {
		t.Fatalf("format=json: api %d, view %v, anomaly_rates %v", j.API, j.View != nil, j.AR != nil)
	}
	if strings.Join(j.AR.Labels, ",") != strings.Join(j.Result.Labels, ",") || len(j.AR.Data) != len(j.Result.Data) || len(j.AR.Data) != 8 {
		t.Fatalf("anomaly_rates %v × %d rows, result %v × %d", j.AR.Labels, len(j.AR.Data), j.Result.Labels, len(j.Result.Data))
	}
	for i, row := range j.AR.Data {
		ts := int64(row[0])
		if ts != int64(j.Result.Data[i][0]) {
			t.Errorf("row %d: anomaly_rates at %d, result at %d", i, ts, int64(j.Result.Data[i][0]))
		}
		want := 0.0
		if marked[ts] {
			want = 100
		}
		if row[1] != 0 || row[2] != want || row[3] != 0 {
			t.Errorf("anomaly rates at %d = %v, want [0 %v 0]", ts, row[1:], want)
		}
	}
	// csv is a string result inside the envelope; the json2 answer has no
	// anomaly_rates (its points carry them).
	var c struct {
		Result string          `json:"result"`
		AR     json.RawMessage `json:"anomaly_rates"`
	}
	if r := env.get(t, q+"&format=csv"); json.Unmarshal(r.body, &c) != nil || !strings.HasPrefix(c.Result, "time,load1,load5,load15\n") {
		t.Errorf("format=csv: %.300s", r.body)
	}
	var j2 map[string]any
	if r := env.get(t, q); json.Unmarshal(r.body, &j2) != nil || j2["anomaly_rates"] != nil || j2["result"] == nil {
		t.Errorf("json2 has anomaly_rates: %.300s", r.body)
	}
	for _, tt := range []struct{ q, ct, prefix, suffix string }{
		{"&format=jsonp&callback=cb", "application/x-javascript; charset=utf-8", "cb({\"api\":3,", "});"},
		{"&format=datasource&tqx=reqId:7", "application/x-javascript; charset=utf-8", "google.visualization.Query.setResponse({version:'0.6',reqId:'7',status:'ok',sig:'", "});"},
	} {
		r := env.get(t, q+tt.q)
		body := string(r.body)
		if r.status != 200 || r.header.Get("Content-Type") != tt.ct || !strings.HasPrefix(body, tt.prefix) || !strings.HasSuffix(body, tt.suffix) {
			t.Errorf("%s: %d %q %.200s ... want %q ... %q", tt.q, r.status, r.header.Get("Content-Type"), body, tt.prefix, tt.suffix)
			continue
		}
		inner := body[strings.Index(body, "{\"api\""):strings.LastIndex(body, ")")]
		if tt.q[8] == 'd' {
			inner = strings.TrimSuffix(inner, "}")
		}
		var env2 map[string]any
		if err := json.Unmarshal([]byte(inner), &env2); err != nil || env2["result"] == nil || env2["summary"] == nil {
			t.Errorf("%s: the call's argument is not the json2 envelope: %v %.200s", tt.q, err, inner)
		}
	}
}
