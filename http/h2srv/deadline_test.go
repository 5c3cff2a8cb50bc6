package h2srv

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// TestReadDeadline: a body that does not come fails Read once the
// handler's read deadline passes, with os.ErrDeadlineExceeded.
func TestReadDeadline(t *testing.T) {
	rerr := make(chan error, 1)
	ts := newTestServer(t, Config{}, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_ = http.NewResponseController(w).SetReadDeadline(time.Now().Add(100 * time.Millisecond))
		_, err := io.ReadAll(r.Body)
		rerr <- err
		w.WriteHeader(http.StatusRequestTimeout)
	}))
	rc := newRawClient(t, ts.addr)
	rc.headers(1, false, rc.block("POST", "/"))
	if err := rc.fr.WriteData(1, false, []byte("start")); err != nil {
		t.Fatal(err)
	}
	if status, _, _ := rc.response(1, 10*time.Second); status != "408" {
		t.Fatalf("status %s, want 408", status)
	}
	if err := <-rerr; !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("Read past the deadline: %v, want os.ErrDeadlineExceeded", err)
	}
}

// TestWriteStalled: a client that gives all the window it can but
// reads nothing stalls the connection's output; a handler's Write
// fails at its write deadline instead of waiting for ever.
func TestWriteStalled(t *testing.T) {
	werr := make(chan error, 1)
	ts := newTestServer(t, Config{}, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_ = http.NewResponseController(w).SetWriteDeadline(time.Now().Add(300 * time.Millisecond))
		chunk := make([]byte, 1<<20)
		var err error
		for i := 0; i < 200 && err == nil; i++ {
			_, err = w.Write(chunk)
		}
		werr <- err
	}))
	rc := newRawClient(t, ts.addr, http2.Setting{ID: http2.SettingInitialWindowSize, Val: maxWindow})
	if err := rc.fr.WriteWindowUpdate(0, maxWindow-initialWindow); err != nil {
		t.Fatal(err)
	}
	rc.headers(1, true, rc.block("GET", "/big"))
	select {
	case err := <-werr:
		if !errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatalf("Write to a client that does not read: %v, want os.ErrDeadlineExceeded", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("Write still blocked 20 s after its deadline")
	}
}

// TestEarlyAnswer: a handler that answers without reading the body
// ends the stream, then resets it with NO_ERROR (RFC 9113 §8.1); what
// the client sent meanwhile on it does not end the connection.
func TestEarlyAnswer(t *testing.T) {
	ts := newTestServer(t, Config{}, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == "POST" {
			w.WriteHeader(http.StatusRequestEntityTooLarge)
			return
		}
		_, _ = io.WriteString(w, "next")
	}))
	rc := newRawClient(t, ts.addr)
	rc.headers(1, false, rc.block("POST", "/up"))
	if err := rc.fr.WriteData(1, false, make([]byte, 1000)); err != nil {
		t.Fatal(err)
	}
	var status string
	var ended, reset bool
	rc.next(10*time.Second, func(f http2.Frame, err error) bool {
		if err != nil {
			t.Fatal(err)
		}
		switch f := f.(type) {
		case *http2.MetaHeadersFrame:
			status = f.PseudoValue("status")
			ended = f.StreamEnded()
		case *http2.RSTStreamFrame:
			if f.ErrCode != http2.ErrCodeNo {
				t.Fatalf("reset %v, want NO_ERROR", f.ErrCode)
			}
			reset = true
		}
		return reset
	})
	if status != "413" || !ended {
		t.Fatalf("answer %s ended %v, want 413 with END_STREAM before the reset", status, ended)
	}
	// The client had more on its way: DATA and trailers.
	if err := rc.fr.WriteData(1, false, make([]byte, 1000)); err != nil {
		t.Fatal(err)
	}
	rc.headers(1, true, rc.block("", "x-trailer", "late"))
	rc.headers(3, true, rc.block("GET", "/next"))
	if status, body, end := rc.response(3, 10*time.Second); status != "200" || string(body) != "next" || end != "end" {
		t.Fatalf("next stream: %s %q %s", status, body, end)
	}
}

// TestContextCancel: a request's context ends when the client resets
// its stream, when the connection ends, and when the handler returns.
func TestContextCancel(t *testing.T) {
	started := make(chan context.Context, 3)
	ts := newTestServer(t, Config{}, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		started <- r.Context()
		if r.URL.Path != "/return" {
			<-r.Context().Done()
		}
	}))
	rc := newRawClient(t, ts.addr)
	rc.headers(1, true, rc.block("GET", "/reset"))
	ctx := <-started
	if err := rc.fr.WriteRSTStream(1, http2.ErrCodeCancel); err != nil {
		t.Fatal(err)
	}
	waitDone(t, ctx, "client reset")

	rc.headers(3, true, rc.block("GET", "/return"))
	ctx = <-started
	waitDone(t, ctx, "handler returned")

	rc.headers(5, true, rc.block("GET", "/hangup"))
	ctx = <-started
	_ = rc.nc.Close()
	waitDone(t, ctx, "connection closed")
}

func waitDone(t *testing.T, ctx context.Context, why string) {
	t.Helper()
	select {
	case <-ctx.Done():
	case <-time.After(10 * time.Second):
		t.Fatalf("%s: request context not done", why)
	}
}

// TestConnect: a CONNECT with :authority only reaches the handler as
// net/http gives it; one with a :path is refused.
func TestConnect(t *testing.T) {
	ts := newTestServer(t, Config{}, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Target", r.Method+" "+r.Host+" "+r.URL.Host+" "+r.RequestURI)
		w.WriteHeader(http.StatusNotImplemented)
	}))
	rc := newRawClient(t, ts.addr)
	rc.hbuf.Reset()
	for _, f := range [][2]string{{":method", "CONNECT"}, {":authority", "f.example:443"}} {
		_ = rc.enc.WriteField(hpack.HeaderField{Name: f[0], Value: f[1]})
	}
	rc.headers(1, true, bytes.Clone(rc.hbuf.Bytes()))
	var target string
	rc.next(10*time.Second, func(f http2.Frame, err error) bool {
		if err != nil {
			t.Fatal(err)
		}
		if m, ok := f.(*http2.MetaHeadersFrame); ok && m.StreamID == 1 {
			if st := m.PseudoValue("status"); st != "501" {
				t.Fatalf("CONNECT: status %s, want 501", st)
			}
			for _, hf := range m.RegularFields() {
				if hf.Name == "x-target" {
					target = hf.Value
				}
			}
			return true
		}
		return false
	})
	if want := "CONNECT f.example:443 f.example:443 f.example:443"; target != want {
		t.Fatalf("handler saw %q, want %q", target, want)
	}
	rc.headers(3, true, rc.block("CONNECT", "/"))
	if _, _, end := rc.response(3, 10*time.Second); end != "rst PROTOCOL_ERROR" {
		t.Fatalf("CONNECT with a :path ended %q, want a PROTOCOL_ERROR reset", end)
	}
}

// TestBadLengthIsTheCause: a request whose DATA falls short of its
// content-length is reset, its body read fails with ErrBadLength, and
// its context ends with ErrBadLength as the cause; a stream the client
// resets ends with no cause beyond context.Canceled.
func TestBadLengthIsTheCause(t *testing.T) {
	ts, got, started := bodyEndServer(t, 2)
	rc := newRawClient(t, ts.addr)
	rc.headers(1, false, rc.block("POST", "/short", "content-length", "10"))
	<-started
	if err := rc.fr.WriteData(1, true, []byte("hello")); err != nil {
		t.Fatal(err)
	}
	if s := <-got; !errors.Is(s.read, ErrBadLength) || !errors.Is(s.cause, ErrBadLength) {
		t.Fatalf("short body: read %v, cause %v; want ErrBadLength both", s.read, s.cause)
	}

	rc.headers(3, false, rc.block("POST", "/reset", "content-length", "10"))
	<-started
	if err := rc.fr.WriteRSTStream(3, http2.ErrCodeCancel); err != nil {
		t.Fatal(err)
	}
	if s := <-got; s.cause != context.Canceled {
		t.Fatalf("client reset: cause %v; want context.Canceled alone", s.cause)
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
