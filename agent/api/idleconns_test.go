package api

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"runtime"
	"strings"
	"testing"
)

// TestIdleConnectionsHoldNoAnswers: a keep-alive connection waiting for
// its next request holds none of its last answer. fasthttp kept each
// connection's answer buffer (and its read and write buffers) for the
// connection's life: 3,500 idle connections that had each been sent a
// 177 KB answer held 830 MB of RSS, for as long as they sent a request
// a minute.
func TestIdleConnectionsHoldNoAnswers(t *testing.T) {
	env := newTestEnv(t)
	addChart(t, env, "wide.chart", 100, 600, func(ts int64, d int) float64 { return float64(ts%1000) + float64(d)/7 })
	// Under pooledBody: such answers are built in pooled buffers.
	const path = "/api/v1/data?chart=wide.chart&after=-600&points=160"
	r := env.get(t, path)
	if r.status != 200 || len(r.body) < 128<<10 || len(r.body) > pooledBody {
		t.Fatalf("answer: %d, %d bytes; want 200 and 128 KiB to %d bytes", r.status, len(r.body), pooledBody)
	}
	heap := func() uint64 {
		var ms runtime.MemStats
		runtime.GC()
		runtime.GC() // pooled buffers are freed on the second collection
		runtime.ReadMemStats(&ms)
		return ms.HeapAlloc
	}
	before := heap()
	const conns = 300
	addr := strings.TrimPrefix(env.url, "http://")
	for i := range conns {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		// Each reads the whole answer, as a dashboard does (one query:
		// the data cache keeps one answer, each connection its copy).
		if _, err := fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: %s\r\n\r\n", path, addr); err != nil {
			t.Fatal(err)
		}
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			t.Fatal(err)
		}
		n, err := io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if err != nil || resp.StatusCode != 200 || n < 128<<10 {
			t.Fatalf("connection %d: %d, %d bytes, %v", i, resp.StatusCode, n, err)
		}
	}
	// Every connection has its answer and waits, open, for another
	// request. Read and write buffers and a goroutine are an idle
	// connection's own; 300 answers would be 40 MB more.
	grown := int64(heap()) - int64(before)
	if grown > conns*48<<10 {
		t.Errorf("%d idle connections hold %d KB of heap (%d KB each), want under 48 KB each", conns, grown>>10, grown/conns>>10)
	}
	t.Logf("%d idle connections: %d KB of heap", conns, grown>>10)
}
