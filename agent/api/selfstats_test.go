package api

import (
	"fmt"
	"testing"
	"time"

	"peerdns/agent/collect"
	"peerdns/agent/store"
	"peerdns/internal/testutil"
)

// Stats counts the requests answered over real connections, the bytes
// read and written on them, the time spent and the longest answer (which
// restarts at every read), and the connections open.
func TestSelfStats(t *testing.T) {
	e := newTestEnv(t)
	before := e.srv.Stats()
	for range 5 {
		if r := e.get(t, "/api/v1/info"); r.status != 200 {
			t.Fatalf("info: %d", r.status)
		}
	}
	var st collect.ServerStats
	testutil.Eventually(t, 5*time.Second, func() error { // counted after the answer is written
		st = e.srv.Stats()
		if st.Requests-before.Requests != 5 {
			return fmt.Errorf("%d requests counted, want 5", st.Requests-before.Requests)
		}
		return nil
	})
	// On the wire (the bodies go gzipped to this client): at least the
	// request and status lines.
	if st.BytesOut-before.BytesOut < 5*uint64(len("HTTP/1.1 200 OK\r\n")) || st.BytesIn-before.BytesIn < 5*uint64(len("GET /api/v1/info HTTP/1.1\r\n")) {
		t.Errorf("bytes in %d out %d, want at least 5 request and 5 status lines", st.BytesIn-before.BytesIn, st.BytesOut-before.BytesOut)
	}
	if st.ResponseTime <= before.ResponseTime || st.MaxTime <= 0 || st.MaxTime > st.ResponseTime {
		t.Errorf("response time %v, max %v", st.ResponseTime, st.MaxTime)
	}
	if st.Clients < 1 {
		t.Errorf("%d connections open, want the kept-alive client's", st.Clients)
	}
	if again := e.srv.Stats(); again.MaxTime != 0 {
		t.Errorf("max %v after a read with no request since, want 0", again.MaxTime)
	}
}

// TestReadsCountedByAPI: the store reads of each API are counted under
// Netdata's names for netdata.queries and netdata.db_points_read: a data
// query, a badge and a weights call each under their own.
func TestReadsCountedByAPI(t *testing.T) {
	env := newTestEnv(t)
	for _, path := range []string{
		"/api/v1/data?chart=system.cpu&after=-60",
		"/api/v1/badge.svg?chart=system.cpu&after=-60",
		"/api/v1/weights?method=volume&after=-60&before=0&context=system.cpu",
	} {
		if r := env.get(t, path); r.status != 200 {
			t.Fatalf("%s: %d", path, r.status)
		}
	}
	q, p := env.db.Reads()
	for _, r := range []store.Reader{store.ReadData, store.ReadBadge, store.ReadWeights} {
		if q[r] == 0 || p[r] == 0 {
			t.Errorf("%s: %d queries, %d points read", store.ReaderNames[r], q[r], p[r])
		}
	}
	if q[store.ReadData] != 1 {
		t.Errorf("one data query over one chart counted %d", q[store.ReadData])
	}
}
