package h2srv

import (
	"context"
	"io"
	"net/http"
	"testing"
	"time"

	"golang.org/x/net/http2"
)

// TestFramesPastGoAwayIgnored: after a GOAWAY NO_ERROR (Shutdown) the
// frames a client sent on streams past its last stream id before it
// read it, a request's body and trailers among them, are ignored (RFC
// 9113 §6.8), and the stream in flight completes. Taken for frames on
// a closed stream, the trailers would end the connection with a
// PROTOCOL_ERROR, and the stream in flight with it.
func TestFramesPastGoAwayIgnored(t *testing.T) {
	var cnt counters
	started := make(chan struct{}, 2)
	release := make(chan struct{})
	ts := newTestServer(t, cnt.config(Config{}), http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		started <- struct{}{}
		select {
		case <-release:
		case <-r.Context().Done():
		}
		_, _ = io.WriteString(w, "finished")
	}))
	rc := newRawClient(t, ts.addr)
	rc.headers(1, true, rc.block("GET", "/"))
	<-started
	shut := make(chan error, 1)
	go func() { shut <- ts.srv.Shutdown(context.Background()) }()
	rc.next(10*time.Second, func(f http2.Frame, err error) bool {
		if err != nil {
			t.Fatal(err)
		}
		_, ok := f.(*http2.GoAwayFrame)
		return ok
	})
	// Streams 3 and 5 as a client sends them that has not read the
	// GOAWAY yet: a request with trailers, one with a body.
	rc.headers(3, false, rc.block("POST", "/", "trailer", "x-sum"))
	rc.headers(3, true, rc.block("", "", "x-sum", "1"))
	rc.headers(5, false, rc.block("POST", "/"))
	if err := rc.fr.WriteData(5, true, []byte("body")); err != nil {
		t.Fatal(err)
	}
	rc.ping()
	close(release)
	if status, body, end := rc.response(1, 10*time.Second); status != "200" || string(body) != "finished" || end != "end" {
		t.Fatalf("stream in flight: %s %q %s", status, body, end)
	}
	if code := rc.closed(10 * time.Second); code != 1<<31 {
		t.Fatalf("a second GOAWAY: %v", code)
	}
	if err := <-shut; err != nil {
		t.Fatal(err)
	}
	if kinds, conns := cnt.all(); len(kinds) != 0 || len(conns) != 0 {
		t.Fatalf("frames past the GOAWAY counted as errors: %v %v", kinds, conns)
	}
}
