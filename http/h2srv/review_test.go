package h2srv

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"testing"
	"time"

	"golang.org/x/net/http2"
)

// windowed is a raw client that keeps the connection's send window as
// a client must (RFC 9113 §6.9): 65,535 to start with, plus the
// server's WINDOW_UPDATEs on stream 0.
type windowed struct {
	*rawClient
	win int64
}

// read reads one frame, taking the connection's WINDOW_UPDATEs into
// account, failing after within.
func (w *windowed) read(within time.Duration) http2.Frame {
	w.t.Helper()
	_ = w.nc.SetReadDeadline(time.Now().Add(within))
	defer func() { _ = w.nc.SetReadDeadline(time.Time{}) }()
	for {
		f, err := w.fr.ReadFrame()
		if err != nil {
			var se http2.StreamError
			if errors.As(err, &se) {
				continue
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				return nil
			}
			w.t.Fatalf("read: %v", err)
		}
		if u, ok := f.(*http2.WindowUpdateFrame); ok && u.StreamID == 0 {
			w.win += int64(u.Increment)
		}
		return f
	}
}

// send sends n bytes of body on id, in frames of 16 KiB, each once the
// connection's window has room for it; the last ends the stream.
func (w *windowed) send(id uint32, n int) {
	w.t.Helper()
	chunk := make([]byte, 16<<10)
	for sent := 0; sent < n; {
		k := min(len(chunk), n-sent)
		for w.win < int64(k) {
			if w.read(5*time.Second) == nil {
				w.t.Fatalf("stream %d: the connection window stayed at %d for 5 s with %d of %d bytes sent", id, w.win, sent, n)
			}
		}
		if err := w.fr.WriteData(id, sent+k == n, chunk[:k]); err != nil {
			w.t.Fatal(err)
		}
		w.win -= int64(k)
		sent += k
	}
}

// ping sends a PING and reads until its ACK (keeping the window).
func (w *windowed) ping() {
	w.t.Helper()
	data := [8]byte{'w', 'i', 'n', 'd', 'o', 'w', 'e', 'd'}
	if err := w.fr.WritePing(false, data); err != nil {
		w.t.Fatal(err)
	}
	for {
		f := w.read(10 * time.Second)
		if f == nil {
			w.t.Fatal("no PING ACK")
		}
		if p, ok := f.(*http2.PingFrame); ok && p.IsAck() && p.Data == data {
			return
		}
	}
}

// response reads frames until stream id's response ends, and says how.
func (w *windowed) response(id uint32) string {
	w.t.Helper()
	for {
		f := w.read(10 * time.Second)
		if f == nil {
			w.t.Fatalf("stream %d: no response", id)
		}
		if f.Header().StreamID != id {
			continue
		}
		switch f := f.(type) {
		case *http2.RSTStreamFrame:
			return fmt.Sprint("rst ", f.ErrCode)
		case *http2.MetaHeadersFrame:
			if f.StreamEnded() {
				return "end " + f.PseudoValue("status")
			}
		case *http2.DataFrame:
			if f.StreamEnded() {
				return "end"
			}
		}
	}
}

// TestUnreadBodyWindowReturned: a request body the client sent whole
// (END_STREAM) and the handler never read is given back to the
// connection's receive window when the handler returns, as a body the
// handler closes or a stream that is reset is. Kept, it would count
// against the connection for its life: requests a handler answers
// without reading (a 405, a 401, a redirect) would, once their bodies
// add up to ConnWindow, leave the client unable to send a byte of body
// on any stream of the connection.
func TestUnreadBodyWindowReturned(t *testing.T) {
	release := make(chan struct{})
	ts := newTestServer(t, Config{}, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select { // the body is in, unread
		case <-release:
		case <-r.Context().Done():
		}
		w.WriteHeader(http.StatusMethodNotAllowed)
	}))
	w := &windowed{rawClient: newRawClient(t, ts.addr), win: initialWindow}
	const body = 600 << 10 // each under the stream window, two over the connection's
	for i := range 3 {
		id := uint32(2*i + 1)
		w.headers(id, false, w.block("POST", "/"))
		w.send(id, body)
		w.ping() // the body is buffered before the handler returns
		release <- struct{}{}
		if end := w.response(id); end != "end 405" {
			t.Fatalf("stream %d ended %q", id, end)
		}
	}
}

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

// TestDeadlineSetDuringWait: a read or write deadline set while the
// handler's Read or Write already waits (from another goroutine: a
// watchdog) bounds that wait, as net/http's servers do (their deadline
// interrupts a Read or Write in progress). Otherwise a client that
// holds its body back, or gives no window, holds the handler for as
// long as it likes whatever deadline the handler sets.
func TestDeadlineSetDuringWait(t *testing.T) {
	res := make(chan error, 2)
	ts := newTestServer(t, Config{}, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rc := http.NewResponseController(w)
		errc := make(chan error, 1)
		if r.URL.Path == "/read" {
			go func() {
				_, err := r.Body.Read(make([]byte, 1))
				errc <- err
			}()
		} else {
			go func() {
				_, err := w.Write(make([]byte, 1))
				if err == nil {
					err = rc.Flush() // waits: no window
				}
				errc <- err
			}()
		}
		s := w.(*stream)
		waiting := func() bool {
			s.c.mu.Lock()
			defer s.c.mu.Unlock()
			return s.rwaiting || s.wwaiting
		}
		for deadline := time.Now().Add(5 * time.Second); !waiting(); {
			if time.Now().After(deadline) {
				res <- fmt.Errorf("%s: the Read or the Flush never waited", r.URL.Path)
				return
			}
			time.Sleep(time.Millisecond)
		}
		if r.URL.Path == "/read" {
			_ = rc.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
		} else {
			_ = rc.SetWriteDeadline(time.Now().Add(100 * time.Millisecond))
		}
		select {
		case err := <-errc:
			res <- err
		case <-time.After(5 * time.Second):
			res <- fmt.Errorf("%s: still waiting 5 s after its deadline", r.URL.Path)
		}
	}))
	rc := newRawClient(t, ts.addr, http2.Setting{ID: http2.SettingInitialWindowSize, Val: 0})
	rc.headers(1, false, rc.block("POST", "/read"))
	rc.headers(3, true, rc.block("GET", "/write"))
	for range 2 {
		if err := <-res; !errors.Is(err, os.ErrDeadlineExceeded) {
			t.Errorf("%v, want os.ErrDeadlineExceeded", err)
		}
	}
}

// TestBadLengthAtTrailers: a body that ends short of its content-length
// with trailers rather than an END_STREAM DATA frame is the same
// malformed request (RFC 9113 §8.1.1): its read fails with
// ErrBadLength and its context ends with ErrBadLength as the cause, as
// for one that ends with DATA, not as for a stream the client reset.
func TestBadLengthAtTrailers(t *testing.T) {
	type seen struct{ read, cause error }
	got := make(chan seen, 1)
	started := make(chan struct{}, 1)
	ts := newTestServer(t, Config{}, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		started <- struct{}{}
		_, err := io.ReadAll(r.Body)
		<-r.Context().Done()
		got <- seen{err, context.Cause(r.Context())}
	}))
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

// TestIdleEvenStream: the server opens no stream (no push), so every
// even-numbered stream is idle, and a RST_STREAM, WINDOW_UPDATE or
// DATA on one is a connection error PROTOCOL_ERROR (RFC 9113 §5.1),
// whatever the client's own stream ids have reached.
func TestIdleEvenStream(t *testing.T) {
	for _, typ := range []string{"RST_STREAM", "WINDOW_UPDATE", "DATA"} {
		t.Run(typ, func(t *testing.T) {
			ts := newTestServer(t, Config{}, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
			rc := newRawClient(t, ts.addr)
			rc.headers(1, true, rc.block("GET", "/"))
			rc.headers(3, true, rc.block("GET", "/"))
			rc.ping()
			var err error
			switch typ {
			case "RST_STREAM":
				err = rc.fr.WriteRSTStream(2, http2.ErrCodeCancel)
			case "WINDOW_UPDATE":
				err = rc.fr.WriteWindowUpdate(2, 1)
			default:
				err = rc.fr.WriteData(2, true, []byte("x"))
			}
			if err != nil {
				t.Fatal(err)
			}
			if err := rc.fr.WritePing(false, [8]byte{}); err != nil {
				t.Fatal(err)
			}
			if code := rc.closed(10 * time.Second); code != http2.ErrCodeProtocol {
				t.Fatalf("GOAWAY %v, want PROTOCOL_ERROR", code)
			}
		})
	}
}
