package api

import (
	"net/url"
	"sort"
	"strings"
	"testing"
)

// TestV2SelectorsAsNetdata holds the selectors to what Netdata's query
// target does with them: words separated by ',' as well as '|', label
// words grouped by key (one key's words or'ed, different keys and'ed),
// instances named id@machine_guid and name@hostname as Netdata's v2
// dashboards send them, and scope_nodes, scope_labels and
// scope_dimensions limiting what is in scope.
func TestV2SelectorsAsNetdata(t *testing.T) {
	env := newTestEnv(t)
	guid, host := env.srv.host.GUID, env.srv.host.Hostname
	cases := []struct {
		name, q string
		want    []string // column ids with group_by=instance, any order
	}{
		{"comma between contexts", "contexts=cpu.cpu,system.load", []string{"cpu.cpu0", "cpu.cpu1", "system.load"}},
		{"comma and bar mixed", "contexts=cpu.cpu,system.load|disk.io", []string{"cpu.cpu0", "cpu.cpu1", "system.load", "disk.vda"}},
		{"labels of two keys are and'ed", "contexts=*&labels=_collect_plugin:proc.plugin|_collect_module:/proc/stat", []string{"system.cpu", "cpu.cpu0", "cpu.cpu1"}},
		{"labels of one key are or'ed", "contexts=*&labels=_collect_module:/proc/stat|_collect_module:/proc/loadavg", []string{"system.cpu", "cpu.cpu0", "cpu.cpu1", "system.load"}},
		{"label negation first", "contexts=system.*&labels=!_collect_module:/proc/stat|_collect_module:*", []string{"system.load", "system.ram"}},
		{"labels of two keys, one unmatched", "contexts=*&labels=_collect_plugin:proc.plugin|_collect_module:/no/such", nil},
		{"label key alone", "contexts=cpu.cpu&labels=_collect_plugin", []string{"cpu.cpu0", "cpu.cpu1"}},
		{"instance id@machine_guid", "contexts=cpu.cpu&instances=" + url.QueryEscape("cpu.cpu1@"+guid), []string{"cpu.cpu1"}},
		{"instance name@hostname", "contexts=cpu.cpu&instances=" + url.QueryEscape("cpu.cpu0@"+host), []string{"cpu.cpu0"}},
		{"instance of another node", "contexts=cpu.cpu&instances=" + url.QueryEscape("cpu.cpu0@00000000-0000-0000-0000-000000000000"), nil},
		{"scope_nodes by guid", "scope_nodes=" + url.QueryEscape(guid) + "&contexts=cpu.cpu", []string{"cpu.cpu0", "cpu.cpu1"}},
		{"scope_nodes by hostname", "scope_nodes=" + url.QueryEscape(host) + "&contexts=cpu.cpu", []string{"cpu.cpu0", "cpu.cpu1"}},
		{"scope_nodes unknown", "scope_nodes=no-such-node&contexts=cpu.cpu", nil},
		{"scope_labels", "contexts=*&scope_labels=_collect_module:/proc/loadavg", []string{"system.load"}},
		{"scope_dimensions", "contexts=*&scope_dimensions=load5,reads", []string{"system.load", "disk.vda"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			j := getJSON2(t, env, "/api/v3/data?after=-10&points=1&group_by=instance&"+c.q)
			got := append([]string(nil), j.View.Dimensions.IDs...)
			var want []string
			for _, w := range c.want {
				want = append(want, w+"@"+guid) // Netdata's instance group id
			}
			sort.Strings(got)
			sort.Strings(want)
			if strings.Join(got, ";") != strings.Join(want, ";") {
				t.Errorf("%s: columns %q, want %q", c.q, got, want)
			}
		})
	}
	// The summary lists what is in scope: scope_labels leaves every other
	// instance out of it, labels only out of the query.
	j := getJSON2(t, env, "/api/v3/data?after=-10&points=1&contexts=system.*&labels=_collect_module:/proc/loadavg")
	if len(j.Summary.Instances) < 2 {
		t.Errorf("labels= narrowed the scope: %+v", j.Summary.Instances)
	}
	j = getJSON2(t, env, "/api/v3/data?after=-10&points=1&contexts=system.*&scope_labels=_collect_module:/proc/loadavg")
	if len(j.Summary.Instances) != 1 || j.Summary.Instances[0].ID != "system.load" {
		t.Errorf("scope_labels= left in scope: %+v", j.Summary.Instances)
	}
}

// TestV2AlertsSelector: alerts= queries the instances with an alert
// matching by name or name:STATUS, as Netdata's query target does; the
// others stay in scope but are not queried.
func TestV2AlertsSelector(t *testing.T) {
	env := newTestEnv(t)
	al := decode(t, "alarms", env.get(t, "/api/v1/alarms?all").body).(map[string]any)["alarms"].(map[string]any)
	if len(al) == 0 {
		t.Fatal("the test agent runs no alerts")
	}
	var name, status string
	for _, a := range al {
		m := a.(map[string]any)
		name, status = m["name"].(string), m["status"].(string)
		break
	}
	chartsOf := func(match func(n, st string) bool) []string {
		var out []string
		for _, a := range al {
			m := a.(map[string]any)
			id := m["chart"].(string) + "@" + env.srv.host.GUID // Netdata's instance group id
			if match(m["name"].(string), m["status"].(string)) && !containsString(out, id) {
				out = append(out, id)
			}
		}
		sort.Strings(out)
		return out
	}
	for _, c := range []struct {
		q    string
		want []string
	}{
		{name, chartsOf(func(n, _ string) bool { return n == name })},
		{name + ":" + status, chartsOf(func(n, st string) bool { return n == name && st == status })},
		{name + ":NO_SUCH_STATUS", nil},
		{"no_such_alert", nil},
	} {
		j := getJSON2(t, env, "/api/v3/data?contexts=*&after=-10&points=1&group_by=instance&alerts="+url.QueryEscape(c.q))
		got := append([]string(nil), j.View.Dimensions.IDs...)
		sort.Strings(got)
		if strings.Join(got, ";") != strings.Join(c.want, ";") {
			t.Errorf("alerts=%s: columns %q, want %q", c.q, got, c.want)
		}
		if len(j.Summary.Instances) < 7 {
			t.Errorf("alerts=%s narrowed the scope to %d instances", c.q, len(j.Summary.Instances))
		}
	}
}
