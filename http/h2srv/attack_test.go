package h2srv

import (
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/net/http2"

	"peerdns/internal/testutil"
)

// TestBigFramesStayInPools: a client that allows the largest frames and
// windows (SETTINGS_MAX_FRAME_SIZE 2^24-1) does not make a handler's one
// large Write one DATA frame: the connection's pending output would hold
// all of it at once, past the output pools' buffers (bigOutput), for as
// long as the client does not read. Every DATA frame fits in what a
// bigOutput buffer has beyond maxPending.
func TestBigFramesStayInPools(t *testing.T) {
	const size = 4 << 20
	ts := newTestServer(t, Config{}, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write(make([]byte, size))
	}))
	rc := newRawClient(t, ts.addr,
		http2.Setting{ID: http2.SettingMaxFrameSize, Val: maxMaxFrameSize},
		http2.Setting{ID: http2.SettingInitialWindowSize, Val: maxWindow})
	if err := rc.fr.WriteWindowUpdate(0, maxWindow-initialWindow); err != nil {
		t.Fatal(err)
	}
	rc.headers(1, true, rc.block("GET", "/"))
	largest, got := 0, 0
	rc.next(10*time.Second, func(f http2.Frame, err error) bool {
		if err != nil {
			t.Fatalf("after %d bytes: %v", got, err)
		}
		if d, ok := f.(*http2.DataFrame); ok && d.StreamID == 1 {
			largest = max(largest, len(d.Data()))
			got += len(d.Data())
			return d.StreamEnded()
		}
		return false
	})
	if got != size {
		t.Fatalf("body %d bytes, want %d", got, size)
	}
	if limit := bigOutput - maxPending - 9; largest > limit {
		t.Fatalf("a DATA frame of %d bytes: the pending output held more than a bigOutput buffer (frames of at most %d fit)", largest, limit)
	}
}

// TestQueuedStreamResetByServer: a stream waiting for a handler slot
// that the server resets (here for a WINDOW_UPDATE past 2^31-1, a
// FLOW_CONTROL_ERROR) leaves the queue: no handler runs for it later.
func TestQueuedStreamResetByServer(t *testing.T) {
	release := make(chan struct{})
	var mu sync.Mutex
	var served []string
	ts := newTestServer(t, Config{MaxConcurrentStreams: 1}, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		served = append(served, r.URL.Path)
		mu.Unlock()
		if r.URL.Path == "/block" {
			<-release // ignores its context
		}
		_, _ = io.WriteString(w, "ok")
	}))
	rc := newRawClient(t, ts.addr)
	// Stream 1 takes the one slot; reset by the client, it leaves the
	// wire while its handler runs on, so streams 3 and 5 open and queue.
	rc.headers(1, true, rc.block("GET", "/block"))
	if err := rc.fr.WriteRSTStream(1, http2.ErrCodeCancel); err != nil {
		t.Fatal(err)
	}
	rc.headers(3, true, rc.block("GET", "/reset"))
	if err := rc.fr.WriteWindowUpdate(3, maxWindow); err != nil {
		t.Fatal(err)
	}
	rc.next(10*time.Second, func(f http2.Frame, err error) bool {
		if err != nil {
			t.Fatal(err)
		}
		r, ok := f.(*http2.RSTStreamFrame)
		return ok && r.StreamID == 3 && r.ErrCode == http2.ErrCodeFlowControl
	})
	rc.headers(5, true, rc.block("GET", "/after"))
	rc.ping()
	close(release)
	if status, body, end := rc.response(5, 10*time.Second); status != "200" || string(body) != "ok" || end != "end" {
		t.Fatalf("stream 5: %s %q %s", status, body, end)
	}
	mu.Lock()
	defer mu.Unlock()
	if !slices.Equal(served, []string{"/block", "/after"}) {
		t.Fatalf("handlers ran for %q, want /block and /after only", served)
	}
}

// TestTrailerFieldsChecked: request trailers are held to the rules of
// the head (RFC 9113 §8.2.2): a connection-specific field, or TE other
// than "trailers", makes the request malformed, a stream error
// PROTOCOL_ERROR, and the handler sees its body fail, not end.
func TestTrailerFieldsChecked(t *testing.T) {
	for _, field := range [][2]string{{"transfer-encoding", "chunked"}, {"connection", "close"}, {"te", "gzip"}} {
		t.Run(field[0], func(t *testing.T) {
			bodyErr := make(chan error, 1)
			ts := newTestServer(t, Config{}, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				_, err := io.ReadAll(r.Body)
				bodyErr <- err
			}))
			rc := newRawClient(t, ts.addr)
			rc.headers(1, false, rc.block("POST", "/", "trailer", field[0]))
			if err := rc.fr.WriteData(1, false, []byte("hi")); err != nil {
				t.Fatal(err)
			}
			rc.headers(1, true, rc.block("", "", field[0], field[1]))
			if _, _, end := rc.response(1, 10*time.Second); end != "rst PROTOCOL_ERROR" {
				t.Fatalf("trailers with %s: %s, want rst PROTOCOL_ERROR", field[0], end)
			}
			if err := <-bodyErr; err == nil {
				t.Fatalf("trailers with %s: the body read ended cleanly", field[0])
			}
		})
	}
}

// TestDrainedBodyBuffersFreed: a stream whose body was buffered and
// then read keeps no buffer the size of what it held. Otherwise a client
// could make each of its streams in turn hold half a window unread
// until the handler takes it (the connection window allows that much
// at a time), and every stream would keep that much memory for its
// life: the streams' buffers would add up far past the connection's
// window.
func TestDrainedBodyBuffersFreed(t *testing.T) {
	const streams, chunk = 8, 512 << 10
	var mu sync.Mutex
	read := make(chan struct{})
	hold := make(chan struct{})
	goes := map[string]chan struct{}{}
	for i := range streams {
		goes[fmt.Sprint("/", i)] = make(chan struct{})
	}
	ts := newTestServer(t, Config{}, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		g := goes[r.URL.Path]
		mu.Unlock()
		<-g
		_, err := io.ReadFull(r.Body, make([]byte, chunk))
		if err != nil {
			t.Error(err)
		}
		read <- struct{}{}
		<-hold // the stream stays open, its body unended
	}))
	t.Cleanup(func() { close(hold) })
	rc := newRawClient(t, ts.addr)
	data := make([]byte, 16<<10)
	for i := range streams {
		id := uint32(2*i + 1)
		rc.headers(id, false, rc.block("POST", fmt.Sprint("/", i)))
		for sent := 0; sent < chunk; sent += len(data) {
			if err := rc.fr.WriteData(id, false, data); err != nil {
				t.Fatal(err)
			}
		}
		rc.ping() // all of it is buffered, unread
		close(goes[fmt.Sprint("/", i)])
		<-read
	}
	total := 0
	ts.srv.mu.Lock()
	conns := ts.srv.list()
	ts.srv.mu.Unlock()
	for _, c := range conns {
		c.mu.Lock()
		for _, s := range c.streams {
			total += cap(s.rbuf)
		}
		c.mu.Unlock()
	}
	if total > int(ts.srv.cfg.ConnWindow) {
		t.Fatalf("%d streams whose bodies were read hold %d bytes of buffers, over the connection window (%d)", streams, total, ts.srv.cfg.ConnWindow)
	}
}

// TestIdleClosesUnreadConn: a client that reads nothing leaves the
// connection's writer blocked in its Write; once the streams' write
// deadlines reset them and the connection has been idle for
// IdleTimeout, the connection still ends (its last Write is cut, as the
// close after an error cuts it), and does not stay open for good.
func TestIdleClosesUnreadConn(t *testing.T) {
	werr := make(chan error, 1)
	ts := newTestServer(t, Config{IdleTimeout: 200 * time.Millisecond}, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_ = http.NewResponseController(w).SetWriteDeadline(time.Now().Add(200 * time.Millisecond))
		_, err := w.Write(make([]byte, 64<<20))
		werr <- err
	}))
	rc := newRawClient(t, ts.addr, http2.Setting{ID: http2.SettingInitialWindowSize, Val: maxWindow})
	if err := rc.fr.WriteWindowUpdate(0, maxWindow-initialWindow); err != nil {
		t.Fatal(err)
	}
	rc.headers(1, true, rc.block("GET", "/"))
	// Nothing read from here on.
	if err := <-werr; err == nil {
		t.Fatal("a 64 MiB Write to a client that reads nothing did not fail at its deadline")
	}
	testutil.Eventually(t, 5*time.Second, func() error {
		if n := ts.srv.Open(); n != 0 {
			return fmt.Errorf("%d connections open, idle with their client reading nothing", n)
		}
		return nil
	})
}

// TestMalformedFieldsRefused: fields that would turn into another
// request on an HTTP/1.1 hop (CR, LF or NUL in a value, an uppercase or
// empty name, a connection-specific field, a content-length that does
// not parse) reset the stream with PROTOCOL_ERROR, and no handler runs.
func TestMalformedFieldsRefused(t *testing.T) {
	var called sync.Mutex
	var paths []string
	ts := newTestServer(t, Config{}, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		called.Lock()
		paths = append(paths, r.URL.Path)
		called.Unlock()
	}))
	rc := newRawClient(t, ts.addr)
	id := uint32(1)
	for _, f := range [][2]string{
		{"x-a", "1\r\nx-b: 2"}, {"x-a", "1\nx-b: 2"}, {"x-a", "1\x00"}, {"X-Upper", "1"}, {"", "1"},
		{"transfer-encoding", "chunked"}, {"connection", "x-a"}, {"keep-alive", "1"}, {"upgrade", "h2c"},
		{"proxy-connection", "1"}, {"te", "gzip"}, {"content-length", "1, 2"}, {"content-length", "-1"},
	} {
		rc.headers(id, true, rc.block("GET", "/", f[0], f[1]))
		if _, _, end := rc.response(id, 10*time.Second); end != "rst PROTOCOL_ERROR" {
			t.Errorf("%q: %q: %s, want rst PROTOCOL_ERROR", f[0], f[1], end)
		}
		id += 2
	}
	called.Lock()
	defer called.Unlock()
	if len(paths) > 0 {
		t.Fatalf("handlers ran for %d malformed requests", len(paths))
	}
}

// TestFlowControlOverrun: DATA past the stream window the server
// advertised resets the stream with FLOW_CONTROL_ERROR (nothing of it
// is buffered), and DATA past the connection window, across streams
// that each stay within theirs, ends the connection with GOAWAY
// FLOW_CONTROL_ERROR.
func TestFlowControlOverrun(t *testing.T) {
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		<-r.Context().Done() // reads nothing: all that came stays buffered
	})
	t.Run("stream", func(t *testing.T) {
		ts := newTestServer(t, Config{StreamWindow: 32 << 10, ConnWindow: 1 << 20}, h)
		rc := newRawClient(t, ts.addr)
		rc.headers(1, false, rc.block("POST", "/"))
		for range 2 {
			if err := rc.fr.WriteData(1, false, make([]byte, 16<<10)); err != nil {
				t.Fatal(err)
			}
		}
		if err := rc.fr.WriteData(1, false, []byte{1}); err != nil {
			t.Fatal(err)
		}
		if _, _, end := rc.response(1, 10*time.Second); end != "rst FLOW_CONTROL_ERROR" {
			t.Fatalf("one byte past the stream window: %s, want rst FLOW_CONTROL_ERROR", end)
		}
	})
	t.Run("connection", func(t *testing.T) {
		ts := newTestServer(t, Config{StreamWindow: 48 << 10, ConnWindow: initialWindow}, h)
		rc := newRawClient(t, ts.addr)
		for _, id := range []uint32{1, 3} {
			rc.headers(id, false, rc.block("POST", "/"))
			for range 2 {
				if err := rc.fr.WriteData(id, false, make([]byte, 16<<10)); err != nil {
					t.Fatal(err)
				}
			}
		}
		if code := rc.closed(10 * time.Second); code != http2.ErrCodeFlowControl {
			t.Fatalf("64 KiB on a connection window of 65535: GOAWAY %v, want FLOW_CONTROL_ERROR", code)
		}
	})
}

// TestTrailersTooLarge: a trailer block over MaxHeaderListSize (which
// the Framer cuts short) fails the request: the handler's body read
// ends in an error, not in a clean end with some of the trailers
// silently gone.
func TestTrailersTooLarge(t *testing.T) {
	type result struct {
		err     error
		trailer http.Header
	}
	got := make(chan result, 1)
	ts := newTestServer(t, Config{MaxHeaderListSize: 1024}, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, err := io.ReadAll(r.Body)
		got <- result{err, r.Trailer.Clone()}
	}))
	rc := newRawClient(t, ts.addr)
	rc.headers(1, false, rc.block("POST", "/", "trailer", "x-t, x-u"))
	if err := rc.fr.WriteData(1, false, []byte("hi")); err != nil {
		t.Fatal(err)
	}
	rc.headers(1, true, rc.block("", "", "x-t", strings.Repeat("t", 600), "x-u", strings.Repeat("u", 600)))
	if _, _, end := rc.response(1, 10*time.Second); end != "rst PROTOCOL_ERROR" {
		t.Errorf("trailers over MaxHeaderListSize: %s, want rst PROTOCOL_ERROR", end)
	}
	if r := <-got; r.err == nil {
		t.Fatalf("trailers over MaxHeaderListSize: the body ended cleanly, with trailers %q", r.trailer)
	}
}
