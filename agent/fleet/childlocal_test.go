package fleet_test

import (
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"peerdns/agent/fleet"
	"peerdns/internal/testutil"
)

// A child streams its metrics, not its process table or its logs: asked
// for them by the node filter, the parent says they stay on the child
// instead of answering with its own process table or an empty log.
func TestChildProcessesAndLogsStayOnTheChild(t *testing.T) {
	p := newParent(t, fleet.ParentConfig{})
	c := newChild(t, p, "alpha", 2)
	first := c.now - 296
	c.run(t, p)
	testutil.Eventually(t, 10*time.Second, func() error { return held(p, c.id.ID(), first, c.now-1) })
	for _, tc := range []struct {
		path   string
		status int
	}{
		{"/api/v1/processes?limit=1000", http.StatusNotImplemented},
		{"/api/v3/processes?pid=1", http.StatusNotImplemented},
		{"/api/v1/logs?source=audit", http.StatusServiceUnavailable},
		{"/api/v3/logs?source=journal", http.StatusServiceUnavailable},
		{"/api/v2/logs?source=anomaly", http.StatusServiceUnavailable},
	} {
		for _, node := range []string{"scope_nodes=alpha", "node=guid-alpha", "nodes=" + c.id.ID()} {
			url := p.url + tc.path + "&" + node
			resp, err := http.Get(url)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != tc.status || !strings.Contains(string(b), `"alpha"`) || !strings.Contains(string(b), "stay") {
				t.Errorf("GET %s: %d %q, want %d saying alpha's stay on alpha", url, resp.StatusCode, b, tc.status)
			}
		}
	}
	// The parent's own table and audit trail are still its own.
	for _, path := range []string{"/api/v1/processes?limit=1", "/api/v1/logs?source=audit"} {
		resp, err := http.Get(p.url + path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Errorf("GET %s on the parent: %d, want 200", path, resp.StatusCode)
		}
	}
}
