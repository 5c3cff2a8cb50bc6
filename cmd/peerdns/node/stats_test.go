package node

import (
	"fmt"
	"io"
	"testing"
	"time"

	"peerdns/internal/testutil"
)

// Stats with real traffic, historical samples kept across a restart, and
// the WebSocket stream to several clients.
func TestStats(t *testing.T) {
	dir := t.TempDir()
	n := newTestNode(t, dir)
	base := "http://" + n.AdminAddr()
	tunnelServerURL(t, n, fmt.Sprintf(`{"name":"s","port":%d}`, echoServer(t)))
	for i := 0; i < 5; i++ {
		call(t, "GET", base+"/api/resolved-domains", "")
	}
	var st struct {
		Requests struct {
			Total, Successful int64
			SuccessRate       float64
		}
		TunnelChildren []struct {
			ID, Type, Status string
			Pid              int
			MemoryUsage      struct {
				Rss    uint64
				Shared bool
			}
		}
		Core     map[string]any
		Database map[string]any
		Drive    map[string]any
		Process  map[string]any
	}
	testutil.Eventually(t, 5*time.Second, func() error {
		mustJSON(t, "GET", base+"/api/stats", "", 200, &st)
		if st.Requests.Total < 5 || len(st.TunnelChildren) != 1 {
			return fmt.Errorf("stats: %+v", st)
		}
		return nil
	})
	c := st.TunnelChildren[0]
	if c.Type != "server" || c.Status != "running" || c.Pid == 0 || c.MemoryUsage.Rss == 0 || !c.MemoryUsage.Shared {
		t.Fatalf("tunnel child: %+v", c)
	}
	if st.Core == nil || st.Database["ledgerBytes"] == nil || st.Drive["dataBytes"] == nil || st.Process["pid"] == nil {
		t.Fatalf("sections: core %v database %v drive %v process %v", st.Core, st.Database, st.Drive, st.Process)
	}
	for _, bad := range []string{"0", "1441", "x", "-5"} {
		if code, _ := call(t, "GET", base+"/api/stats/historical?minutes="+bad, ""); code != 400 {
			t.Fatalf("minutes=%s: %d", bad, code)
		}
	}
	var hist []struct {
		Timestamp int64
		Data      map[string]any
	}
	mustJSON(t, "GET", base+"/api/stats/historical?minutes=5", "", 200, &hist)
	if len(hist) == 0 || hist[0].Timestamp == 0 || hist[0].Data["requests"] == nil {
		t.Fatalf("historical: %+v", hist)
	}

	// WebSocket: three subscribers each get the snapshot, then updates.
	for i := 0; i < 3; i++ {
		c := dialWS(t, n.AdminAddr(), 0)
		if err := c.WriteJSON(map[string]any{"type": "subscribe-stats", "minutes": 10}); err != nil {
			t.Fatal(err)
		}
		snap := readUntil(t, c, ofType("stats-snapshot"))
		if snap["stats"] == nil || snap["health"] == nil || snap["status"] == nil || snap["minutes"] != float64(10) {
			t.Fatalf("snapshot: %v", snap)
		}
		// The same health and status bodies as the routes.
		if h, _ := snap["health"].(map[string]any); h["status"] != "healthy" || h["services"] == nil {
			t.Fatalf("snapshot health: %v", snap["health"])
		}
		if st, _ := snap["status"].(map[string]any); st["peersCount"] != float64(0) || st["isConnected"] != false {
			t.Fatalf("snapshot status: %v", snap["status"])
		}
		if u := readUntil(t, c, ofType("update-stats")); u["stats"] == nil {
			t.Fatalf("update: %v", u)
		}
	}

	// Samples survive a restart.
	n.Stop()
	n2, err := Start(testConfig(dir), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(n2.Stop)
	mustJSON(t, "GET", "http://"+n2.AdminAddr()+"/api/stats/historical", "", 200, &hist)
	if len(hist) == 0 {
		t.Fatal("no history after a restart")
	}
}
