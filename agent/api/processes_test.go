package api

import (
	"encoding/json"
	"os"
	"strconv"
	"strings"
	"testing"
)

// TestProcesses reads the live table over HTTP and finds the test itself.
func TestProcesses(t *testing.T) {
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		t.Skip("needs Linux /proc (run on Linux)")
	}
	env := newTestEnv(t)
	type row struct {
		PID, PPID, Threads         int
		Name, Cmdline, User, State string
		CPUPercent                 float64 `json:"cpu_percent"`
		RSSBytes                   int64   `json:"rss_bytes"`
		StartTime                  int64   `json:"start_time"`
	}
	var body struct {
		Total, Limit, Offset int
		Sort, Order          string
		Processes            []row
	}
	for _, ver := range []string{"v1", "v2", "v3"} {
		r := env.get(t, "/api/"+ver+"/processes?pid="+strconv.Itoa(os.Getpid()))
		if r.status != 200 {
			t.Fatalf("%s: %d %s", ver, r.status, r.body)
		}
		if err := json.Unmarshal(r.body, &body); err != nil {
			t.Fatal(err)
		}
		if body.Total != 1 || len(body.Processes) != 1 {
			t.Fatalf("%s: %s", ver, r.body)
		}
		me := body.Processes[0]
		if me.PID != os.Getpid() || me.PPID != os.Getppid() || me.Threads < 2 || me.RSSBytes <= 0 || me.StartTime <= 0 || !strings.Contains(me.Cmdline, os.Args[0]) {
			t.Errorf("%s: own row %+v", ver, me)
		}
	}
	r := env.get(t, "/api/v3/processes?sort=pid&order=asc&limit=3&offset=0")
	if err := json.Unmarshal(r.body, &body); err != nil || r.status != 200 {
		t.Fatalf("%d %s", r.status, r.body)
	}
	if len(body.Processes) != 3 || body.Total < 3 || body.Sort != "pid" || body.Order != "asc" || body.Processes[0].PID >= body.Processes[1].PID {
		t.Errorf("paged by pid: %s", r.body)
	}
	for _, tt := range []struct {
		q      string
		status int
	}{
		{"limit=-1", 400}, {"limit=0", 400}, {"sort=bogus", 400}, {"order=sideways", 400}, {"pid=x", 400},
		{"q=" + strings.Repeat("q", 10<<10), 400}, {"pid=2147483647", 404},
	} {
		r := env.get(t, "/api/v1/processes?"+tt.q)
		if r.status != tt.status || len(r.body) > 300 {
			t.Errorf("%.40s = %d %.200s, want %d", tt.q, r.status, r.body, tt.status)
		}
	}
}
