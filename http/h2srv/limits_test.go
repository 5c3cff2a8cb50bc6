package h2srv

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"

	"peerdns/internal/testutil"
)

// counters gathers what CountError and ConnError report.
type counters struct {
	mu    sync.Mutex
	kinds map[string]int
	conns []error
}

func (c *counters) config(cfg Config) Config {
	c.kinds = make(map[string]int)
	cfg.CountError = func(kind string) {
		c.mu.Lock()
		c.kinds[kind]++
		c.mu.Unlock()
	}
	cfg.ConnError = func(err error) {
		c.mu.Lock()
		c.conns = append(c.conns, err)
		c.mu.Unlock()
	}
	return cfg
}

func (c *counters) count(kind string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.kinds[kind]
}

func (c *counters) all() (map[string]int, []error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return maps.Clone(c.kinds), append([]error(nil), c.conns...)
}

func (c *counters) connErrors() []error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]error(nil), c.conns...)
}

// TestRapidReset: a client opening streams and resetting them at once
// never gets more than MaxConcurrentStreams handlers running, counting
// those that have not returned since their reset.
func TestRapidReset(t *testing.T) {
	const limit = 4
	var running, most, started atomic.Int32
	release := make(chan struct{})
	ts := newTestServer(t, Config{MaxConcurrentStreams: limit}, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		started.Add(1)
		n := running.Add(1)
		for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
		}
		if r.URL.Path == "/slow" {
			<-release // a handler that does not watch its context
		}
		running.Add(-1)
		_, _ = io.WriteString(w, "ok")
	}))
	rc := newRawClient(t, ts.addr)
	slow := rc.block("GET", "/slow")
	for i := range 2000 {
		id := uint32(2*i + 1)
		rc.headers(id, true, slow)
		if err := rc.fr.WriteRSTStream(id, http2.ErrCodeCancel); err != nil {
			t.Fatal(err)
		}
	}
	rc.ping()
	if m, s := most.Load(), started.Load(); m > limit || s > limit {
		t.Fatalf("handlers at once %d, started %d; limit %d", m, s, limit)
	}
	close(release)
	rc.headers(4001, true, rc.block("GET", "/fast"))
	if status, body, end := rc.response(4001, 10*time.Second); status != "200" || string(body) != "ok" || end != "end" {
		t.Fatalf("a stream after the resets: %s %q %s", status, body, end)
	}
	if m := most.Load(); m > limit {
		t.Fatalf("handlers at once %d, limit %d", m, limit)
	}
}

// TestStreamLimit: streams open beyond the advertised limit are refused.
func TestStreamLimit(t *testing.T) {
	const limit = 3
	release := make(chan struct{})
	var cnt counters
	ts := newTestServer(t, cnt.config(Config{MaxConcurrentStreams: limit}), http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		<-release
	}))
	defer close(release)
	rc := newRawClient(t, ts.addr)
	for i := range limit + 1 {
		rc.headers(uint32(2*i+1), true, rc.block("GET", "/"))
	}
	if _, _, end := rc.response(2*limit+1, 10*time.Second); end != "rst REFUSED_STREAM" {
		t.Fatalf("stream past the limit ended %q, want a REFUSED_STREAM reset", end)
	}
	if n := cnt.count("refused_stream"); n != 1 {
		t.Fatalf("refused_stream counted %d times, want 1", n)
	}
}

// TestContinuationFlood: a header block far over the limit across
// CONTINUATION frames closes the connection.
func TestContinuationFlood(t *testing.T) {
	var cnt counters
	var called atomic.Bool
	ts := newTestServer(t, cnt.config(Config{MaxHeaderListSize: 8 << 10}), http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		called.Store(true)
	}))
	rc := newRawClient(t, ts.addr)
	if err := rc.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: rc.block("GET", "/"), EndStream: true}); err != nil {
		t.Fatal(err)
	}
	pad := rc.block("GET", "/", "x-pad", strings.Repeat("a", 3000))
	done := make(chan error, 1)
	go func() {
		// The flood goes on until the server closes the connection.
		for {
			if err := rc.fr.WriteContinuation(1, false, pad); err != nil {
				done <- err
				return
			}
		}
	}()
	if code := rc.closed(10 * time.Second); code != http2.ErrCodeProtocol {
		t.Fatalf("GOAWAY %v, want PROTOCOL_ERROR", code)
	}
	_ = rc.nc.Close()
	<-done
	testutil.Eventually(t, 5*time.Second, func() error {
		if len(cnt.connErrors()) != 1 {
			return errors.New("ConnError not called once")
		}
		return nil
	})
	if called.Load() {
		t.Fatal("the handler ran")
	}
}

// TestEmptyContinuations: a header block may span contLimit
// CONTINUATION frames, however small; one more, even empty, ends the
// connection with ENHANCE_YOUR_CALM, counted, before any handler runs.
func TestEmptyContinuations(t *testing.T) {
	var cnt counters
	var calls atomic.Int32
	cfg := cnt.config(Config{MaxHeaderListSize: 8 << 10})
	ts := newTestServer(t, cfg, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		_, _ = io.WriteString(w, "ok")
	}))
	limit := contLimit(cfg.MaxHeaderListSize)
	// send writes the block as a HEADERS frame and limit CONTINUATION
	// frames, the last carrying the block and END_HEADERS, with extra
	// empty ones before it.
	send := func(rc *rawClient, id uint32, extra int) {
		t.Helper()
		if err := rc.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, EndStream: true}); err != nil {
			t.Fatal(err)
		}
		for range limit - 1 + extra {
			if err := rc.fr.WriteContinuation(id, false, nil); err != nil {
				t.Fatal(err)
			}
		}
		if err := rc.fr.WriteContinuation(id, true, rc.block("GET", "/")); err != nil {
			t.Fatal(err)
		}
	}
	rc := newRawClient(t, ts.addr)
	for _, id := range []uint32{1, 3} {
		send(rc, id, 0)
		if status, body, end := rc.response(id, 10*time.Second); status != "200" || string(body) != "ok" || end != "end" {
			t.Fatalf("a header block in %d CONTINUATION frames: %s %q %s", limit, status, body, end)
		}
	}
	send(rc, 5, 1)
	if code := rc.closed(10 * time.Second); code != http2.ErrCodeEnhanceYourCalm {
		t.Fatalf("GOAWAY %v after %d CONTINUATION frames, want ENHANCE_YOUR_CALM", code, limit+1)
	}
	if n := cnt.count("continuation_flood"); n != 1 {
		t.Fatalf("continuation_flood counted %d times, want 1", n)
	}
	if n := calls.Load(); n != 2 {
		t.Fatalf("handler called %d times, want 2", n)
	}
	rc = newRawClient(t, ts.addr)
	rc.headers(1, true, rc.block("GET", "/"))
	if status, _, _ := rc.response(1, 10*time.Second); status != "200" {
		t.Fatalf("a new connection after the flood: %s", status)
	}
}

// TestHeaderListTooLarge: a header list over MaxHeaderListSize, within
// what the Framer reads, is answered 431 without the handler.
func TestHeaderListTooLarge(t *testing.T) {
	var calls atomic.Int32
	ts := newTestServer(t, Config{MaxHeaderListSize: 8 << 10}, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		_, _ = io.WriteString(w, "ok")
	}))
	rc := newRawClient(t, ts.addr)
	rc.headers(1, true, rc.block("GET", "/", "x-a", strings.Repeat("a", 5000), "x-b", strings.Repeat("b", 5000)))
	if status, _, end := rc.response(1, 10*time.Second); status != "431" || end != "end" {
		t.Fatalf("oversized header list: %s %s, want 431", status, end)
	}
	rc.headers(3, true, rc.block("GET", "/"))
	if status, body, _ := rc.response(3, 10*time.Second); status != "200" || string(body) != "ok" {
		t.Fatalf("next stream: %s %q", status, body)
	}
	if n := calls.Load(); n != 1 {
		t.Fatalf("handler called %d times, want 1", n)
	}
}

// TestWindowHeld: a client that gives a stream no window gets it reset
// after the handler's write deadline; another stream is answered.
func TestWindowHeld(t *testing.T) {
	var cnt counters
	werr := make(chan error, 1)
	ts := newTestServer(t, cnt.config(Config{}), http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/held" {
			rc := http.NewResponseController(w)
			_ = rc.SetWriteDeadline(time.Now().Add(200 * time.Millisecond))
			_, err := w.Write(make([]byte, 100<<10))
			if err == nil {
				err = rc.Flush()
			}
			werr <- err
			return
		}
		_, _ = io.WriteString(w, "small")
	}))
	rc := newRawClient(t, ts.addr, http2.Setting{ID: http2.SettingInitialWindowSize, Val: 0})
	rc.headers(1, true, rc.block("GET", "/held"))
	if _, _, end := rc.response(1, 10*time.Second); end != "rst CANCEL" && end != "rst INTERNAL_ERROR" {
		t.Fatalf("held stream ended %q, want a reset", end)
	}
	if err := <-werr; err == nil {
		t.Fatal("Write past the deadline: no error")
	}
	rc.headers(3, true, rc.block("GET", "/small"))
	if err := rc.fr.WriteWindowUpdate(3, 100); err != nil {
		t.Fatal(err)
	}
	if status, body, end := rc.response(3, 10*time.Second); status != "200" || string(body) != "small" || end != "end" {
		t.Fatalf("other stream: %s %q %s", status, body, end)
	}
	if kinds, conns := cnt.all(); len(kinds) != 0 || len(conns) != 0 {
		t.Fatalf("a stalled client counted as a protocol error: %v %v", kinds, conns)
	}
}

// TestPingFlood: a client that sends PINGs and reads nothing has its
// connection closed once the answers queued pass the bound.
func TestPingFlood(t *testing.T) {
	var cnt counters
	ts := newTestServer(t, cnt.config(Config{}), http.NotFoundHandler())
	rc := newRawClient(t, ts.addr)
	// PINGs go in batches of 4096, one Write each.
	var batch bytes.Buffer
	fr := http2.NewFramer(&batch, nil)
	for range 4096 {
		_ = fr.WritePing(false, [8]byte{})
	}
	deadline := time.Now().Add(30 * time.Second)
	for sent := 0; ; sent += 4096 {
		if time.Now().After(deadline) {
			t.Fatalf("connection open after %d PINGs", sent)
		}
		if _, err := rc.nc.Write(batch.Bytes()); err != nil {
			break
		}
	}
	testutil.Eventually(t, 10*time.Second, func() error {
		if cnt.count("control_flood") != 1 || len(cnt.connErrors()) != 1 {
			return errors.New("control_flood not counted")
		}
		return nil
	})
}

// TestHeaderListTooLargeFlood: a client that sends header lists over
// the limit and reads nothing has its connection closed once the 431
// answers queued pass the control bound: each list costs it a few
// bytes (fields of the HPACK dynamic table named by index), the
// answer about as many.
func TestHeaderListTooLargeFlood(t *testing.T) {
	var cnt counters
	ts := newTestServer(t, cnt.config(Config{MaxHeaderListSize: 8 << 10}), http.NotFoundHandler())
	rc := newRawClient(t, ts.addr)
	big := strings.Repeat("a", 4000)
	rc.headers(1, true, rc.block("GET", "/", "x-a", big))
	// The field is in both dynamic tables now: each list below names
	// it by index three times, past the limit.
	block := rc.block("GET", "/", "x-a", big, "x-a", big, "x-a", big)
	if len(block) > 16 {
		t.Fatalf("block of %d bytes: the field is not indexed", len(block))
	}
	var batch bytes.Buffer
	fr := http2.NewFramer(&batch, nil)
	id := uint32(3)
	deadline := time.Now().Add(30 * time.Second)
	for sent := 0; ; sent += 4096 {
		if time.Now().After(deadline) {
			t.Fatalf("connection open after %d oversized header lists", sent)
		}
		batch.Reset()
		for range 4096 {
			_ = fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: block, EndStream: true, EndHeaders: true})
			id += 2
		}
		if _, err := rc.nc.Write(batch.Bytes()); err != nil {
			break
		}
	}
	testutil.Eventually(t, 10*time.Second, func() error {
		if cnt.count("control_flood") != 1 || len(cnt.connErrors()) != 1 {
			return errors.New("control_flood not counted")
		}
		return nil
	})
}

// TestEmptyDataFlood: DATA frames without payload or END_STREAM, many
// in a row, end the connection (CVE-2019-9518).
func TestEmptyDataFlood(t *testing.T) {
	ts := newTestServer(t, Config{}, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
	}))
	rc := newRawClient(t, ts.addr)
	rc.headers(1, false, rc.block("POST", "/"))
	for range maxEmptyData + 1 {
		if err := rc.fr.WriteData(1, false, nil); err != nil {
			t.Fatal(err)
		}
	}
	if code := rc.closed(10 * time.Second); code != http2.ErrCodeEnhanceYourCalm {
		t.Fatalf("GOAWAY %v, want ENHANCE_YOUR_CALM", code)
	}
}

// TestShutdown: a stream in flight completes; a stream opened after the
// GOAWAY is not served; then the connection closes.
func TestShutdown(t *testing.T) {
	started := make(chan struct{}, 2)
	release := make(chan struct{})
	ts := newTestServer(t, Config{}, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		started <- struct{}{}
		<-release
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
		g, ok := f.(*http2.GoAwayFrame)
		if ok && (g.ErrCode != http2.ErrCodeNo || g.LastStreamID != 1) {
			t.Fatalf("GOAWAY %v last %d, want NO_ERROR last 1", g.ErrCode, g.LastStreamID)
		}
		return ok
	})
	rc.headers(3, true, rc.block("GET", "/"))
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
	if len(started) != 0 {
		t.Fatal("the stream opened after GOAWAY was served")
	}
	if n := ts.srv.Open(); n != 0 {
		t.Fatalf("Open() = %d after Shutdown", n)
	}
}

// TestTimeouts: a silent client is dropped after PrefaceTimeout, an
// idle one after IdleTimeout with GOAWAY NO_ERROR.
func TestTimeouts(t *testing.T) {
	var cnt counters
	ts := newTestServer(t, cnt.config(Config{IdleTimeout: 100 * time.Millisecond, PrefaceTimeout: 100 * time.Millisecond}), http.NotFoundHandler())
	rc := newRawClient(t, ts.addr)
	if code := rc.closed(10 * time.Second); code != http2.ErrCodeNo {
		t.Fatalf("idle: GOAWAY %v, want NO_ERROR", code)
	}
	if n := len(cnt.connErrors()); n != 0 {
		t.Fatalf("idle close reported %d connection errors", n)
	}
	nc, err := tlsDial(ts.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	_ = nc.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.ReadAll(nc); err != nil && !errors.Is(err, io.EOF) {
		var ne interface{ Timeout() bool }
		if errors.As(err, &ne) && ne.Timeout() {
			t.Fatal("silent client still connected")
		}
	}
	testutil.Eventually(t, 5*time.Second, func() error {
		if len(cnt.connErrors()) != 1 || cnt.count("preface") != 1 {
			return errors.New("preface timeout not reported")
		}
		return nil
	})
}

// TestClosedUnusedIsNoError: a client that closes a connection before
// it sent anything (a browser's spare connection), with an end of
// stream or a reset, is neither a protocol nor a connection error; one
// that closes halfway through its preface is both.
func TestClosedUnusedIsNoError(t *testing.T) {
	var cnt counters
	ts := newTestServer(t, cnt.config(Config{}), http.NotFoundHandler())
	served := func(n int) {
		t.Helper()
		testutil.Eventually(t, 10*time.Second, func() error {
			if got := ts.srv.Open(); got != n {
				return fmt.Errorf("Open() = %d, want %d", got, n)
			}
			return nil
		})
	}
	closes := []struct {
		name  string
		close func(*tls.Conn) error
	}{
		{"close_notify", func(c *tls.Conn) error { return c.Close() }},
		{"reset", func(c *tls.Conn) error {
			tc := c.NetConn().(*net.TCPConn)
			if err := tc.SetLinger(0); err != nil {
				return err
			}
			return tc.Close()
		}},
	}
	for _, cl := range closes {
		nc, err := tlsDial(ts.addr)
		if err != nil {
			t.Fatal(err)
		}
		served(1)
		if err := cl.close(nc); err != nil {
			t.Fatalf("%s: %v", cl.name, err)
		}
		served(0)
		if kinds, conns := cnt.all(); len(kinds) != 0 || len(conns) != 0 {
			t.Fatalf("%s before the preface counted: %v, %v", cl.name, kinds, conns)
		}
	}
	nc, err := tlsDial(ts.addr)
	if err != nil {
		t.Fatal(err)
	}
	served(1)
	if _, err := nc.Write([]byte(clientPreface[:10])); err != nil {
		t.Fatal(err)
	}
	// Half closed, not closed: a close with the server's SETTINGS unread
	// would be a reset, which may overtake the ten bytes.
	if err := nc.CloseWrite(); err != nil {
		t.Fatal(err)
	}
	served(0)
	_ = nc.Close()
	testutil.Eventually(t, 5*time.Second, func() error {
		if len(cnt.connErrors()) != 1 || cnt.count("preface") != 1 {
			kinds, conns := cnt.all()
			return fmt.Errorf("half a preface counted %v, %v; want one preface error", kinds, conns)
		}
		return nil
	})
}

// TestZeroWindowUpdateFlood: WINDOW_UPDATEs of zero on a stream, each a
// stream error, end the connection past a bound (CVE-2019-9518).
func TestZeroWindowUpdateFlood(t *testing.T) {
	var cnt counters
	ts := newTestServer(t, cnt.config(Config{}), http.NotFoundHandler())
	rc := newRawClient(t, ts.addr)
	rc.fr.AllowIllegalWrites = true
	var batch bytes.Buffer
	fr := http2.NewFramer(&batch, nil)
	fr.AllowIllegalWrites = true
	for range maxStreamErrors + 1 {
		_ = fr.WriteWindowUpdate(1, 0)
	}
	rc.headers(1, false, rc.block("POST", "/"))
	if _, err := rc.nc.Write(batch.Bytes()); err != nil {
		t.Fatal(err)
	}
	if code := rc.closed(10 * time.Second); code != http2.ErrCodeEnhanceYourCalm {
		t.Fatalf("GOAWAY %v, want ENHANCE_YOUR_CALM", code)
	}
	if n := cnt.count("stream_error_flood"); n != 1 {
		t.Fatalf("stream_error_flood counted %d, want 1", n)
	}
}

// TestMalformedRequestFlood: requests the server refuses itself
// (here a connection-specific field), each reset with PROTOCOL_ERROR,
// end the connection past the bound the Framer's stream errors have
// (CVE-2019-9514), though the client reads every reset.
func TestMalformedRequestFlood(t *testing.T) {
	var cnt counters
	ts := newTestServer(t, cnt.config(Config{}), http.NotFoundHandler())
	rc := newRawClient(t, ts.addr)
	block := rc.block("GET", "/", "connection", "close")
	var batch bytes.Buffer
	fr := http2.NewFramer(&batch, nil)
	for i := range maxStreamErrors + 1 {
		_ = fr.WriteHeaders(http2.HeadersFrameParam{StreamID: uint32(2*i + 1), BlockFragment: block, EndStream: true, EndHeaders: true})
	}
	// Answered only if the server reads on after the flood.
	_ = fr.WritePing(false, [8]byte{})
	if _, err := rc.nc.Write(batch.Bytes()); err != nil {
		t.Fatal(err)
	}
	code := http2.ErrCode(1 << 31)
	rc.next(10*time.Second, func(f http2.Frame, err error) bool {
		switch f := f.(type) {
		case *http2.GoAwayFrame:
			code = f.ErrCode
			return true
		case *http2.PingFrame:
			return f.IsAck()
		}
		return err != nil
	})
	if code != http2.ErrCodeEnhanceYourCalm {
		t.Fatalf("GOAWAY %v after %d malformed requests, want ENHANCE_YOUR_CALM", code, maxStreamErrors+1)
	}
	if n := cnt.count("stream_error_flood"); n != 1 {
		t.Fatalf("stream_error_flood counted %d, want 1", n)
	}
}

// TestShutdownDeadline: streams still running when Shutdown's context
// ends are cut: the connection closes, their contexts end.
func TestShutdownDeadline(t *testing.T) {
	started := make(chan struct{}, 1)
	ts := newTestServer(t, Config{}, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		started <- struct{}{}
		<-r.Context().Done()
	}))
	rc := newRawClient(t, ts.addr)
	rc.headers(1, true, rc.block("GET", "/"))
	<-started
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if err := ts.srv.Shutdown(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Shutdown = %v, want context.DeadlineExceeded", err)
	}
	rc.closed(10 * time.Second)
	testutil.Eventually(t, 10*time.Second, func() error {
		if n := ts.srv.Open(); n != 0 {
			return fmt.Errorf("Open() = %d", n)
		}
		return nil
	})
}

// TestShutdownBeforePreface: a connection Shutdown finds before its
// client's preface is closed, and not reported as a client's error.
func TestShutdownBeforePreface(t *testing.T) {
	var cnt counters
	ts := newTestServer(t, cnt.config(Config{}), http.NotFoundHandler())
	nc, err := tlsDial(ts.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	testutil.Eventually(t, 10*time.Second, func() error {
		if ts.srv.Open() != 1 {
			return errors.New("connection not served yet")
		}
		return nil
	})
	if err := ts.srv.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	if kinds, conns := cnt.all(); len(kinds) != 0 || len(conns) != 0 {
		t.Fatalf("Shutdown counted as the client's error: %v %v", kinds, conns)
	}
}

// TestInadequateTLS: over TLS 1.2, a cipher suite RFC 9113 prohibits
// ends the connection with INADEQUATE_SECURITY; an AEAD one is served.
func TestInadequateTLS(t *testing.T) {
	var cnt counters
	ts := newTestServer(t, cnt.config(Config{}), http.NotFoundHandler())
	for _, tc := range []struct {
		suite uint16
		ok    bool
	}{
		{tls.TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256, true},
		{tls.TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256, true},
		{tls.TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA, false},
	} {
		t.Run(tls.CipherSuiteName(tc.suite), func(t *testing.T) {
			conf := clientTLS()
			conf.MaxVersion = tls.VersionTLS12
			conf.CipherSuites = []uint16{tc.suite}
			nc, err := tls.Dial("tcp", ts.addr, conf)
			if err != nil {
				t.Fatal(err)
			}
			defer nc.Close()
			rc := &rawClient{t: t, nc: nc, fr: http2.NewFramer(nc, nc)}
			rc.fr.ReadMetaHeaders = hpack.NewDecoder(4096, nil)
			rc.enc = hpack.NewEncoder(&rc.hbuf)
			_, _ = io.WriteString(nc, clientPreface)
			_ = rc.fr.WriteSettings()
			if !tc.ok {
				if code := rc.closed(10 * time.Second); code != http2.ErrCodeInadequateSecurity {
					t.Fatalf("GOAWAY %v, want INADEQUATE_SECURITY", code)
				}
				return
			}
			rc.headers(1, true, rc.block("GET", "/"))
			if status, _, _ := rc.response(1, 10*time.Second); status != "404" {
				t.Fatalf("status %s, want 404", status)
			}
		})
	}
	if n := cnt.count("inadequate_security"); n != 1 {
		t.Fatalf("inadequate_security counted %d, want 1", n)
	}
}
