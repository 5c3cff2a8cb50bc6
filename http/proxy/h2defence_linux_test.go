package proxy

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"peerdns/http/admin"
)

// TestH2IdleUpstreamSpeaksUnasked: over HTTP/2 as over HTTP/1.1, an
// upstream that sends a second, unasked answer on a keep-alive
// connection the edge holds idle does not have it taken for the answer
// to the next request sent there: the connection is closed unused, and
// the next request goes on a new one.
func TestH2IdleUpstreamSpeaksUnasked(t *testing.T) {
	const unasked = "HTTP/1.1 200 OK\r\nContent-Length: 8\r\n\r\nunasked!"
	answered, sent := make(chan struct{}), make(chan struct{})
	addr, conns := idleUpstream(t, func(c net.Conn) {
		<-answered
		if _, err := io.WriteString(c, unasked); err != nil {
			t.Error(err)
		}
		delivered(t, c)
		close(sent)
	})
	e := newTestH2Edge(t, map[string]string{"idle.p2p": addr}, Deps{})
	url := "https://idle.p2p"
	if resp, body := e.do(t, "GET", url+"/first", nil, 0); resp.StatusCode != 200 || body != "answer to /first" {
		t.Fatalf("first: %d %q", resp.StatusCode, body)
	}
	close(answered)
	<-sent
	if resp, body := e.do(t, "GET", url+"/second", nil, 0); resp.StatusCode != 200 || body != "answer to /second" {
		t.Fatalf("second: %d %q, want 200 %q", resp.StatusCode, body, "answer to /second")
	}
	if n := conns.Load(); n != 2 {
		t.Errorf("%d upstream connections, want 2 (the one that spoke unasked closed)", n)
	}
}

// TestH2UpstreamDeclaresBothLengths: over HTTP/2 as over HTTP/1.1, an
// upstream answer with both Content-Length and Transfer-Encoding, or in
// HTTP/1.0 with a Content-Length and a Transfer-Encoding, is a 502,
// asked once, its connection not used again.
func TestH2UpstreamDeclaresBothLengths(t *testing.T) {
	addr, conns := scriptedUpstream(t, map[string]string{
		"/sized": "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello",
		"/cl-te": "HTTP/1.1 200 OK\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n",
		"/old":   "HTTP/1.0 200 OK\r\nConnection: keep-alive\r\nTransfer-Encoding: chunked\r\nContent-Length: 3\r\n\r\n5\r\nhello\r\n0\r\n\r\n",
	})
	e := newTestH2Edge(t, map[string]string{"pool.p2p": addr}, Deps{})
	url := "https://pool.p2p"
	for _, p := range []string{"/cl-te", "/old"} {
		if resp, body := e.do(t, "GET", url+"/sized", nil, 0); resp.StatusCode != 200 || body != "hello" {
			t.Fatalf("before %s: %d %q", p, resp.StatusCode, body)
		}
		n := conns.Load()
		if resp, body := e.do(t, "GET", url+p, nil, 0); resp.StatusCode != 502 || !strings.Contains(body, "Content-Length and Transfer-Encoding") {
			t.Fatalf("%s: %d %q, want 502", p, resp.StatusCode, body)
		}
		if got := conns.Load(); got != n {
			t.Fatalf("%s: asked on %d new connections, want none", p, got-n)
		}
		if resp, body := e.do(t, "GET", url+"/sized", nil, 0); resp.StatusCode != 200 || body != "hello" {
			t.Fatalf("after %s: %d %q", p, resp.StatusCode, body)
		}
		if got := conns.Load(); got != n+1 {
			t.Fatalf("after %s: %d new upstream connections, want 1", p, got-n)
		}
	}
}

// TestH2Expect: "Expect: 100-continue" from an HTTP/2 client (RFC 9113
// §8.1 lets it) is answered as over HTTP/1.1: no 100 Continue before
// the 404 for a host not served here or the 413 for a body declared
// over the admin API's limit; 100 Continue for a body the edge takes,
// and the Expect not passed upstream, on the pooled path and on the
// streamed one alike.
func TestH2Expect(t *testing.T) {
	e := newTestH2Edge(t, map[string]string{"echo.p2p": echoUpstream(t)}, Deps{Admin: func(ctx *fasthttp.RequestCtx) { ctx.SetBodyString("admin") }})
	send := func(host string, body io.Reader, n int64) (int, string, bool) {
		t.Helper()
		var got100 atomic.Bool
		ctx := httptrace.WithClientTrace(context.Background(), &httptrace.ClientTrace{Got100Continue: func() { got100.Store(true) }})
		req, err := http.NewRequestWithContext(ctx, "POST", "https://"+host+"/a", body)
		if err != nil {
			t.Fatal(err)
		}
		req.ContentLength = n
		if host == "nowhere.p2p" { // no certificate for it: asked of echo.p2p's
			req.URL.Host, req.Host = "echo.p2p", host
		}
		req.Header.Set("Expect", "100-continue")
		resp, err := e.c.Do(req)
		if err != nil {
			t.Fatalf("%s: %v", host, err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b), got100.Load()
	}
	if st, _, got100 := send("nowhere.p2p", strings.NewReader("hello"), 5); st != 404 || got100 {
		t.Errorf("unknown host: %d, 100 Continue %v; want 404 without", st, got100)
	}
	if st, _, got100 := send("admin.p2p", io.LimitReader(zeros{}, admin.MaxBody+1), admin.MaxBody+1); st != 413 || got100 {
		t.Errorf("admin over its limit: %d, 100 Continue %v; want 413 without", st, got100)
	}
	if st, body, got100 := send("echo.p2p", strings.NewReader("hello"), 5); st != 200 || !got100 || body != `expect=[] body="hello"` {
		t.Errorf("pooled: %d %q, 100 Continue %v; want 200 after 100, no Expect upstream", st, body, got100)
	}
	big := strings.Repeat("b", SmallBody+1) // streamed (ReverseProxy)
	if st, body, got100 := send("echo.p2p", strings.NewReader(big), int64(len(big))); st != 200 || !got100 || !strings.HasPrefix(body, `expect=[] body="bbb`) {
		t.Errorf("streamed: %d %.40q, 100 Continue %v; want 200 after 100, no Expect upstream", st, body, got100)
	}
}

// zeros reads as endless zero bytes.
type zeros struct{}

func (zeros) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}

// TestH3Expect: "Expect: 100-continue" from an HTTP/3 client gets 100
// Continue once the edge will read the body (quic-go sends none of its
// own), on the pooled path, the streamed one and the admin API, and the
// Expect is not passed upstream; none before the 404 for a host not
// served here or the 413 for a body declared over the admin API's
// limit.
func TestH3Expect(t *testing.T) {
	e := startTestEdge(t, map[string]string{"echo.p2p": echoUpstream(t)}, Deps{Admin: func(ctx *fasthttp.RequestCtx) { ctx.SetBodyString("admin") }})
	c := &http.Client{Timeout: 10 * time.Second, Transport: e.h3(t, "echo.p2p")}
	send := func(host string, body io.Reader, n int64) (int, string, bool) {
		t.Helper()
		var got100 atomic.Bool
		ctx := httptrace.WithClientTrace(context.Background(), &httptrace.ClientTrace{Got100Continue: func() { got100.Store(true) }})
		req, err := http.NewRequestWithContext(ctx, "POST", "https://echo.p2p/a", body)
		if err != nil {
			t.Fatal(err)
		}
		req.ContentLength, req.Host = n, host
		req.Header.Set("Expect", "100-continue")
		resp, err := c.Do(req)
		if err != nil {
			t.Fatalf("%s: %v", host, err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.ProtoMajor != 3 {
			t.Fatalf("%s: answered in %s, want HTTP/3", host, resp.Proto)
		}
		return resp.StatusCode, string(b), got100.Load()
	}
	if st, _, got100 := send("nowhere.p2p", strings.NewReader("hello"), 5); st != 404 || got100 {
		t.Errorf("unknown host: %d, 100 Continue %v; want 404 without", st, got100)
	}
	if st, _, got100 := send("admin.p2p", io.LimitReader(zeros{}, admin.MaxBody+1), admin.MaxBody+1); st != 413 || got100 {
		t.Errorf("admin over its limit: %d, 100 Continue %v; want 413 without", st, got100)
	}
	if st, body, got100 := send("admin.p2p", strings.NewReader("hello"), 5); st != 200 || !got100 || body != "admin" {
		t.Errorf("admin: %d %q, 100 Continue %v; want 200 after 100", st, body, got100)
	}
	if st, body, got100 := send("echo.p2p", strings.NewReader("hello"), 5); st != 200 || !got100 || body != `expect=[] body="hello"` {
		t.Errorf("pooled: %d %q, 100 Continue %v; want 200 after 100, no Expect upstream", st, body, got100)
	}
	big := strings.Repeat("b", SmallBody+1) // streamed (ReverseProxy)
	if st, body, got100 := send("echo.p2p", strings.NewReader(big), int64(len(big))); st != 200 || !got100 || !strings.HasPrefix(body, `expect=[] body="bbb`) {
		t.Errorf("streamed: %d %.40q, 100 Continue %v; want 200 after 100, no Expect upstream", st, body, got100)
	}
}
