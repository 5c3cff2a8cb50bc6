package fleet_test

import (
	"net/http"
	"testing"
	"time"

	"peerdns/agent/api"
	"peerdns/agent/fleet"
	"peerdns/internal/testutil"
)

// An answer for a child carries the parent's Access-Control-Allow-Origin
// (AGENT_REST_CORS), as every other answer of the parent: the child's
// server is the parent's, so a node filter must not widen it to "*".
func TestChildAnswersKeepTheParentsCORS(t *testing.T) {
	const dash = "https://dash.example"
	p := newParent(t, fleet.ParentConfig{}, func(o *api.Options) { o.CORS = dash })
	c := newChild(t, p, "alpha", 2)
	first := c.now - 296
	c.run(t, p)
	testutil.Eventually(t, 10*time.Second, func() error { return held(p, c.id.ID(), first, c.now-1) })
	for _, tc := range []struct {
		method, path string
		status       int
	}{
		{"GET", "/api/v1/data?chart=system.cpu&after=-10&scope_nodes=alpha", 200},
		{"GET", "/api/v1/info?node=guid-alpha", 200},
		{"GET", "/api/v1/chart?chart=no.such&scope_nodes=alpha", 404},
		{"OPTIONS", "/api/v1/data?chart=system.cpu&scope_nodes=alpha", 200},
		{"GET", "/api/v1/info", 200},
	} {
		req, err := http.NewRequest(tc.method, p.url+tc.path, nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Origin", "https://evil.example")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if got := resp.Header.Get("Access-Control-Allow-Origin"); resp.StatusCode != tc.status || got != dash {
			t.Errorf("%s %s: %d, Access-Control-Allow-Origin %q; want %d and %q", tc.method, tc.path, resp.StatusCode, got, tc.status, dash)
		}
	}
}
