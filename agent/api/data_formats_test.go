package api

import (
	"encoding/json"
	"math"
	"strings"
	"testing"
)

// TestDataFormatsOverHTTP: every Netdata format is answered with Netdata's
// Content-Type (the layouts are compared with the captures in agent/query),
// and the callback and groupings reach the query.
func TestDataFormatsOverHTTP(t *testing.T) {
	env := newTestEnv(t)
	for _, tt := range []struct {
		q, ct, prefix, suffix string
	}{
		{"format=jsonp&callback=cb", "application/x-javascript; charset=utf-8", "cb({\n \"labels\"", "});"},
		{"format=jsonp", "application/x-javascript; charset=utf-8", "callback(", ");"},
		{"format=datasource&callback=cb", "application/x-javascript; charset=utf-8", "cb({version:'0.6',reqId:'0',status:'ok',sig:'", "}});"},
		{"format=datatable", "application/json; charset=utf-8", "{\n \"cols\":", "\n]\n}"},
		{"format=csvjsonarray", "application/json; charset=utf-8", "[\n[\"time\",\"load1\",\"load5\",\"load15\"]", "]\n]"},
		{"format=html", "text/html; charset=utf-8", "<html>\n<center>\n<table", "</html>\n"},
		{"format=markdown", "text/plain; charset=utf-8", "time|load1|load5|load15\r\n:---:|:---:|:---:|:---:\r\n", "\r\n"},
		{"format=html&options=jsonwrap", "application/json; charset=utf-8", "{\n   \"api\": 1", "}\n"},
		{"format=jsonp&callback=cb&options=jsonwrap", "application/x-javascript; charset=utf-8", "cb({\n   \"api\": 1", "}\n);"},
	} {
		t.Run(tt.q, func(t *testing.T) {
			r := env.get(t, "/api/v1/data?chart=system.load&after=-10&points=5&"+tt.q)
			body := string(r.body)
			if r.status != 200 || r.header.Get("Content-Type") != tt.ct {
				t.Fatalf("%d %q: %s", r.status, r.header.Get("Content-Type"), body)
			}
			if !strings.HasPrefix(body, tt.prefix) || !strings.HasSuffix(body, tt.suffix) {
				t.Errorf("body = %q, want %q ... %q", body, tt.prefix, tt.suffix)
			}
			if strings.Contains(tt.ct, "json") && !json.Valid(r.body) {
				t.Errorf("not JSON: %s", body)
			}
		})
	}
	// The datasource signature is the newest point: asking with it is
	// not_modified.
	sig := env.now.Unix() - 1
	r := env.get(t, "/api/v1/data?chart=system.load&format=datasource&tqx=reqId:3;sig:"+itoa(sig))
	if !strings.Contains(string(r.body), "reqId:'3',status:'error',errors:[{reason:'not_modified'") {
		t.Errorf("tqx sig of the newest point: %s", r.body)
	}
}

func itoa(v int64) string { b, _ := json.Marshal(v); return string(b) }

// TestDataGroupingsOverHTTP checks two of the added groupings on the known
// series (load1 = 0.5 * (1 + t%3)).
func TestDataGroupingsOverHTTP(t *testing.T) {
	env := newTestEnv(t)
	get := func(q string) [][]float64 {
		t.Helper()
		r := env.get(t, "/api/v1/data?chart=system.load&dimensions=load1&after=-30&points=5&"+q)
		if r.status != 200 {
			t.Fatalf("%s: %d %s", q, r.status, r.body)
		}
		var body struct{ Data [][]float64 }
		if err := json.Unmarshal(r.body, &body); err != nil {
			t.Fatal(err)
		}
		return body.Data
	}
	// Each group of 6 seconds holds two of each of 0.5, 1, 1.5: sample
	// standard deviation sqrt(0.25*4/5) and cv 100*that/1.
	for _, row := range get("group=stddev") {
		if math.Abs(row[1]-math.Sqrt(0.2)) > 1e-6 {
			t.Errorf("stddev row %v, want %v", row, math.Sqrt(0.2))
		}
	}
	for _, row := range get("group=cv") {
		if math.Abs(row[1]-100*math.Sqrt(0.2)) > 1e-4 {
			t.Errorf("cv row %v, want %v", row, 100*math.Sqrt(0.2))
		}
	}
	for _, q := range []string{"group=countif&group_options=" + strings.Repeat("9", 100), "format=jsonp&callback=alert(1)", "format=datasource&tqx=reqId:<x>", "group=" + strings.Repeat("x", 10<<10)} {
		r := env.get(t, "/api/v1/data?chart=system.load&"+q)
		if r.status != 400 || len(r.body) > 600 {
			t.Errorf("%.60s = %d %.200s, want a short 400", q, r.status, r.body)
		}
	}
}

// TestPaddingLikeNetdata replays Netdata's load_defaults capture: an agent
// 245 seconds old asked for 600 seconds in 120 points answers all 120
// rows, the 71 before its first point null, at the same offsets from the
// newest point as Netdata's (its newest point was 1795313781).
func TestPaddingLikeNetdata(t *testing.T) {
	var ref struct{ Data [][]any }
	if err := json.Unmarshal(readRef(t, "api_v1_data_system.load_defaults.json"), &ref); err != nil {
		t.Fatal(err)
	}
	const refLast = 1795313781
	env := newTestEnv(t)
	c := testCharts()[1]
	c.ID, c.Name = "system.young", "system.young"
	if err := env.db.Register(c); err != nil {
		t.Fatal(err)
	}
	last := env.now.Unix() - 1
	last -= ((last-refLast)%5 + 5) % 5 // the same phase as the capture's groups of 5
	for ts := last - 245; ts <= last; ts++ {
		if err := env.db.Append(c.ID, ts, []float64{1, 2, 3}); err != nil {
			t.Fatal(err)
		}
	}
	r := env.get(t, "/api/v1/data?chart=system.young&after=-600&points=120")
	var got struct{ Data [][]any }
	if err := json.Unmarshal(r.body, &got); err != nil {
		t.Fatalf("%v: %s", err, r.body)
	}
	if len(got.Data) != len(ref.Data) {
		t.Fatalf("%d rows, Netdata %d", len(got.Data), len(ref.Data))
	}
	for i := range ref.Data {
		rt, gt := int64(ref.Data[i][0].(float64))-refLast, int64(got.Data[i][0].(float64))-last
		if rt != gt || (ref.Data[i][1] == nil) != (got.Data[i][1] == nil) {
			t.Fatalf("row %d: ours at %+d %v, Netdata's at %+d %v", i, gt, got.Data[i][1:], rt, ref.Data[i][1:])
		}
	}
}
