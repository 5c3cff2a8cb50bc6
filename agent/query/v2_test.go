package query

import (
	"math"
	"net/url"
	"strings"
	"testing"
	"time"

	"peerdns/agent/store"
)

func v2Get(q string) Getter {
	v, _ := url.ParseQuery(q)
	return func(k string) (string, bool) {
		if !v.Has(k) {
			return "", false
		}
		return v.Get(k), true
	}
}

func TestParseV2Request(t *testing.T) {
	r, err := ParseV2Request(v2Get(""))
	if err != nil || !r.JSON2 || r.After != V2DefaultAfter || r.GroupBy != GroupByDimension || r.Aggregation != AggAverage || r.Points != 0 {
		t.Fatalf("defaults: %+v %v", r, err)
	}
	r, err = ParseV2Request(v2Get("group_by=node,instance&group_by_label=a|b&aggregation=max&time_group=median&cardinality_limit=5&timeout=250&format=csv&options=minimal-stats|long-json-keys"))
	if err != nil {
		t.Fatal(err)
	}
	if r.GroupBy != GroupByNode|GroupByInstance|GroupByLabel || len(r.GroupByLabels) != 2 || r.Aggregation != AggMax ||
		r.TimeGroup != GroupMedian || r.Cardinality != 5 || r.Timeout != 250*time.Millisecond || r.JSON2 || r.Format != FormatCSV ||
		r.Options&OptMinimalStats == 0 || r.Options&OptLongKeys == 0 {
		t.Errorf("parsed %+v", r)
	}
	if got := strings.Join(r.GroupBy.Names(), ","); got != "instance,label,node" {
		t.Errorf("names %q", got)
	}
	for _, q := range []string{"group_by=bogus", "aggregation=x", "time_group=x", "points=-1", "cardinality_limit=-1", "timeout=x", "tier=9", "format=x", "group_by=label"} {
		if _, err := ParseV2Request(v2Get(q)); err == nil {
			t.Errorf("%s: no error", q)
		}
	}
	if r, _ := ParseV2Request(v2Get("cardinality_limit=999999999&timeout=99999999")); r.Cardinality != MaxCardinality || r.Timeout != MaxTimeout {
		t.Errorf("clamps: %d %v", r.Cardinality, r.Timeout)
	}
	// A timeout too large for a Duration of ms is clamped too, not wrapped
	// to a negative budget.
	for _, q := range []string{"timeout=9223372036854775807", "timeout=9223372036854776", "timeout=9300000000000"} {
		if r, err := ParseV2Request(v2Get(q)); err != nil || r.Timeout != MaxTimeout {
			t.Errorf("%s: timeout %v %v, want %v", q, r.Timeout, err, MaxTimeout)
		}
	}
}

func TestV2Patterns(t *testing.T) {
	for _, c := range []struct {
		pat, name string
		want      bool
	}{
		{"", "x", true}, {"*", "x", true}, {"cpu.*", "cpu.cpu0", true}, {"cpu.*", "system.cpu", false},
		{"!cpu.cpu0|cpu.*", "cpu.cpu0", false}, {"!cpu.cpu0|cpu.*", "cpu.cpu1", true},
		{"a|b", "b", true}, {"*load*", "system.load", true},
		// Netdata's web separators: ',' and '|' (and tabs, line breaks);
		// a space is part of the word.
		{"a,b", "a", true}, {"a,b", "b", true}, {"x,!a|*", "a", false}, {"reserved for root", "reserved for root", true},
		{"a b", "a", false}, {"a\tb", "b", true},
	} {
		if got := MatchV2(c.pat, c.name); got != c.want {
			t.Errorf("MatchV2(%q, %q) = %v", c.pat, c.name, got)
		}
	}
	// Label words are grouped by key: one key's words are tried in order
	// (the first that matches a label decides), and every key must match.
	stat := []Label{{"_collect_plugin", "proc.plugin"}, {"_collect_module", "/proc/stat"}}
	dev := []Label{{"_collect_plugin", "proc.plugin"}, {"_collect_module", "/proc/net/dev"}}
	disk := []Label{{"_collect_plugin", "diskspace.plugin"}, {"_collect_module", "[none]"}}
	for _, c := range []struct {
		pat             string
		stat, dev, disk bool
	}{
		{"!_collect_module:/proc/stat|_collect_module:*", false, true, true},
		{"!_collect_module:/proc/stat|_collect_plugin:*", false, false, false}, // the module key has no positive word
		{"_collect_plugin:proc.plugin|_collect_module:/proc/stat", true, false, false},
		{"_collect_plugin:proc.plugin,_collect_module:/proc/stat|_collect_module:/proc/net/dev", true, true, false},
		{"_collect_plugin:*.plugin", true, true, true},
		{"_collect_plugin:diskspace*|_collect_module:*", false, false, true},
		{"_collect_plugin", true, true, true},
		{"no_such_key", false, false, false},
		{"", true, true, true},
	} {
		p := compileV2Pattern(c.pat)
		for _, x := range []struct {
			name string
			ls   []Label
			want bool
		}{{"stat", stat, c.stat}, {"dev", dev, c.dev}, {"disk", disk, c.disk}} {
			if got := p.matchLabels(x.ls); got != x.want {
				t.Errorf("labels=%q on %s = %v, want %v", c.pat, x.name, got, x.want)
			}
		}
	}
}

// TestV2AlertsPattern: the alerts selector matches an instance's alerts
// by name or name:STATUS; the first alert a word decides on decides.
func TestV2AlertsPattern(t *testing.T) {
	as := []InstanceAlert{{"cpu_high", "WARNING"}, {"ram_low", "CLEAR"}}
	for _, c := range []struct {
		pat  string
		want bool
	}{
		{"", true}, {"cpu_high", true}, {"ram_*", true}, {"cpu_high:WARNING", true}, {"cpu_high:CLEAR", false},
		{"*:CLEAR", true}, {"!cpu_high,*", false}, {"!ram_low,*", true}, {"disk_full", false},
	} {
		if got := compileV2Pattern(c.pat).matchAlerts(as); got != c.want {
			t.Errorf("alerts=%q = %v, want %v", c.pat, got, c.want)
		}
	}
	if compileV2Pattern("*").matchAlerts(nil) != true || compileV2Pattern("x").matchAlerts(nil) {
		t.Error("an instance without alerts")
	}
}

// TestRunV2Deadline: a deadline in the past stops the query.
func TestRunV2Deadline(t *testing.T) {
	c := &store.ChartDef{ID: "a.b", Name: "a.b", Context: "a.b", Units: "u", Dims: []store.DimDef{{ID: "x", Name: "x"}}}
	req, _ := ParseV2Request(v2Get(""))
	tg := SelectV2(&req, []V2Node{{GUID: "g", Hostname: "h"}}, []V2Instance{{Chart: c}})
	plan := Plan{After: 100, Before: 109, Step: 1, Group: 1, Points: 10}
	if _, err := RunV2(tg, plan, time.Now().Add(-time.Second)); err != ErrTimeout {
		t.Fatalf("err %v, want ErrTimeout", err)
	}
	res, err := RunV2(tg, plan, time.Time{})
	if err != nil || res.Rows() != 10 || !math.IsNaN(res.Values[0]) || res.Flags[0] != PointEmpty {
		t.Fatalf("no data: %v %+v", err, res)
	}
}

func FuzzParseV2Request(f *testing.F) {
	for _, s := range []string{"", "group_by=node,instance&aggregation=sum", "contexts=cpu.*|!x&points=0", "group_by_label=a&time_resampling=60",
		"cardinality_limit=3&timeout=10", "format=csv&options=raw|long-json-keys", "after=-1e3&before=abc",
		"labels=a:1|a:2,!b:x|b:*|c&alerts=!x:CLEAR,*&instances=cpu.cpu0@g,n@h"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, q string) {
		r, err := ParseV2Request(v2Get(q))
		if err != nil {
			return
		}
		if r.Points < 0 || r.Points > MaxPoints || r.Cardinality < 0 || r.Cardinality > MaxCardinality || r.Timeout <= 0 || r.Timeout > MaxTimeout {
			t.Fatalf("out of range after parse: %+v", r)
		}
		_ = r.GroupBy.Names()
		_ = MatchV2(r.Contexts, "cpu.cpu")
		_ = compileV2Pattern(r.Labels).matchLabels([]Label{{"a", "1"}, {"b", "x"}})
		_ = compileV2Pattern(r.Alerts).matchAlerts([]InstanceAlert{{"x", "CLEAR"}})
	})
}

// TestCountIf: countif's condition parses as Netdata's does and gives the
// percentage of a group's points that meet it.
func TestCountIf(t *testing.T) {
	for _, c := range []struct {
		opt  string
		want countIf
	}{
		{"", countIf{"==", 0}}, {">0", countIf{">", 0}}, {" >= 2.5 ", countIf{">=", 2.5}}, {"<3", countIf{"<", 3}},
		{"<=3", countIf{"<=", 3}}, {"!=1", countIf{"!=", 1}}, {"<>1", countIf{"!=", 1}}, {"!1", countIf{"!=", 1}},
		{"=4", countIf{"==", 4}}, {"==4", countIf{"==", 4}}, {"7", countIf{"==", 7}}, {">x", countIf{">", 0}},
	} {
		if got := parseCountIf(c.opt); got != c.want {
			t.Errorf("parseCountIf(%q) = %+v, want %+v", c.opt, got, c.want)
		}
	}
	g, err := ParseGroup("countif")
	if err != nil || g.String() != "countif" || !g.needsValues() {
		t.Fatalf("ParseGroup(countif) = %v, %v", g, err)
	}
	vals := []float64{0, 1, 2, 3, 4}
	for opt, want := range map[string]float64{"": 20, ">0": 80, "<2": 40, ">=2": 60, "!=4": 80, "=9": 0} {
		sm := smoothing{cond: parseCountIf(opt)}
		if got := combine(g, Plan{}, append([]float64(nil), vals...), 0, 4, 10, 5, &sm); got != want {
			t.Errorf("countif %q over %v = %v, want %v", opt, vals, got, want)
		}
	}
}

// TestSelectV2LongSelectors: a selector of a thousand words costs work
// per word and metric, not allocations per word and metric, and a label
// selector of a thousand keys is not quadratic in its words (a 14 KB
// dimensions selector took a second of CPU per request, a 10 KB labels
// one 1.7 s, as each match split its word again and each label word
// rescanned every word before it).
func TestSelectV2LongSelectors(t *testing.T) {
	var all []V2Instance
	for c := 0; c < 200; c++ {
		def := &store.ChartDef{ID: "chart.c" + strings.Repeat("x", c%7) + string(rune('a'+c%26)), Context: "ctx.c"}
		for d := 0; d < 8; d++ {
			def.Dims = append(def.Dims, store.DimDef{ID: "dim" + string(rune('a'+d)), Name: "name" + string(rune('a'+d))})
		}
		all = append(all, V2Instance{Chart: def, Labels: []Label{{"_collect_plugin", "proc.plugin"}, {"_collect_module", "/proc/stat"}}})
	}
	nodes := []V2Node{{GUID: "g", NodeID: "n", Hostname: "h"}}
	stars := strings.TrimSuffix(strings.Repeat("*@*|", 1000), "|")
	// A thousand label words, each its own key and each matching the
	// label key _collect_plugin (a subsequence of it, '*' between).
	const key = "_collect_plugin"
	seen := map[string]bool{}
	var keys []string
	for a := 0; a < len(key) && len(keys) < 1000; a++ {
		for b := a + 1; b < len(key) && len(keys) < 1000; b++ {
			for c := b + 1; c < len(key) && len(keys) < 1000; c++ {
				for d := c + 1; d < len(key) && len(keys) < 1000; d++ {
					w := "*" + string(key[a]) + "*" + string(key[b]) + "*" + string(key[c]) + "*" + string(key[d]) + "*"
					if !seen[w] {
						seen[w] = true
						keys = append(keys, w)
					}
				}
			}
		}
	}
	for _, c := range []struct {
		name string
		req  V2Request
		want int // selected metrics
	}{
		{"dimensions", V2Request{Dimensions: stars}, 0},
		{"scope_dimensions", V2Request{ScopeDimensions: "!" + strings.ReplaceAll(stars, "|", "|!") + "|*"}, 1600},
		{"instances", V2Request{Instances: strings.ReplaceAll(stars, "@", "#")}, 0},
		{"labels", V2Request{Labels: strings.Join(keys, "|")}, 1600},
	} {
		t.Run(c.name, func(t *testing.T) {
			var tg *V2Target
			allocs := testing.AllocsPerRun(1, func() { tg = SelectV2(&c.req, nodes, all) })
			sel := 0
			for _, m := range tg.Metrics {
				if m.Selected {
					sel++
				}
			}
			if sel != c.want {
				t.Errorf("selected %d metrics, want %d", sel, c.want)
			}
			// Compiling the selectors and listing 1,600 metrics: a few
			// thousand allocations, not one per word and metric.
			if allocs > 20000 {
				t.Errorf("%.0f allocations to select 1,600 metrics", allocs)
			}
		})
	}
}
