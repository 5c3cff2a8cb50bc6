package proxy

import (
	"bytes"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/quic-go/quic-go"
	"github.com/quic-go/quic-go/http3"
	"github.com/valyala/bytebufferpool"

	"peerdns/internal/certs"
	"peerdns/internal/testutil"
	"peerdns/internal/view"
	"peerdns/messages"
)

// tcpDialer reaches a hash's server over plain TCP, as the tunnel
// actor's dialer does for a server on this node.
type tcpDialer map[string]string

func (d tcpDialer) Dial(ctx context.Context, hash string) (net.Conn, error) {
	addr, ok := d[hash]
	if !ok {
		return nil, fmt.Errorf("no tunnel server for %s", hash)
	}
	return (&net.Dialer{}).DialContext(ctx, "tcp", addr)
}

// h2Edge is an edge with HTTPS (and HTTP/2) in front of the given
// upstreams (domain → address), and an HTTP/2 client of it.
type h2Edge struct {
	s      *Server
	c      *http.Client
	mu     sync.Mutex
	access []string
}

func newTestH2Edge(t testing.TB, upstreams map[string]string, d Deps) *h2Edge {
	t.Helper()
	d.NoHTTP3 = true
	return startTestEdge(t, upstreams, d)
}

// startTestEdge is newTestH2Edge with HTTP/3 as d asks (on by default);
// d.Dialer, when set, is used instead of a tcpDialer of upstreams.
func startTestEdge(t testing.TB, upstreams map[string]string, d Deps) *h2Edge {
	t.Helper()
	ca, err := certs.Open(t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	snap := &view.Snapshot{Version: 1, Domains: map[string]*view.Domain{}}
	dial := tcpDialer{}
	for name, addr := range upstreams {
		hash := "hs://" + strings.TrimSuffix(name, ".p2p")
		snap.Domains[name] = &view.Domain{Name: name, Status: "resolved", Hash: hash}
		dial[hash] = addr
	}
	var pub view.Published
	pub.Store(snap)
	e := &h2Edge{}
	d.HTTPAddr, d.HTTPSAddr, d.AdminDomain = "127.0.0.1:0", "127.0.0.1:0", "admin.p2p"
	d.View, d.CA = &pub, ca
	if d.Dialer == nil {
		d.Dialer = dial
	}
	d.AccessBatch = func(b *messages.LogBatch) {
		defer b.Release()
		e.mu.Lock()
		defer e.mu.Unlock()
		for _, l := range b.Lines() {
			e.access = append(e.access, l.Message)
		}
	}
	e.s = New(d)
	if err := e.s.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.s.Shutdown)
	_, httpsAddr := e.s.Addrs()
	var p http.Protocols
	p.SetHTTP2(true)
	tr := &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "tcp", httpsAddr.String())
		},
		TLSClientConfig: &tls.Config{RootCAs: ca.Pool()},
		Protocols:       &p,
	}
	t.Cleanup(tr.CloseIdleConnections)
	e.c = &http.Client{Timeout: 10 * time.Second, Transport: tr}
	return e
}

// h3 is an HTTP/3 client of e's HTTPS port that asks for serverName,
// closed when the test ends.
func (e *h2Edge) h3(t testing.TB, serverName string) *http3.Transport {
	_, httpsAddr := e.s.Addrs()
	tr := &http3.Transport{
		TLSClientConfig: &tls.Config{RootCAs: e.s.d.CA.Pool(), ServerName: serverName},
		Dial: func(ctx context.Context, _ string, tc *tls.Config, qc *quic.Config) (*quic.Conn, error) {
			return quic.DialAddrEarly(ctx, httpsAddr.String(), tc, qc)
		},
	}
	t.Cleanup(func() { tr.Close() })
	return tr
}

// do sends one request and reads its answer whole.
func (e *h2Edge) do(t *testing.T, method, url string, body io.Reader, n int64, hdr ...string) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, body)
	if err != nil {
		t.Fatal(err)
	}
	req.ContentLength = n
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := e.c.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s: body: %v", method, url, err)
	}
	if resp.ProtoMajor != 2 {
		t.Fatalf("%s %s: answered in %s, want HTTP/2", method, url, resp.Proto)
	}
	return resp, string(b)
}

// http1Upstream serves HTTP/1.1 only: /echo describes the request it
// got, /big is 64 KiB with its length, /small 100 bytes, /chunked comes
// in pieces of unknown length, /slow answers only once the edge has
// given up, /count counts a body.
func http1Upstream(t *testing.T) (addr string, big []byte) {
	t.Helper()
	big = make([]byte, 64<<10)
	for i := range big {
		big[i] = byte(i * 7)
	}
	addr = serveUpstream(t, false, func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/echo":
			b, err := io.ReadAll(r.Body)
			fmt.Fprintf(w, "%s %s %s host=%s xff=%s proto=%s fhost=%s cl=%d body=%q err=%v", r.Proto, r.Method, r.RequestURI, r.Host,
				r.Header.Get("X-Forwarded-For"), r.Header.Get("X-Forwarded-Proto"), r.Header.Get("X-Forwarded-Host"), r.ContentLength, b, err)
		case "/big":
			w.Header().Set("Content-Length", strconv.Itoa(len(big)))
			_, _ = w.Write(big)
		case "/small":
			w.Header().Set("Content-Type", "text/plain")
			_, _ = w.Write(big[:100])
		case "/headers":
			h := w.Header()
			h["Set-Cookie"] = []string{"a=1; Path=/", "b=2; Path=/x"}
			h["X-Custom-Thing"] = []string{"one", "two"}
			h["X-Hop-Only"] = []string{"1"}
			h["Connection"] = []string{"X-Hop-Only"} // hop-by-hop, and so is what it names: not passed
			h["Vary"] = []string{"Accept"}
			h["Alt-Svc"] = []string{"h2=\":8443\""}
			h["Content-Type"] = []string{"text/plain"}
			_, _ = io.WriteString(w, "headers")
		case "/chunked":
			for i := range 3 {
				fmt.Fprintf(w, "piece%d;", i)
				w.(http.Flusher).Flush()
			}
		case "/slow":
			select {
			case <-r.Context().Done():
			case <-time.After(10 * time.Second):
			}
		case "/count":
			n, err := io.Copy(io.Discard, r.Body)
			fmt.Fprintf(w, "%d %v", n, err)
		default:
			http.NotFound(w, r)
		}
	})
	return addr, big
}

// serveUpstream serves h on a loopback port, in HTTP/1.1 (and h2c when
// h2c is set), until the test ends, and returns its address.
func serveUpstream(t testing.TB, h2c bool, h http.HandlerFunc) string {
	t.Helper()
	var p http.Protocols
	p.SetHTTP1(true)
	p.SetUnencryptedHTTP2(h2c)
	hs := &http.Server{Protocols: &p, Handler: h}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = hs.Serve(ln) }()
	t.Cleanup(func() { _ = hs.Close() })
	return ln.Addr().String()
}

// TestEdgeHTTP2ThroughHTTP1Pool: HTTP/2 requests to an HTTP/1.1
// upstream go through the HTTP/1.1 keep-alive pool (no net/http
// transport is made for them) and arrive as the HTTP/1.1 edge sends
// them; answers keep their length, big ones pass whole, HEAD has its
// length and no body, a down upstream is 502, a slow one 504, and each
// request is counted and logged once.
func TestEdgeHTTP2ThroughHTTP1Pool(t *testing.T) {
	up, big := http1Upstream(t)
	e := newTestH2Edge(t, map[string]string{"h1.p2p": up, "down.p2p": testutil.FreeTCPAddr(t)}, Deps{UpstreamTimeout: 500 * time.Millisecond})
	requests := 0

	t.Run("forwarding headers", func(t *testing.T) {
		requests++
		resp, body := e.do(t, "GET", "https://h1.p2p/echo?q=1", nil, 0, "X-Forwarded-For", "203.0.113.9")
		want := `HTTP/1.1 GET /echo?q=1 host=h1.p2p xff=203.0.113.9, 127.0.0.1 proto=https fhost=h1.p2p cl=0 body="" err=<nil>`
		if resp.StatusCode != 200 || body != want {
			t.Fatalf("GET /echo: %d %q, want %q", resp.StatusCode, body, want)
		}
		if resp.ContentLength != int64(len(want)) {
			t.Fatalf("GET /echo: Content-Length %d, want %d", resp.ContentLength, len(want))
		}
	})
	t.Run("small answer keeps its length and type", func(t *testing.T) {
		requests++
		resp, body := e.do(t, "GET", "https://h1.p2p/small", nil, 0)
		if resp.StatusCode != 200 || body != string(big[:100]) || resp.ContentLength != 100 || resp.Header.Get("Content-Type") != "text/plain" {
			t.Fatalf("GET /small: %d, %d bytes, Content-Length %d, Content-Type %q", resp.StatusCode, len(body), resp.ContentLength, resp.Header.Get("Content-Type"))
		}
	})
	t.Run("answer headers", func(t *testing.T) {
		requests++
		resp, body := e.do(t, "GET", "https://h1.p2p/headers", nil, 0)
		h := resp.Header
		if resp.StatusCode != 200 || body != "headers" || resp.ContentLength != 7 {
			t.Fatalf("GET /headers: %d %q, Content-Length %d", resp.StatusCode, body, resp.ContentLength)
		}
		for k, want := range map[string][]string{
			"Set-Cookie":     {"a=1; Path=/", "b=2; Path=/x"},
			"X-Custom-Thing": {"one", "two"},
			"Vary":           {"Accept"},
			"Content-Type":   {"text/plain"},
			"Connection":     nil,
			"X-Hop-Only":     nil,
		} {
			if got := h[k]; strings.Join(got, "|") != strings.Join(want, "|") {
				t.Errorf("%s: %q, want %q", k, got, want)
			}
		}
	})
	t.Run("64 KiB", func(t *testing.T) {
		requests++
		resp, body := e.do(t, "GET", "https://h1.p2p/big", nil, 0)
		if resp.StatusCode != 200 || body != string(big) || resp.ContentLength != int64(len(big)) {
			t.Fatalf("GET /big: %d, %d bytes (same: %v), Content-Length %d", resp.StatusCode, len(body), body == string(big), resp.ContentLength)
		}
	})
	t.Run("unknown length in pieces", func(t *testing.T) {
		requests++
		resp, body := e.do(t, "GET", "https://h1.p2p/chunked", nil, 0)
		if resp.StatusCode != 200 || body != "piece0;piece1;piece2;" || resp.ContentLength != -1 {
			t.Fatalf("GET /chunked: %d %q, Content-Length %d", resp.StatusCode, body, resp.ContentLength)
		}
	})
	t.Run("HEAD", func(t *testing.T) {
		requests++
		resp, body := e.do(t, "HEAD", "https://h1.p2p/big", nil, 0)
		if resp.StatusCode != 200 || body != "" || resp.ContentLength != int64(len(big)) {
			t.Fatalf("HEAD /big: %d %q, Content-Length %d", resp.StatusCode, body, resp.ContentLength)
		}
	})
	t.Run("small POST body", func(t *testing.T) {
		requests++
		resp, body := e.do(t, "POST", "https://h1.p2p/echo", strings.NewReader("a=1&b=2"), 7, "Content-Type", "application/x-www-form-urlencoded")
		want := `HTTP/1.1 POST /echo host=h1.p2p xff=127.0.0.1 proto=https fhost=h1.p2p cl=7 body="a=1&b=2" err=<nil>`
		if resp.StatusCode != 200 || body != want {
			t.Fatalf("POST /echo: %d %q, want %q", resp.StatusCode, body, want)
		}
	})
	t.Run("GET with a body of unknown length", func(t *testing.T) {
		requests++
		resp, body := e.do(t, "GET", "https://h1.p2p/echo", io.NopCloser(strings.NewReader("abc")), -1)
		want := `HTTP/1.1 GET /echo host=h1.p2p xff=127.0.0.1 proto=https fhost=h1.p2p cl=3 body="abc" err=<nil>`
		if resp.StatusCode != 200 || body != want {
			t.Fatalf("GET /echo with a body: %d %q, want %q", resp.StatusCode, body, want)
		}
	})
	if _, ok := e.s.h2clients.Load("hs://h1"); ok {
		t.Fatal("a net/http transport was made for requests the HTTP/1.1 pool serves")
	}
	if _, ok := e.s.clients.Load("hs://h1"); !ok {
		t.Fatal("the HTTP/1.1 pool has no client for the upstream")
	}
	t.Run("GET with a body of unknown length over the read-ahead", func(t *testing.T) {
		// Past prefetched bytes it streams through net/http's transport,
		// what was read ahead first.
		requests++
		long := strings.Repeat("0123456789", prefetched/10+10)
		resp, body := e.do(t, "GET", "https://h1.p2p/echo", io.NopCloser(strings.NewReader(long)), -1)
		if resp.StatusCode != 200 || !strings.Contains(body, fmt.Sprintf("body=%q err=<nil>", long)) {
			t.Fatalf("GET /echo with a long body: %d, %d bytes back", resp.StatusCode, len(body))
		}
	})
	t.Run("upstream down", func(t *testing.T) {
		requests++
		resp, body := e.do(t, "GET", "https://down.p2p/x", nil, 0)
		if resp.StatusCode != 502 || !strings.Contains(body, "Bad Gateway") {
			t.Fatalf("down upstream: %d %q, want 502", resp.StatusCode, body)
		}
	})
	t.Run("upstream slow", func(t *testing.T) {
		requests++
		resp, body := e.do(t, "GET", "https://h1.p2p/slow", nil, 0)
		if resp.StatusCode != 504 || !strings.Contains(body, "Gateway Timeout") {
			t.Fatalf("slow upstream: %d %q, want 504", resp.StatusCode, body)
		}
	})
	t.Run("large upload streams", func(t *testing.T) {
		requests++
		n := int64(SmallBody + 1)
		resp, body := e.do(t, "POST", "https://h1.p2p/count", bytes.NewReader(make([]byte, n)), n)
		if resp.StatusCode != 200 || body != fmt.Sprintf("%d <nil>", n) {
			t.Fatalf("POST of %d bytes: %d %q", n, resp.StatusCode, body)
		}
		if _, ok := e.s.h2clients.Load("hs://h1"); !ok {
			t.Fatal("an upload over SmallBody did not stream through ReverseProxy")
		}
	})

	t.Run("large upload keeps the forwarding headers", func(t *testing.T) {
		requests++
		n := int64(SmallBody + 1)
		resp, body := e.do(t, "POST", "https://h1.p2p/echo", bytes.NewReader(bytes.Repeat([]byte("a"), int(n))), n)
		if want := "HTTP/1.1 POST /echo host=h1.p2p xff=127.0.0.1 proto=https fhost=h1.p2p cl=" + strconv.Itoa(int(n)); resp.StatusCode != 200 || !strings.HasPrefix(body, want) {
			t.Fatalf("POST of %d bytes through ReverseProxy: %d %.120q, want %q...", n, resp.StatusCode, body, want)
		}
	})

	testutil.Eventually(t, 5*time.Second, func() error {
		e.mu.Lock()
		defer e.mu.Unlock()
		if len(e.access) != requests {
			return fmt.Errorf("%d access lines for %d requests: %q", len(e.access), requests, e.access)
		}
		return nil
	})
	if c := e.s.Counters(); c.Total != int64(requests) || c.Failed != 2 {
		t.Fatalf("counters %+v, want %d requests, 2 failed", c, requests)
	}
	var tunnel int64
	for _, rs := range e.s.Metrics().Requests {
		if rs.Route == RouteTunnel {
			tunnel += rs.Count
		}
	}
	if tunnel != int64(requests) {
		t.Fatalf("route metrics count %d tunnel requests, want %d", tunnel, requests)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, l := range e.access {
		if strings.Contains(l, "path=/big") && strings.Contains(l, "method=GET") && !strings.Contains(l, "bytes=65536") {
			t.Fatalf("access line of GET /big: %q", l)
		}
	}
}

// TestEdgeHTTP2GRPCStaysH2C: a gRPC request to a plain claim still goes
// to its upstream in h2c through ReverseProxy, while any other request
// to the same upstream goes through the HTTP/1.1 pool.
func TestEdgeHTTP2GRPCStaysH2C(t *testing.T) {
	up := serveUpstream(t, true, func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", r.Header.Get("Content-Type"))
		fmt.Fprintf(w, "%s", r.Proto)
	})
	e := newTestH2Edge(t, map[string]string{"g.p2p": up}, Deps{})

	if resp, body := e.do(t, "GET", "https://g.p2p/plain", nil, 0); resp.StatusCode != 200 || body != "HTTP/1.1" {
		t.Fatalf("plain request: %d %q, want HTTP/1.1 upstream", resp.StatusCode, body)
	}
	frame := []byte{0, 0, 0, 0, 2, 'h', 'i'} // one uncompressed gRPC message
	resp, body := e.do(t, "POST", "https://g.p2p/edge.Echo/Unary", bytes.NewReader(frame), int64(len(frame)),
		"Content-Type", "application/grpc", "Te", "trailers")
	if resp.StatusCode != 200 || body != "HTTP/2.0" {
		t.Fatalf("gRPC request: %d %q, want an h2c upstream", resp.StatusCode, body)
	}
	if _, ok := e.s.h2clients.Load("hs://g"); !ok {
		t.Fatal("the gRPC request did not go through ReverseProxy")
	}
}

// TestEdgeHTTP2ResetEndsUpstreamExchange: a stream the client abandons
// ends its exchange with the upstream at once (its connection closes),
// not when UpstreamTimeout runs out.
func TestEdgeHTTP2ResetEndsUpstreamExchange(t *testing.T) {
	started, ended := make(chan struct{}, 1), make(chan struct{}, 1)
	up := serveUpstream(t, false, func(w http.ResponseWriter, r *http.Request) {
		started <- struct{}{}
		select {
		case <-r.Context().Done():
			ended <- struct{}{}
		case <-time.After(20 * time.Second):
		}
	})
	e := newTestH2Edge(t, map[string]string{"hold.p2p": up}, Deps{})

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", "https://hold.p2p/", nil)
	done := make(chan error, 1)
	go func() {
		resp, err := e.c.Do(req)
		if err == nil {
			resp.Body.Close()
		}
		done <- err
	}()
	select {
	case <-started:
	case <-time.After(10 * time.Second):
		t.Fatal("the request did not reach the upstream")
	}
	cancel() // the client resets the stream
	select {
	case <-ended:
	case <-time.After(5 * time.Second):
		t.Fatal("the upstream exchange went on after the client reset its stream")
	}
	if err := <-done; err == nil {
		t.Fatal("a cancelled request got an answer")
	}
	if _, ok := e.s.h2clients.Load("hs://hold"); ok {
		t.Fatal("the request went through ReverseProxy, not the HTTP/1.1 pool")
	}
}

// TestEdgeHTTP2WholeAndCut: over HTTP/2, a declared body up to
// wholeStream (read whole, written with its head) and one over it
// (streamed) arrive whole; one the upstream cuts short of its declared
// length is answered 502 when it was to be read whole (nothing of it
// had gone), as is a chunked one that ends after its head or does not
// begin with a chunk (over HTTP/1.1 too), and resets the stream when it was streamed (the client
// must not take it for whole); the next request is answered.
func TestEdgeHTTP2WholeAndCut(t *testing.T) {
	mid, huge := strings.Repeat("m", 10000), strings.Repeat("h", wholeStream+1)
	addr, _ := scriptedUpstream(t, map[string]string{
		"/mid":      fmt.Sprintf("HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s", len(mid), mid),
		"/huge":     fmt.Sprintf("HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s", len(huge), huge),
		"/cut":      fmt.Sprintf("HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s", len(mid), mid[:6000]),
		"/cut0":     fmt.Sprintf("HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n", len(mid)),
		"/hugecut":  fmt.Sprintf("HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s", len(huge), huge[:wholeStream/2]),
		"/chunkcut": "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n",
		"/nochunk":  "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n<html>",
		"/small":    "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello",
	})
	e := newTestH2Edge(t, map[string]string{"cut.p2p": addr}, Deps{})
	for path, want := range map[string]string{"/mid": mid, "/huge": huge} {
		if _, body := e.do(t, "GET", "https://cut.p2p"+path, nil, 0); body != want {
			t.Fatalf("%s: %d bytes, want %d", path, len(body), len(want))
		}
	}
	for path, why := range map[string]string{"/cut": "cut after", "/cut0": "cut after", "/chunkcut": "ended after its head", "/nochunk": "does not begin with a chunk"} {
		if resp, body := e.do(t, "GET", "https://cut.p2p"+path, nil, 0); resp.StatusCode != http.StatusBadGateway || !strings.Contains(body, why) {
			t.Fatalf("%s: %d %q, want 502 saying %q", path, resp.StatusCode, body, why)
		}
	}
	httpAddr, _ := e.s.Addrs()
	for path, why := range map[string]string{"/chunkcut": "ended after its head", "/nochunk": "does not begin with a chunk"} {
		if code, _, body := answer(t, sendRaw(t, httpAddr.String(), "GET "+path+" HTTP/1.1\r\nHost: cut.p2p\r\n\r\n")); code != http.StatusBadGateway || !strings.Contains(body, why) {
			t.Fatalf("HTTP/1.1 %s: %d %q, want 502 saying %q", path, code, body, why)
		}
	}
	req, _ := http.NewRequest("GET", "https://cut.p2p/hugecut", nil)
	resp, err := e.c.Do(req)
	if err == nil {
		b, rerr := io.ReadAll(resp.Body)
		resp.Body.Close()
		if rerr == nil {
			t.Fatalf("/hugecut read as whole: %d bytes of %d declared", len(b), len(huge))
		}
	}
	if _, body := e.do(t, "GET", "https://cut.p2p/small", nil, 0); body != "hello" {
		t.Fatalf("/small after /cut: %q", body)
	}
}

// An empty body of unknown length (every HTTP/3 GET) is read without
// allocating: the read-ahead buffer is readAhead's, and the request's
// buffer, fresh from bytebufferpool, is not grown.
func TestReadSmallEmptyUnknownLengthAllocatesNothing(t *testing.T) {
	s := &Server{}
	w := &h2Writer{rc: *http.NewResponseController(deadlineRecorder{httptest.NewRecorder()})}
	r := httptest.NewRequest("GET", "https://h1.p2p/", nil)
	r.ContentLength = -1
	b := &bytebufferpool.ByteBuffer{}
	allocs := testing.AllocsPerRun(200, func() {
		r.Body, b.B = http.NoBody, nil // a buffer fresh from the pool
		if err := s.readSmall(w, r, b); err != nil || len(b.B) != 0 {
			t.Fatalf("readSmall: %v, %d bytes", err, len(b.B))
		}
	})
	if allocs != 0 {
		t.Fatalf("%v allocations a read of an empty body, want 0", allocs)
	}
}

// deadlineRecorder is a ResponseRecorder that takes read deadlines, as
// the HTTP/2 and HTTP/3 servers' writers do.
type deadlineRecorder struct{ *httptest.ResponseRecorder }

func (deadlineRecorder) SetReadDeadline(time.Time) error { return nil }
