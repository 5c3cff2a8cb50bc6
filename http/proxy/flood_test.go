package proxy

import (
	"errors"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"
)

// TestPipelinedFloodStaysBounded: a client that pipelines tiny requests
// without end and reads none of the answers is held by its own
// connection: once the answers fill the socket's buffers the edge stops
// reading its requests, so what the client gets written is bounded by
// the kernel's buffers, and the edge's heap does not grow with what the
// client tries to send (256 MiB here).
func TestPipelinedFloodStaysBounded(t *testing.T) {
	dial := rawEdge(t)
	c, _ := dial()
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	batch := []byte(strings.Repeat("GET /x HTTP/1.1\r\nHost: nowhere.p2p\r\n\r\n", 1<<14)) // 640 KiB
	// The writes block once the edge stops reading: the deadline tells.
	_ = c.SetWriteDeadline(time.Now().Add(2 * time.Second))
	sent := 0
	var err error
	for sent < 256<<20 && err == nil {
		var n int
		n, err = c.Write(batch)
		sent += n
	}
	if !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("the edge took %d bytes of requests unanswered (%v)", sent, err)
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	if sent > 64<<20 {
		t.Errorf("the edge took %d MiB of requests whose answers nobody read", sent>>20)
	}
	if grew := int64(after.HeapInuse) - int64(before.HeapInuse); grew > 16<<20 {
		t.Errorf("the heap grew by %d MiB", grew>>20)
	}
	t.Logf("%d KiB taken before the edge stopped reading", sent>>10)
}
