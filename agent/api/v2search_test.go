package api

import (
	"encoding/json"
	"net/url"
	"strconv"
	"strings"
	"testing"
)

// TestV2Search: q lists each matching context as contexts lists it, with
// what matched first in Netdata's order (context id or family, title,
// units, instance, dimension, label, alert name, alert info), the node
// itself matching every context, and no q listing them all.
func TestV2Search(t *testing.T) {
	env := newTestEnv(t)
	all := decode(t, "contexts", env.get(t, "/api/v3/contexts").body).(map[string]any)["contexts"].(map[string]any)
	cases := []struct {
		q    string
		want map[string]string // context -> match; nil: every context with the one match in any
		any  string
	}{
		{"q=cpu", map[string]string{"system.cpu": "CONTEXT", "cpu.cpu": "CONTEXT"}, ""},
		{"q=*VDA*", map[string]string{"disk.io": "CONTEXT"}, ""}, // family vda
		{"q=load+average", map[string]string{"system.load": "TITLE"}, ""},
		{"q=kib/s", map[string]string{"disk.io": "UNITS"}, ""},
		{"q=cpu1", map[string]string{"cpu.cpu": "INSTANCE"}, ""},
		{"q=load15|reserved", map[string]string{"system.load": "DIMENSION", "disk.space": "DIMENSION"}, ""},
		{"q=diskspace.plugin", map[string]string{"disk.space": "LABEL"}, ""},
		{"q=nothing-matches-this", map[string]string{}, ""},
		// Netdata's simple pattern: '*' globs the whole string, '!'
		// excludes the strings it matches (system.cpu's id is excluded,
		// its title "Total CPU utilization" still matches; every cpu
		// string of cpu.cpu is excluded and its title has none), '|'
		// and ',' separate.
		{"q=" + url.QueryEscape("system.c*"), map[string]string{"system.cpu": "CONTEXT"}, ""},
		{"q=" + url.QueryEscape("*.cpu"), map[string]string{"system.cpu": "CONTEXT", "cpu.cpu": "CONTEXT"}, ""},
		{"q=" + url.QueryEscape("!system.*|!cpu*|cpu"), map[string]string{"system.cpu": "TITLE"}, ""},
		{"q=" + url.QueryEscape("load15,reserved"), map[string]string{"system.load": "DIMENSION", "disk.space": "DIMENSION"}, ""},
		{"q=" + url.QueryEscape(env.srv.host.Hostname), nil, "HOST"},
		{"", nil, "NONE"},
	}
	for _, c := range cases {
		got := decode(t, c.q, env.get(t, "/api/v3/q?"+c.q).body).(map[string]any)["contexts"].(map[string]any)
		if c.want == nil {
			if len(got) != len(all) {
				t.Errorf("%s: %d contexts, want all %d", c.q, len(got), len(all))
			}
			for name, e := range got {
				if m := e.(map[string]any)["match"]; m != c.any {
					t.Errorf("%s: %s match %v, want %s", c.q, name, m, c.any)
				}
			}
			continue
		}
		if len(got) != len(c.want) {
			t.Errorf("%s: contexts %v, want %v", c.q, keysOf(got), c.want)
		}
		for name, m := range c.want {
			e, ok := got[name].(map[string]any)
			if !ok || e["match"] != m {
				t.Errorf("%s: %s = %v, want match %s", c.q, name, got[name], m)
				continue
			}
			// The rest of the entry is the contexts entry.
			for k, v := range all[name].(map[string]any) {
				if k != "last_entry" && e[k] != v {
					t.Errorf("%s: %s.%s = %v, contexts says %v", c.q, name, k, e[k], v)
				}
			}
		}
	}
	// An alert's name and info are searched after everything else.
	if len(env.srv.alerts()) == 0 {
		t.Fatal("the test agent has no alerts to search")
	}
	alertMatches := 0
	for _, a := range env.srv.alerts() {
		got := decode(t, "alert", env.get(t, "/api/v3/q?q="+url.QueryEscape(a.Name)).body).(map[string]any)["contexts"].(map[string]any)
		e, ok := got[a.Context].(map[string]any)
		if !ok {
			t.Errorf("q=%s: the alert's context %s not listed: %v", a.Name, a.Context, keysOf(got))
			continue
		}
		if e["match"] == "ALERT" {
			alertMatches++
		}
	}
	if alertMatches == 0 {
		t.Error("no alert's name matched as ALERT")
	}
}

// TestV2AlertsOptions: alerts answers the sections options names, and the
// per-name summary alone when it names none of them (Netdata's default).
func TestV2AlertsOptions(t *testing.T) {
	env := newTestEnv(t)
	for _, c := range []struct {
		q                 string
		summary, instance bool
		values            bool
	}{
		{"", true, false, false},
		{"?options=minify", true, false, false},
		{"?options=instances", false, true, false},
		{"?options=values", false, true, true},
		{"?options=summary,instances,values", true, true, true},
	} {
		a := decode(t, c.q, env.get(t, "/api/v2/alerts"+c.q).body).(map[string]any)
		sum, hasSum := a["alerts"].([]any)
		inst, hasInst := a["alert_instances"].([]any)
		if hasSum != c.summary || hasInst != c.instance || (c.summary && len(sum) == 0) || (c.instance && len(inst) == 0) {
			t.Errorf("alerts%s: alerts %v (%d), alert_instances %v (%d)", c.q, hasSum, len(sum), hasInst, len(inst))
			continue
		}
		if c.instance {
			_, v := inst[0].(map[string]any)["v"]
			if v != c.values {
				t.Errorf("alerts%s: values %v, want %v", c.q, v, c.values)
			}
		}
	}
}

// TestV2DbengineStats: each tier's figures are the store's own.
func TestV2DbengineStats(t *testing.T) {
	env := newTestEnv(t)
	st := env.db.Stats()
	d := decode(t, "dbengine_stats", env.get(t, "/api/v3/dbengine_stats").body).(map[string]any)
	for tier, per := range map[string]int{"tier0": st.Tier0BytesPerDim, "tier1": st.Tier1BytesPerDim} {
		x := d[tier].(map[string]any)
		if x["metrics"] != float64(st.Dimensions) || x["bytes_per_metric"] != float64(per) ||
			x["memory_bytes_full_retention"] != float64(st.Dimensions*per) {
			t.Errorf("%s = %v, store: %d metrics × %d bytes", tier, x, st.Dimensions, per)
		}
	}
	if d["tier1"].(map[string]any)["disk_bytes"] != float64(st.Tier1DiskBytes) {
		t.Errorf("tier1 disk_bytes %v, store %d", d["tier1"].(map[string]any)["disk_bytes"], st.Tier1DiskBytes)
	}
}

// TestCountIfOverHTTP: countif on system.cpu's user (t%5 each second, so
// every 5-second point holds 0..4) on v3 with time_group_options and v1
// with group_options.
func TestCountIfOverHTTP(t *testing.T) {
	env := newTestEnv(t)
	for _, c := range []struct {
		path string
		want float64
	}{
		{"/api/v3/data?contexts=system.cpu&dimensions=user&after=-100&points=20&time_group=countif&time_group_options=%3E0", 80},
		{"/api/v3/data?contexts=system.cpu&dimensions=user&after=-100&points=20&time_group=countif", 20},
		{"/api/v1/data?chart=system.cpu&dimensions=user&after=-100&points=20&group=countif&group_options=%3C2", 40},
	} {
		r := env.get(t, c.path)
		var rows [][]json.RawMessage
		if strings.Contains(c.path, "/v3/") {
			var j json2
			if err := json.Unmarshal(r.body, &j); err != nil || r.status != 200 {
				t.Fatalf("%s: %d %v %.200s", c.path, r.status, err, r.body)
			}
			_, vals, _ := j.points(t)
			for i := range vals {
				if vals[i][0] != c.want {
					t.Errorf("%s: row %d = %v, want %v", c.path, i, vals[i][0], c.want)
				}
			}
			if len(vals) != 20 {
				t.Errorf("%s: %d rows", c.path, len(vals))
			}
			continue
		}
		var v1 struct {
			Data [][]json.RawMessage `json:"data"`
		}
		if err := json.Unmarshal(r.body, &v1); err != nil || r.status != 200 {
			t.Fatalf("%s: %d %v %.200s", c.path, r.status, err, r.body)
		}
		rows = v1.Data
		if len(rows) != 20 {
			t.Errorf("%s: %d rows", c.path, len(rows))
		}
		for i, row := range rows {
			if string(row[1]) != strconv.FormatFloat(c.want, 'f', -1, 64) {
				t.Errorf("%s: row %d = %s, want %v", c.path, i, row[1], c.want)
			}
		}
	}
	if r := env.get(t, "/api/v3/data?contexts=system.cpu&time_group=countif&time_group_options="+strings.Repeat("9", 100)); r.status != 400 {
		t.Errorf("a 100-byte time_group_options: %d", r.status)
	}
}
