package api

import (
	"strings"
	"testing"

	"peerdns/agent/store"
)

// TestCommentsStayOneLine: the text a chart carries (id, name, context,
// family, units: a mount point's path is a family, and a child's stream
// brings whatever its sender put there) is written into one comment line
// of the shell and Prometheus formats. A line break in it would end the
// comment and make the rest a command to a script that runs the shell
// format (eval "$(curl .../allmetrics)") or a series to a scraper.
func TestCommentsStayOneLine(t *testing.T) {
	env := newTestEnv(t)
	const evil = "x\ntouch /tmp/pwned\rnetdata_injected 1\n# "
	def := &store.ChartDef{ID: "disk_space.evil" + evil, Name: "disk_space.evil" + evil, Context: "disk.space" + evil,
		Family: "/mnt/" + evil, Title: "t" + evil, Units: "GiB" + evil, UpdateEvery: 1, Dims: dimsOf("avail")}
	def.Dims[0].Name = "avail" + evil
	if err := env.db.Register(def); err != nil {
		t.Fatal(err)
	}
	if err := env.db.Append(def.ID, env.now.Unix()-1, []float64{1}); err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{
		"/api/v1/allmetrics",
		"/api/v1/allmetrics?format=shell",
		"/api/v1/allmetrics?format=prometheus&help=yes&types=yes",
		"/api/v1/allmetrics?format=prometheus_all_hosts&help=yes",
		"/api/v3/export?format=prometheus&help=yes",
	} {
		r := env.get(t, path)
		if r.status != 200 || !strings.Contains(string(r.body), "evil") {
			t.Fatalf("%s: %d, the chart not listed:\n%s", path, r.status, r.body)
		}
		for _, l := range strings.Split(string(r.body), "\n") {
			if strings.HasPrefix(l, "#") && strings.ContainsRune(l, '\r') || strings.HasPrefix(l, "touch") || strings.HasPrefix(l, "netdata_injected") {
				t.Errorf("%s: a chart's text made its own line: %q", path, l)
			}
		}
	}
}
