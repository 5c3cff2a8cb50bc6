package proxy

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"peerdns/internal/testutil"
	"peerdns/internal/view"
)

// scriptedUpstream answers each request with the raw bytes answers
// gives for its path (nil: the connection closes); a path with "cut" in
// it sends (part of) its answer and closes, as does an answer in HTTP/1.0
// (but one that says Connection: keep-alive) or with Connection: close
// after it. conns counts the connections it
// accepted.
func scriptedUpstream(t *testing.T, answers map[string]string) (addr string, conns *atomic.Int64) {
	t.Helper()
	conns = new(atomic.Int64)
	up := testutil.ServeTCP(t, func(c net.Conn) {
		conns.Add(1)
		testutil.ReadRequests(c, func(req *http.Request) bool {
			_, _ = io.Copy(io.Discard, req.Body)
			a, ok := answers[req.URL.Path]
			if !ok {
				return false
			}
			if _, err := io.WriteString(c, a); err != nil {
				return false
			}
			return !(strings.Contains(a, "Connection: close") || strings.HasPrefix(a, "HTTP/1.0") && !strings.Contains(a, "keep-alive") || strings.Contains(req.URL.Path, "cut"))
		})
	})
	return up.String(), conns
}

// TestPoolAnswers: answers of every shape pass through the HTTP/1.1
// pool as they came (small ones read whole, long ones and those of
// unknown length streamed, a chunked one's trailer read past), and the
// upstream connection serves the next request after each answer that
// ended cleanly; one cut short of its length reaches the client cut, and
// its connection is not used again.
func TestPoolAnswers(t *testing.T) {
	long := strings.Repeat("0123456789", 1000) // over wholeBody
	addr, conns := scriptedUpstream(t, map[string]string{
		"/small":   "HTTP/1.1 200 OK\r\nContent-Length: 5\r\nX-Up: small\r\n\r\nhello",
		"/long":    fmt.Sprintf("HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s", len(long), long),
		"/empty":   "HTTP/1.1 204 No Content\r\n\r\n",
		"/chunked": "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nTrailer: X-Sum\r\n\r\n5\r\nhello\r\n6\r\n world\r\n0\r\nX-Sum: 11\r\n\r\n",
		"/head":    fmt.Sprintf("HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n", len(long)),
		"/cut":     fmt.Sprintf("HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s", len(long), long[:6000]),
		"/close":   "HTTP/1.1 200 OK\r\nConnection: close\r\n\r\nuntil the end",
	})
	s := New(Deps{HTTPAddr: "127.0.0.1:0", HTTPSAddr: "127.0.0.1:0", AdminDomain: "admin.p2p",
		View: publishedView(map[string]string{"pool.p2p": "hs://pool"}), Dialer: tcpDialer{"hs://pool": addr}})
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Shutdown)
	edge, _ := s.Addrs()
	tr := &http.Transport{MaxIdleConnsPerHost: 1}
	t.Cleanup(tr.CloseIdleConnections)
	c := &http.Client{Transport: tr, Timeout: 10 * time.Second}
	get := func(method, path string) (*http.Response, string, error) {
		t.Helper()
		req, _ := http.NewRequest(method, "http://"+edge.String()+path, nil)
		req.Host = "pool.p2p"
		resp, err := c.Do(req)
		if err != nil {
			t.Fatalf("%s %s: %v", method, path, err)
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		return resp, string(b), err
	}
	mustGet := func(method, path string) (*http.Response, string) {
		t.Helper()
		resp, body, err := get(method, path)
		if err != nil {
			t.Fatalf("%s %s: body: %v", method, path, err)
		}
		return resp, body
	}
	wantConns := func(n int64, after string) {
		t.Helper()
		if got := conns.Load(); got != n {
			t.Fatalf("after %s: %d upstream connections, want %d", after, got, n)
		}
	}

	for range 3 {
		resp, body := mustGet("GET", "/small")
		if body != "hello" || resp.Header.Get("X-Up") != "small" || resp.ContentLength != 5 {
			t.Fatalf("/small: %q, X-Up %q, length %d", body, resp.Header.Get("X-Up"), resp.ContentLength)
		}
	}
	wantConns(1, "three small answers")
	for range 2 {
		if resp, body := mustGet("GET", "/long"); body != long || resp.ContentLength != int64(len(long)) {
			t.Fatalf("/long: %d bytes (length %d), want %d", len(body), resp.ContentLength, len(long))
		}
	}
	if resp, body := mustGet("GET", "/empty"); resp.StatusCode != 204 || body != "" {
		t.Fatalf("/empty: %d %q", resp.StatusCode, body)
	}
	resp, body := mustGet("GET", "/chunked")
	if body != "hello world" || len(resp.Trailer) != 0 {
		t.Fatalf("/chunked: %q, trailer %v (read past, not passed)", body, resp.Trailer)
	}
	if resp, body := mustGet("HEAD", "/head"); body != "" || resp.ContentLength != int64(len(long)) {
		t.Fatalf("HEAD /head: %q, length %d", body, resp.ContentLength)
	}
	wantConns(1, "long, empty, chunked and HEAD answers")

	if _, body, err := get("GET", "/cut"); err == nil {
		t.Fatalf("/cut read whole (%d bytes), want an error", len(body))
	}
	if _, body := mustGet("GET", "/small"); body != "hello" {
		t.Fatalf("/small after /cut: %q", body)
	}
	wantConns(2, "a cut answer")
	if _, body := mustGet("GET", "/close"); body != "until the end" {
		t.Fatalf("/close: %q", body)
	}
	if _, body := mustGet("GET", "/small"); body != "hello" {
		t.Fatalf("/small after /close: %q", body)
	}
	wantConns(3, "an answer that ends with its connection")
}

// publishedView is a naming view with the given domains resolved to
// their hashes.
func publishedView(domains map[string]string) *view.Published {
	snap := &view.Snapshot{Version: 1, Domains: map[string]*view.Domain{}}
	for name, hash := range domains {
		snap.Domains[name] = &view.Domain{Name: name, Status: "resolved", Hash: hash}
	}
	var pub view.Published
	pub.Store(snap)
	return &pub
}

// TestPoolAbandonedBody: a streamed answer whose reader stops before its
// end (a client gone mid-download) closes its upstream connection, which
// still holds the rest of the body: the next exchange, one that is not
// retried (POST), gets a connection of its own and its own answer.
func TestPoolAbandonedBody(t *testing.T) {
	long := strings.Repeat("0123456789", 1000)
	addr, conns := scriptedUpstream(t, map[string]string{
		"/long":  fmt.Sprintf("HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s", len(long), long),
		"/small": "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello",
	})
	hc := &fasthttp.HostClient{Addr: addr, Transport: poolTransport{}}
	req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
	defer fasthttp.ReleaseRequest(req)
	defer fasthttp.ReleaseResponse(resp)
	req.SetRequestURI("http://" + addr + "/long")
	if err := hc.Do(req, resp); err != nil {
		t.Fatal(err)
	}
	if !resp.IsBodyStream() {
		t.Fatalf("an answer of %d bytes was not streamed", len(long))
	}
	if _, err := io.ReadFull(resp.BodyStream(), make([]byte, 100)); err != nil {
		t.Fatal(err)
	}
	if err := resp.CloseBodyStream(); err != nil {
		t.Fatal(err)
	}
	req.Reset()
	req.SetRequestURI("http://" + addr + "/small")
	req.Header.SetMethod("POST")
	req.SetBodyString("x")
	if err := hc.Do(req, resp); err != nil {
		t.Fatalf("POST after an abandoned body: %v", err)
	}
	if string(resp.Body()) != "hello" || conns.Load() != 2 {
		t.Fatalf("POST after an abandoned body: %q over %d upstream connections, want hello over 2", resp.Body(), conns.Load())
	}
}

// hsConn is a connection that names its far end as a tunnel stream does
// (network "hs").
type hsConn struct{ net.Conn }

func (hsConn) RemoteAddr() net.Addr { return hsAddr{} }

type hsAddr struct{}

func (hsAddr) Network() string { return "hs" }
func (hsAddr) String() string  { return "test" }

// TestPoolReadsWhole: a declared body longer than wholeBody streams from
// a TCP upstream and is read whole from a tunnel stream (up to
// wholeStream); either way it arrives whole, and one over wholeStream
// streams from both. The exchanges with the TCP upstream are counted as
// local (Server.LocalExchanges), those over a stream are not.
func TestPoolReadsWhole(t *testing.T) {
	mid, huge := strings.Repeat("m", wholeBody+1), strings.Repeat("h", wholeStream+1)
	addr, _ := scriptedUpstream(t, map[string]string{
		"/mid":  fmt.Sprintf("HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s", len(mid), mid),
		"/huge": fmt.Sprintf("HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s", len(huge), huge),
	})
	for _, stream := range []bool{false, true} {
		var local atomic.Int64
		hc := &fasthttp.HostClient{Addr: addr, Transport: poolTransport{local: &local}, Dial: func(a string) (net.Conn, error) {
			c, err := net.Dial("tcp", a)
			if err != nil || !stream {
				return c, err
			}
			return hsConn{c}, nil
		}}
		for path, body := range map[string]string{"/mid": mid, "/huge": huge} {
			req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
			req.SetRequestURI("http://" + addr + path)
			if err := hc.Do(req, resp); err != nil {
				t.Fatal(err)
			}
			wantStream := path == "/huge" || !stream
			if resp.IsBodyStream() != wantStream {
				t.Errorf("stream upstream %v, %s: streamed %v, want %v", stream, path, resp.IsBodyStream(), wantStream)
			}
			var got []byte
			if resp.IsBodyStream() {
				got, _ = io.ReadAll(resp.BodyStream())
			} else {
				got = resp.Body()
			}
			if string(got) != body {
				t.Errorf("stream upstream %v, %s: %d bytes, want %d", stream, path, len(got), len(body))
			}
			fasthttp.ReleaseResponse(resp)
			fasthttp.ReleaseRequest(req)
		}
		if n, want := local.Load(), map[bool]int64{false: 2, true: 0}[stream]; n != want {
			t.Errorf("stream upstream %v: %d local exchanges counted, want %d", stream, n, want)
		}
	}
}

// An upstream that sends more than its answer (here a second, forged
// answer right after the body) has its connection closed, not reused:
// the next request, over HTTP/1.1 and HTTP/2, gets its own answer from a
// fresh connection, not the forged one.
func TestPoolClosesAfterExtraBytes(t *testing.T) {
	addr, conns := scriptedUpstream(t, map[string]string{
		"/extra": "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhelloHTTP/1.1 200 OK\r\nContent-Length: 6\r\n\r\nforged",
		"/small": "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok",
	})
	e := newTestH2Edge(t, map[string]string{"x.p2p": addr}, Deps{})
	httpAddr, _ := e.s.Addrs()
	get1 := func(path string) string {
		t.Helper()
		code, _, body := answer(t, sendRaw(t, httpAddr.String(), "GET "+path+" HTTP/1.1\r\nHost: x.p2p\r\n\r\n"))
		if code != 200 {
			t.Fatalf("HTTP/1.1 %s: %d %q", path, code, body)
		}
		return body
	}
	get2 := func(path string) string {
		t.Helper()
		_, body := e.do(t, "GET", "https://x.p2p"+path, nil, 0)
		return body
	}
	for _, p := range []struct {
		name string
		get  func(string) string
	}{{"HTTP/1.1", get1}, {"HTTP/2", get2}} {
		if body := p.get("/extra"); body != "hello" {
			t.Fatalf("%s /extra: %q", p.name, body)
		}
		before := conns.Load()
		if body := p.get("/small"); body != "ok" {
			t.Fatalf("%s /small after /extra: %q, want the upstream's own answer", p.name, body)
		}
		if n := conns.Load() - before; n != 1 {
			t.Fatalf("%s: /small after /extra dialed %d connections, want 1 (the one that sent more not reused)", p.name, n)
		}
	}
}

// An answer whose head was read and refused (more fields than
// maxAnswerFields, a 101 to a request that asked no upgrade, a status
// below 100) on a kept connection is the upstream's answer, not bytes
// left over from an earlier exchange: the request is not asked again on
// another connection (the upstream had it once), and the client gets a
// 502.
func TestPoolAsksOnceForARefusedHead(t *testing.T) {
	var many strings.Builder
	for i := range maxAnswerFields + 1 {
		fmt.Fprintf(&many, "X-F%d: v\r\n", i)
	}
	addr, conns := scriptedUpstream(t, map[string]string{
		"/small":  "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok",
		"/many":   "HTTP/1.1 200 OK\r\n" + many.String() + "Content-Length: 2\r\n\r\nok",
		"/switch": "HTTP/1.1 101 Switching Protocols\r\nUpgrade: h2c\r\nConnection: Upgrade\r\n\r\n",
		"/low":    "HTTP/1.1 099 Low\r\nContent-Length: 2\r\n\r\nok",
	})
	get := poolGet(t, addr)
	for _, path := range []string{"/many", "/switch", "/low"} {
		if st, body := get("/small"); st != 200 || body != "ok" { // a kept connection for the next
			t.Fatalf("/small: %d %q", st, body)
		}
		before := conns.Load()
		if st, _ := get(path); st != 502 {
			t.Fatalf("%s: %d, want 502", path, st)
		}
		if n := conns.Load() - before; n != 0 {
			t.Fatalf("%s: asked again on %d more connections, want none", path, n)
		}
	}
}
