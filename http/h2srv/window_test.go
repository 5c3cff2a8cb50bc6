package h2srv

import (
	"errors"
	"fmt"
	"net"
	"net/http"
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
