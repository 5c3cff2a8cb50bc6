package proxy

import (
	"io"
	"net/http"
	"testing"
	"time"
)

// The summed request time behind /api/stats' avgResponseTime counts a
// request under a millisecond (most through a proxy on loopback) for
// what it took, not as 0.
func TestRequestTimeCountsSubMillisecondRequests(t *testing.T) {
	up := serveUpstream(t, false, func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok") })
	e := startTestEdge(t, map[string]string{"fast.p2p": up}, Deps{NoHTTP3: true})
	httpAddr, _ := e.s.Addrs()
	c := &http.Client{Timeout: 10 * time.Second}
	var took time.Duration
	for range 400 {
		req, _ := http.NewRequest("GET", "http://"+httpAddr.String()+"/", nil)
		req.Host = "fast.p2p"
		start := time.Now()
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		took += time.Since(start)
	}
	if got := e.s.Counters(); got.Total != 400 || got.TotalMillis == 0 {
		t.Fatalf("%d requests summed to %d ms (the client saw %v)", got.Total, got.TotalMillis, took)
	}
}
