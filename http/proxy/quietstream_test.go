package proxy

import (
	"bufio"
	"io"
	"net/http"
	"testing"
	"time"
)

// TestEdgeQuietGRPCStreamStays: a gRPC server stream (a watch) that
// sends a message, is quiet for longer than every timeout the edge has
// (ReadTimeout, WriteTimeout, UpstreamTimeout), then sends the next,
// reaches its client whole, its trailers with it: a stream's quiet is
// not an upstream's silence before its answer.
func TestEdgeQuietGRPCStreamStays(t *testing.T) {
	const short = 200 * time.Millisecond
	up := serveUpstream(t, true, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/grpc")
		w.Header().Set("Trailer", "Grpc-Status")
		for i := range 3 {
			if i > 0 {
				time.Sleep(4 * short) // the quiet spell is what is tried
			}
			_, _ = w.Write([]byte{0, 0, 0, 0, 2, 'm', '0' + byte(i)})
			w.(http.Flusher).Flush()
		}
		w.Header().Set("Grpc-Status", "0")
	})
	e := newTestH2Edge(t, map[string]string{"w.p2p": up}, Deps{ReadTimeout: short, WriteTimeout: short, UpstreamTimeout: short})
	req, err := http.NewRequest(http.MethodPost, "https://w.p2p/watch.Watch/Changes", http.NoBody)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/grpc")
	req.Header.Set("Te", "trailers")
	resp, err := e.c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	br := bufio.NewReader(resp.Body)
	for i := range 3 {
		msg := make([]byte, 7)
		if _, err := io.ReadFull(br, msg); err != nil || msg[6] != '0'+byte(i) {
			t.Fatalf("message %d: %q %v", i, msg, err)
		}
	}
	if _, err := br.ReadByte(); err != io.EOF {
		t.Fatalf("after the last message: %v, want the stream's end", err)
	}
	if got := resp.Trailer.Get("Grpc-Status"); got != "0" {
		t.Fatalf("Grpc-Status trailer %q, want 0", got)
	}
}
