package api

import (
	"strings"
	"testing"
)

// TestHostPrefix: /host/<hostname or machine GUID>/<path> answers <path>
// for that host, as Netdata does (its dashboard and scripts build such
// URLs from info's mirrored_hosts); a host this agent does not keep is
// Netdata's 404.
func TestHostPrefix(t *testing.T) {
	env := newTestEnv(t)
	h := env.srv.host
	for _, name := range []string{h.Hostname, h.GUID, h.NodeID} {
		for _, path := range []string{"/api/v1/info", "/api/v1/data?chart=system.load&after=-10&points=5", "/api/v1/charts"} {
			want := env.get(t, path)
			got := env.get(t, "/host/"+name+path)
			if got.status != 200 || want.status != 200 || string(got.body) != string(want.body) {
				t.Errorf("/host/%s%s: %d, want %s's own 200 answer\n%.300s", name, path, got.status, path, got.body)
			}
		}
	}
	r := env.get(t, "/host/nobody/api/v1/info")
	if r.status != 404 || !strings.Contains(string(r.body), "does not maintain a database for host: nobody") {
		t.Errorf("unknown host: %d %s", r.status, r.body)
	}
	if r := env.get(t, "/host/"+h.Hostname+"/api/v1/nosuch"); r.status != 404 || !strings.Contains(string(r.body), "Unsupported v1 API command: nosuch") {
		t.Errorf("unknown command under /host: %d %s", r.status, r.body)
	}
}
