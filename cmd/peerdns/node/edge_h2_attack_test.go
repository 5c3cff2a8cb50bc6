package node

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/quic-go/quic-go"
	"github.com/quic-go/quic-go/http3"
	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"

	"peerdns/http/proxy"
	"peerdns/internal/testutil"
)

// rawH2 is an HTTP/2 connection driven frame by frame, as an attacker
// would: TLS with ALPN h2 to the edge, the preface and settings sent.
type rawH2 struct {
	c   *tls.Conn
	fr  *http2.Framer
	enc *hpack.Encoder
	buf bytes.Buffer
	// noAck: until leaves settings unacknowledged (another goroutine
	// writes frames; a Framer takes one writer at a time).
	noAck bool
}

func dialRawH2(t *testing.T, n *Node, sni string, settings ...http2.Setting) *rawH2 {
	t.Helper()
	_, httpsAddr := n.EdgeAddrs()
	c, err := tls.Dial("tcp", httpsAddr, &tls.Config{RootCAs: rootPool(t, n), ServerName: sni, NextProtos: []string{"h2"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if p := c.ConnectionState().NegotiatedProtocol; p != "h2" {
		t.Fatalf("ALPN: %q, want h2", p)
	}
	r := &rawH2{c: c, fr: http2.NewFramer(c, c)}
	r.enc = hpack.NewEncoder(&r.buf)
	if _, err := io.WriteString(c, http2.ClientPreface); err != nil {
		t.Fatal(err)
	}
	if err := r.fr.WriteSettings(settings...); err != nil {
		t.Fatal(err)
	}
	return r
}

// block encodes a GET's head for host and path, with extra fields.
func (r *rawH2) block(host, path string, extra ...string) []byte {
	return r.head("GET", host, path, extra...)
}

// head encodes a request head: method, host and path, with extra fields.
func (r *rawH2) head(method, host, path string, extra ...string) []byte {
	r.buf.Reset()
	for _, f := range [][2]string{{":method", method}, {":scheme", "https"}, {":authority", host}, {":path", path}} {
		_ = r.enc.WriteField(hpack.HeaderField{Name: f[0], Value: f[1]})
	}
	for i := 0; i+1 < len(extra); i += 2 {
		_ = r.enc.WriteField(hpack.HeaderField{Name: extra[i], Value: extra[i+1]})
	}
	return append([]byte(nil), r.buf.Bytes()...)
}

// until reads frames (acknowledging settings) until match says so, the
// connection ends, or d passes; it returns the last frame read and the
// read error.
func (r *rawH2) until(d time.Duration, match func(http2.Frame) bool) (http2.Frame, error) {
	_ = r.c.SetReadDeadline(time.Now().Add(d))
	defer r.c.SetReadDeadline(time.Time{})
	for {
		f, err := r.fr.ReadFrame()
		if err != nil {
			return nil, err
		}
		if s, ok := f.(*http2.SettingsFrame); ok && !s.IsAck() && !r.noAck {
			_ = r.fr.WriteSettingsAck()
		}
		if match(f) {
			return f, nil
		}
	}
}

// h2Status decodes a response HEADERS frame's :status.
func h2Status(f http2.Frame) string {
	h, ok := f.(*http2.HeadersFrame)
	if !ok {
		return ""
	}
	fs, _ := hpack.NewDecoder(4096, nil).DecodeFull(h.HeaderBlockFragment())
	for _, f := range fs {
		if f.Name == ":status" {
			return f.Value
		}
	}
	return ""
}

// The HTTP/2 attacks against the edge, each bounded, and the edge
// serving other clients afterwards: a frame the protocol forbids (GOAWAY
// PROTOCOL_ERROR, counted), an oversized header list (431, counted as
// an answer), a CONTINUATION flood (the connection is closed, counted),
// rapid reset (the streams taken are counted 499; no more than
// MaxH2Streams requests at the upstream at once from one connection,
// over HTTP/3 too, where a reset stream's credit comes back at once,
// give or take the ends still on their way: see bounded), and a client
// that holds the flow-control window shut
// (its stream is reset after WriteTimeout and counted; the
// connection's other streams and other clients go on), a client that
// reads nothing at all (its connection is closed after WriteTimeout),
// an upload whose body never comes (408 after ReadTimeout),
// over HTTP/2 and over HTTP/3 (a stream window too small for the answer, never read:
// reset, counted, and the client's read ends in an error); the counts
// are in /metrics.
func TestEdgeHTTP2Attacks(t *testing.T) {
	cfg := testConfig(t.TempDir())
	cfg.edgeWriteTimeout = time.Second
	cfg.edgeUpstreamTimeout = 3 * time.Second
	cfg.edgeReadTimeout = time.Second
	n := startConfig(t, cfg)
	var now, most, uploads atomic.Int64
	back := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/slow":
			c := now.Add(1)
			for {
				m := most.Load()
				if c <= m || most.CompareAndSwap(m, c) {
					break
				}
			}
			<-r.Context().Done()
			now.Add(-1)
		case "/upload":
			uploads.Add(1)
			_, _ = io.Copy(io.Discard, r.Body)
			uploads.Add(-1)
		case "/big":
			w.Header().Set("Content-Length", fmt.Sprint(8<<20))
			_, _ = io.Copy(w, io.LimitReader(zeros{}, 8<<20))
		default:
			fmt.Fprint(w, "ok")
		}
	})}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = back.Serve(ln) }()
	t.Cleanup(func() { back.Close() })
	_, url := tunnelServerURL(t, n, fmt.Sprintf(`{"name":"site","port":%d}`, ln.Addr().(*net.TCPAddr).Port))
	mustJSON(t, "POST", "http://"+n.AdminAddr()+"/api/add-domain", `{"domain":"site.p2p","hash":"`+url+`"}`, 200, nil)
	_, httpsAddr := n.EdgeAddrs()
	good := h2Client(httpsAddr, rootPool(t, n))
	served := func(what string) {
		t.Helper()
		testutil.Eventually(t, 10*time.Second, func() error {
			resp, err := good.Get("https://site.p2p/")
			if err != nil {
				return err
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 200 || string(b) != "ok" || resp.ProtoMajor != 2 {
				return fmt.Errorf("%s %d %q", resp.Proto, resp.StatusCode, b)
			}
			return nil
		})
		t.Logf("edge serves after %s", what)
	}
	served("setup")
	edge := n.edge.Load()

	t.Run("a client that reads nothing", func(t *testing.T) {
		before := edge.Counters().H2Conns
		// First, while the only other HTTP/2 connection is good's.
		// Windows wide open: only the socket holds the answers back.
		r := dialRawH2(t, n, "site.p2p", http2.Setting{ID: http2.SettingInitialWindowSize, Val: 1<<31 - 1})
		if err := r.fr.WriteWindowUpdate(0, 1<<31-1-65535); err != nil {
			t.Fatal(err)
		}
		for id := uint32(1); id <= 7; id += 2 {
			if err := r.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: r.block("site.p2p", "/big"), EndStream: true, EndHeaders: true}); err != nil {
				t.Fatal(err)
			}
		}
		testutil.Eventually(t, 5*time.Second, func() error {
			if c := edge.Counters().H2Conns; c <= before {
				return fmt.Errorf("HTTP/2 connections open: %d, %d before", c, before)
			}
			return nil
		})
		start := time.Now()
		// 32 MiB asked, nothing read: the edge closes the connection
		// once it could write nothing for WriteTimeout.
		testutil.Eventually(t, 15*time.Second, func() error {
			if c := edge.Counters().H2Conns; c > before {
				return fmt.Errorf("HTTP/2 connections open: %d, %d before the client that reads nothing", c, before)
			}
			return nil
		})
		t.Logf("connection of a client that reads nothing closed after %v", time.Since(start).Round(time.Millisecond))
		served("a client that reads nothing")
	})

	t.Run("an upload that never comes", func(t *testing.T) {
		// Past SmallBody, or of unknown length: the body streams to the
		// upstream (ReverseProxy), which waits for it. The upstream
		// connection's timeout does not end the exchange (net/http's
		// Transport waits for its write of the body to end first): the
		// body's own ReadTimeout between reads does, 408.
		for i, cl := range []string{"1048576", ""} {
			r := dialRawH2(t, n, "site.p2p")
			var extra []string
			if cl != "" {
				extra = []string{"content-length", cl}
			}
			if err := r.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: r.head("POST", "site.p2p", "/upload", extra...), EndHeaders: true}); err != nil {
				t.Fatal(err)
			}
			start := time.Now()
			f, err := r.until(15*time.Second, func(f http2.Frame) bool {
				_, h := f.(*http2.HeadersFrame)
				_, rs := f.(*http2.RSTStreamFrame)
				return h || rs
			})
			if err != nil {
				t.Fatalf("upload %d that never came: no answer or reset in 15 s: %v", i, err)
			}
			if h2Status(f) != "408" {
				t.Fatalf("upload %d that never came (content-length %q): %v status %q, want 408", i, cl, f, h2Status(f))
			}
			t.Logf("upload %d that never came (content-length %q): 408 after %v", i, cl, time.Since(start).Round(time.Millisecond))
		}
		// The upstream's side of each ended too.
		testutil.Eventually(t, 10*time.Second, func() error {
			if u := uploads.Load(); u != 0 {
				return fmt.Errorf("%d uploads still at the upstream", u)
			}
			return nil
		})
	})

	t.Run("a forbidden frame", func(t *testing.T) {
		before := edge.Counters().H2Errors
		r := dialRawH2(t, n, "site.p2p")
		// A WINDOW_UPDATE of zero on the connection: a connection
		// error (RFC 9113 §6.9), GOAWAY PROTOCOL_ERROR.
		r.fr.AllowIllegalWrites = true
		if err := r.fr.WriteWindowUpdate(0, 0); err != nil {
			t.Fatal(err)
		}
		f, err := r.until(5*time.Second, func(f http2.Frame) bool { _, g := f.(*http2.GoAwayFrame); return g })
		if g, ok := f.(*http2.GoAwayFrame); err != nil || !ok || g.ErrCode != http2.ErrCodeProtocol {
			t.Fatalf("WINDOW_UPDATE of zero: %v %v, want GOAWAY PROTOCOL_ERROR", f, err)
		}
		if e := edge.Counters().H2Errors; e <= before {
			t.Fatalf("H2Errors %d, was %d", e, before)
		}
		served("a forbidden frame")
	})

	t.Run("oversized header list", func(t *testing.T) {
		refused := routeCount(edge, proxy.RouteNone, 431)
		r := dialRawH2(t, n, "site.p2p")
		// Fields of 1 KiB, 4 KiB more than the limit in all.
		var fields []string
		for i := 0; i < proxy.MaxHeaderBytes/1024+4; i++ {
			fields = append(fields, fmt.Sprintf("x-big-%d", i), strings.Repeat("a", 1024))
		}
		// In frames of 8 KiB (under the 16 KiB frame size limit).
		blk := r.block("site.p2p", "/", fields...)
		if err := r.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: blk[:8192], EndStream: true}); err != nil {
			t.Fatal(err)
		}
		for blk = blk[8192:]; len(blk) > 0; {
			k := min(len(blk), 8192)
			if err := r.fr.WriteContinuation(1, k == len(blk), blk[:k]); err != nil {
				t.Fatal(err)
			}
			blk = blk[k:]
		}
		f, err := r.until(5*time.Second, func(f http2.Frame) bool {
			_, h := f.(*http2.HeadersFrame)
			_, g := f.(*http2.GoAwayFrame)
			return h || g
		})
		if err != nil || h2Status(f) != "431" {
			if g, ok := f.(*http2.GoAwayFrame); ok {
				t.Logf("GOAWAY %v %q", g.ErrCode, g.DebugData())
			}
			t.Fatalf("oversized header list: %v %v (status %q), want 431", f, err, h2Status(f))
		}
		testutil.Eventually(t, 5*time.Second, func() error {
			if c := routeCount(edge, proxy.RouteNone, 431); c != refused+1 {
				return fmt.Errorf("431s counted under route none: %d, was %d", c, refused)
			}
			return nil
		})
		served("an oversized header list")
	})

	t.Run("HTTP/3 oversized header list", func(t *testing.T) {
		refused := routeCount(edge, proxy.RouteNone, 431)
		tr := &http3.Transport{TLSClientConfig: &tls.Config{RootCAs: rootPool(t, n), ServerName: "site.p2p", NextProtos: []string{http3.NextProtoH3}}}
		t.Cleanup(func() { tr.Close() })
		req, _ := http.NewRequest("GET", "https://"+httpsAddr+"/", nil)
		req.Host = "site.p2p"
		for i := 0; i < proxy.MaxHeaderBytes/1024+4; i++ {
			req.Header.Set(fmt.Sprintf("x-big-%d", i), strings.Repeat("a", 1024))
		}
		resp, err := tr.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 431 {
			t.Fatalf("oversized header list over HTTP/3: %d, want 431", resp.StatusCode)
		}
		if c := routeCount(edge, proxy.RouteNone, 431); c != refused+1 {
			t.Fatalf("431s counted under route none: %d, was %d", c, refused)
		}
	})

	t.Run("CONTINUATION flood", func(t *testing.T) {
		before := edge.Counters().H2ConnErrors
		r := dialRawH2(t, n, "site.p2p")
		r.noAck = true
		if err := r.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: r.block("site.p2p", "/"), EndStream: true}); err != nil {
			t.Fatal(err)
		}
		// Endless CONTINUATION frames, each one more 1 KiB field,
		// never END_HEADERS: the edge must close the connection
		// (it would otherwise buffer or decode without end).
		done := make(chan error, 1)
		field := r.block("site.p2p", "/", "x-flood", strings.Repeat("b", 1000))
		go func() {
			for i := 0; i < 100000; i++ {
				if err := r.fr.WriteContinuation(1, false, field); err != nil {
					done <- nil
					return
				}
			}
			done <- errors.New("100,000 CONTINUATION frames (100 MB of header) were all taken")
		}()
		_, rerr := r.until(10*time.Second, func(f http2.Frame) bool { _, g := f.(*http2.GoAwayFrame); return g })
		r.c.Close()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		if ne, ok := rerr.(net.Error); ok && ne.Timeout() {
			t.Fatal("the edge neither sent GOAWAY nor closed the connection within 10 s")
		}
		testutil.Eventually(t, 5*time.Second, func() error {
			if c := edge.Counters().H2ConnErrors; c <= before {
				return fmt.Errorf("HTTP/2 connection errors %d, was %d", c, before)
			}
			return nil
		})
		served("a CONTINUATION flood")
	})

	// bounded: the upstream never had more than limit reset requests at
	// once from one connection, give or take teardownLag, and has none
	// left. The edge holds limit exactly (its slots); the upstream counts
	// a request until its own server sees it end, which comes after the
	// edge let go of it: the reset crosses the tunnel, the far node's
	// pipe resets its connection to the upstream, and the upstream's
	// handler is woken on its own time. Meanwhile the slot the edge gave
	// back may have sent a new request ahead of that end (12 such in one
	// loaded CI run).
	bounded := func(t *testing.T, limit int64) {
		t.Helper()
		teardownLag := limit / 2
		if m := most.Load(); m > limit+teardownLag {
			t.Fatalf("the upstream had %d requests at once from one connection, limit %d (and %d ends on their way)", m, limit, teardownLag)
		}
		testutil.Eventually(t, 10*time.Second, func() error {
			if c := now.Load(); c != 0 {
				return fmt.Errorf("%d reset requests still at the upstream", c)
			}
			return nil
		})
	}

	t.Run("rapid reset", func(t *testing.T) {
		cancelled := routeCount(edge, proxy.RouteTunnel, 499)
		r := dialRawH2(t, n, "site.p2p")
		blk := r.block("site.p2p", "/slow")
		var err error
		for id := uint32(1); id < 2*2000 && err == nil; id += 2 {
			err = r.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: blk, EndStream: true, EndHeaders: true})
			if err == nil {
				err = r.fr.WriteRSTStream(id, http2.ErrCodeCancel)
			}
		}
		// What matters is that the upstream never saw more than the
		// stream limit, however many streams were opened and reset.
		bounded(t, proxy.MaxH2Streams)
		// The streams the edge took and their client reset are counted
		// as nginx logs them: 499, client closed request.
		testutil.Eventually(t, 10*time.Second, func() error {
			if c := routeCount(edge, proxy.RouteTunnel, 499); c <= cancelled {
				return fmt.Errorf("499s counted: %d, was %d", c, cancelled)
			}
			return nil
		})
		t.Logf("rapid reset: at most %d at the upstream at once, write error %v, %d counted 499", most.Load(), err, routeCount(edge, proxy.RouteTunnel, 499)-cancelled)
		served("rapid reset")
	})

	t.Run("HTTP/3 rapid reset", func(t *testing.T) {
		most.Store(0)
		cancelled := routeCount(edge, proxy.RouteTunnel, 499)
		tr := &http3.Transport{TLSClientConfig: &tls.Config{RootCAs: rootPool(t, n), ServerName: "site.p2p", NextProtos: []string{http3.NextProtoH3}}}
		t.Cleanup(func() { tr.Close() })
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		qc, err := quic.DialAddr(ctx, httpsAddr, tr.TLSClientConfig, nil)
		if err != nil {
			t.Fatal(err)
		}
		cc := tr.NewClientConn(qc)
		req, _ := http.NewRequest("GET", "https://site.p2p/slow", nil)
		// Each stream: a request, then reset both ways at once. QUIC
		// gives the stream's credit back as soon as it is closed, so
		// the client may open streams far faster than the upstream
		// could answer them.
		opened := 0
		for ; opened < 2000; opened++ {
			rs, err := cc.OpenRequestStream(ctx)
			if err != nil {
				break
			}
			if err := rs.SendRequestHeader(req); err != nil {
				break
			}
			rs.CancelWrite(quic.StreamErrorCode(http3.ErrCodeRequestCanceled))
			rs.CancelRead(quic.StreamErrorCode(http3.ErrCodeRequestCanceled))
		}
		// QUIC gives a reset stream's credit back at once, before its
		// handler has seen the reset and let go of its upstream request;
		// the connection's upstream slots hold the bound all the same.
		bounded(t, proxy.MaxH2Streams)
		// Not asserted: a stream reset before quic-go has read its
		// request never reaches the edge, and under load that can be
		// every one of them.
		t.Logf("HTTP/3 rapid reset: %d streams opened and reset, at most %d at the upstream at once, %d counted 499", opened, most.Load(), routeCount(edge, proxy.RouteTunnel, 499)-cancelled)
		served("HTTP/3 rapid reset")
	})

	t.Run("flow-control window held", func(t *testing.T) {
		before := edge.Counters().H2Stalled
		// A window of zero: the edge may send no DATA at all.
		r := dialRawH2(t, n, "site.p2p", http2.Setting{ID: http2.SettingInitialWindowSize, Val: 0})
		if err := r.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: r.block("site.p2p", "/big"), EndStream: true, EndHeaders: true}); err != nil {
			t.Fatal(err)
		}
		// Another stream on the same connection is answered meanwhile
		// (its head; its body is held by the same window).
		if err := r.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 3, BlockFragment: r.block("site.p2p", "/"), EndStream: true, EndHeaders: true}); err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		f, err := r.until(15*time.Second, func(f http2.Frame) bool {
			rs, ok := f.(*http2.RSTStreamFrame)
			return ok && rs.StreamID == 1
		})
		if err != nil {
			t.Fatalf("held stream not reset: %v", err)
		}
		t.Logf("held stream reset after %v: %v", time.Since(start).Round(time.Millisecond), f)
		testutil.Eventually(t, 5*time.Second, func() error {
			if s := edge.Counters().H2Stalled; s <= before {
				return fmt.Errorf("H2Stalled %d, was %d", s, before)
			}
			return nil
		})
		served("a held window")
	})

	t.Run("HTTP/3 flow-control window held", func(t *testing.T) {
		before := edge.Counters().H2Stalled
		// 16 KiB of stream window, never read: the rest of the 8 MiB
		// answer cannot be sent.
		c := h3Client(t, httpsAddr, rootPool(t, n), &quic.Config{InitialStreamReceiveWindow: 16 << 10, MaxStreamReceiveWindow: 16 << 10})
		resp, err := c.Get("https://site.p2p/big")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if resp.StatusCode != 200 || resp.ProtoMajor != 3 {
			t.Fatalf("%s %d", resp.Proto, resp.StatusCode)
		}
		testutil.Eventually(t, 15*time.Second, func() error {
			if s := edge.Counters().H2Stalled; s <= before {
				return fmt.Errorf("H2Stalled %d, was %d", s, before)
			}
			return nil
		})
		// The stream was reset: what the client reads now ends in an
		// error, not in a short body taken for a whole one.
		got, err := io.Copy(io.Discard, resp.Body)
		if err == nil {
			t.Fatalf("read %d bytes of a held answer and a clean end, want a reset", got)
		}
		t.Logf("held HTTP/3 stream: %d bytes, then %v", got, err)
		h3 := h3Client(t, httpsAddr, rootPool(t, n), nil)
		resp, err = h3.Get("https://site.p2p/")
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || string(b) != "ok" || resp.ProtoMajor != 3 {
			t.Fatalf("after a held HTTP/3 stream: %s %d %q", resp.Proto, resp.StatusCode, b)
		}
		served("a held HTTP/3 window")
	})

	// What the edge counted, an operator reads in /metrics.
	cn := edge.Counters()
	if cn.H2Stalled < 2 || cn.H2Errors < 1 || cn.H2ConnErrors < 1 {
		t.Fatalf("counted %d stalled streams, %d HTTP/2 protocol errors and %d connection errors, want at least 2, 1 and 1", cn.H2Stalled, cn.H2Errors, cn.H2ConnErrors)
	}
	_, _, body := scrape(t, "http://"+n.AdminAddr(), "")
	for _, want := range []string{
		fmt.Sprintf("peerdns_edge_streams_stalled_total %d\n", cn.H2Stalled),
		fmt.Sprintf("peerdns_edge_http2_protocol_errors_total %d\n", cn.H2Errors),
		fmt.Sprintf("peerdns_edge_http2_connection_errors_total %d\n", cn.H2ConnErrors),
		fmt.Sprintf("peerdns_edge_http3_retries_total %d\n", cn.H3Retries),
		fmt.Sprintf("peerdns_edge_http3_stuck_closed_total %d\n", cn.H3Stuck),
		`peerdns_edge_multiplexed_connections{protocol="h2"} `,
		`peerdns_edge_multiplexed_connections{protocol="h3"} `,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
}

// routeCount is what edge counted of answers with status on route r.
func routeCount(edge *proxy.Server, r proxy.Route, status int) int64 {
	for _, rs := range edge.Metrics().Requests {
		if rs.Route == r && rs.Status == status {
			return rs.Count
		}
	}
	return 0
}

// A request whose body never comes is not held for longer than an
// HTTP/1.1 connection would hold it (ReadTimeout), on every route that
// reads a body whole before it answers: a name the node does not serve
// (its body is read before the 404), and the in-process routes (the
// admin API, bridged to its fasthttp handler). Otherwise each such
// stream would keep its handler waiting for good, and the connection
// with it (a connection with a stream open is not idle).
func TestEdgeHTTP2BodyNeverSent(t *testing.T) {
	cfg := testConfig(t.TempDir())
	cfg.edgeReadTimeout = 300 * time.Millisecond
	n := startConfig(t, cfg)
	for _, tc := range []struct{ name, sni, host, path string }{
		{"unserved name", "admin.p2p", "nobody.p2p", "/"},
		{"admin API", "admin.p2p", "admin.p2p", "/api/add-domain"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := dialRawH2(t, n, tc.sni)
			// The head, then nothing: no DATA, no END_STREAM.
			if err := r.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: r.head("POST", tc.host, tc.path, "content-length", "100"), EndHeaders: true}); err != nil {
				t.Fatal(err)
			}
			start := time.Now()
			f, err := r.until(10*time.Second, func(f http2.Frame) bool {
				_, h := f.(*http2.HeadersFrame)
				_, rs := f.(*http2.RSTStreamFrame)
				_, g := f.(*http2.GoAwayFrame)
				return h || rs || g
			})
			if err != nil {
				t.Fatalf("a stream whose body never came got no answer, reset or GOAWAY in 10 s: %v", err)
			}
			if h2Status(f) != "408" {
				t.Fatalf("a stream whose body never came: %v (status %q), want 408", f, h2Status(f))
			}
			t.Logf("%s after %v", h2Status(f), time.Since(start).Round(time.Millisecond))
		})
		// The same over HTTP/3 (quic-go's client, SNI as above): the
		// body is a pipe nothing is ever written to.
		t.Run(tc.name+" over HTTP/3", func(t *testing.T) {
			_, httpsAddr := n.EdgeAddrs()
			pr, pw := io.Pipe()
			defer pw.Close()
			req, _ := http.NewRequest("POST", "https://"+tc.host+tc.path, pr)
			req.ContentLength = 100
			start := time.Now()
			tr := &http3.Transport{
				TLSClientConfig: &tls.Config{RootCAs: rootPool(t, n), ServerName: tc.sni},
				Dial: func(ctx context.Context, _ string, tc *tls.Config, qc *quic.Config) (*quic.Conn, error) {
					return quic.DialAddrEarly(ctx, httpsAddr, tc, qc)
				},
			}
			defer tr.Close()
			resp, err := tr.RoundTrip(req)
			if err != nil {
				t.Fatalf("a request whose body never came: %v", err)
			}
			resp.Body.Close()
			if resp.ProtoMajor != 3 || resp.StatusCode != http.StatusRequestTimeout {
				t.Fatalf("a request whose body never came: %s %d, want HTTP/3 408", resp.Proto, resp.StatusCode)
			}
			t.Logf("%d after %v", resp.StatusCode, time.Since(start).Round(time.Millisecond))
		})
	}
}
