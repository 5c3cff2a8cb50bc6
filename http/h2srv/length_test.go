package h2srv

import (
	"context"
	"errors"
	"io"
	"net/http"
	"testing"
	"time"
)

// TestBadLengthAtTrailers: a body that ends short of its content-length
// with trailers rather than an END_STREAM DATA frame is the same
// malformed request (RFC 9113 §8.1.1): its read fails with
// ErrBadLength and its context ends with ErrBadLength as the cause, as
// for one that ends with DATA, not as for a stream the client reset.
func TestBadLengthAtTrailers(t *testing.T) {
	ts, got, started := bodyEndServer(t, 1)
	rc := newRawClient(t, ts.addr)
	rc.headers(1, false, rc.block("POST", "/short", "content-length", "10", "trailer", "x-sum"))
	<-started
	if err := rc.fr.WriteData(1, false, []byte("hello")); err != nil {
		t.Fatal(err)
	}
	rc.headers(1, true, rc.block("", "", "x-sum", "1"))
	if _, _, end := rc.response(1, 10*time.Second); end != "rst PROTOCOL_ERROR" {
		t.Fatalf("stream ended %q, want rst PROTOCOL_ERROR", end)
	}
	if s := <-got; !errors.Is(s.read, ErrBadLength) || !errors.Is(s.cause, ErrBadLength) {
		t.Fatalf("short body ended by trailers: read %v, cause %v; want ErrBadLength both", s.read, s.cause)
	}
}

// bodyEnd is how a request's body read and its context ended.
type bodyEnd struct{ read, cause error }

// bodyEndServer serves up to n requests at once with a handler that
// reads the body, waits for the stream's end and sends on got what the
// read returned and the context's cause; started hears each request
// begin.
func bodyEndServer(t *testing.T, n int) (ts *testServer, got chan bodyEnd, started chan struct{}) {
	got, started = make(chan bodyEnd, n), make(chan struct{}, n)
	ts = newTestServer(t, Config{}, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		started <- struct{}{}
		_, err := io.ReadAll(r.Body)
		<-r.Context().Done()
		got <- bodyEnd{err, context.Cause(r.Context())}
	}))
	return ts, got, started
}
