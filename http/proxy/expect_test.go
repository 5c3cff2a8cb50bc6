package proxy

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"peerdns/http/admin"
	"peerdns/http/pluginweb"
	"peerdns/internal/testutil"
)

// echoUpstream answers each request with what it saw of it: its Expect
// header and its body.
func echoUpstream(t *testing.T) string {
	t.Helper()
	return testutil.ServeTCP(t, func(c net.Conn) {
		testutil.ReadRequests(c, func(req *http.Request) bool {
			b, _ := io.ReadAll(req.Body)
			body := fmt.Sprintf("expect=%q body=%q", req.Header.Values("Expect"), b)
			_, err := fmt.Fprintf(c, "HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
			return err == nil
		})
	}).String()
}

// rawEdge is an edge in front of echoUpstream (echo.p2p) and a function
// that opens a raw connection to it.
func rawEdge(t *testing.T) (dial func() (net.Conn, *bufio.Reader)) {
	t.Helper()
	s := New(Deps{HTTPAddr: "127.0.0.1:0", HTTPSAddr: "127.0.0.1:0", AdminDomain: "admin.p2p",
		View: publishedView(map[string]string{"echo.p2p": "hs://echo"}), Dialer: tcpDialer{"hs://echo": echoUpstream(t)}})
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Shutdown)
	edge, _ := s.Addrs()
	return func() (net.Conn, *bufio.Reader) {
		c, err := net.Dial("tcp", edge.String())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		_ = c.SetDeadline(time.Now().Add(10 * time.Second))
		return c, bufio.NewReader(c)
	}
}

// statusLine reads the next status line and the rest of its head.
func statusLine(t *testing.T, br *bufio.Reader) string {
	t.Helper()
	line, err := br.ReadString('\n')
	if err != nil {
		t.Fatalf("status line: %v (read %q)", err, line)
	}
	for {
		l, err := br.ReadString('\n')
		if err != nil {
			t.Fatalf("head: %v", err)
		}
		if l == "\r\n" {
			break
		}
	}
	return strings.TrimSpace(line)
}

// TestExpectNoBody: a request that expects 100-continue and has no body
// gets its answer with no 100 Continue before it (RFC 9110 §10.1.1), and
// its Expect is not passed upstream; the connection serves the next
// request.
func TestExpectNoBody(t *testing.T) {
	dial := rawEdge(t)
	for _, head := range []string{
		"GET /a HTTP/1.1\r\nHost: echo.p2p\r\nExpect: 100-continue\r\n\r\n",
		"POST /a HTTP/1.1\r\nHost: echo.p2p\r\nExpect: 100-continue\r\nContent-Length: 0\r\n\r\n",
	} {
		c, br := dial()
		for range 2 {
			if _, err := io.WriteString(c, head); err != nil {
				t.Fatal(err)
			}
			resp, err := http.ReadResponse(br, nil)
			if err != nil {
				t.Fatalf("%q: %v", head, err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 200 || string(b) != `expect=[] body=""` {
				t.Fatalf("%q: %d %s, want 200 with no Expect upstream", head, resp.StatusCode, b)
			}
		}
	}
}

// TestExpectBody: a request with a body that expects 100-continue gets
// 100 Continue once the edge has routed it (the expectation written in
// any case), and its body then goes upstream without the Expect.
func TestExpectBody(t *testing.T) {
	dial := rawEdge(t)
	for _, expect := range []string{"100-continue", "100-Continue"} {
		c, br := dial()
		if _, err := io.WriteString(c, "POST /a HTTP/1.1\r\nHost: echo.p2p\r\nExpect: "+expect+"\r\nContent-Length: 5\r\n\r\n"); err != nil {
			t.Fatal(err)
		}
		if line := statusLine(t, br); line != "HTTP/1.1 100 Continue" {
			t.Fatalf("%s: %q before the body, want 100 Continue", expect, line)
		}
		if _, err := io.WriteString(c, "hello"); err != nil {
			t.Fatal(err)
		}
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || string(b) != `expect=[] body="hello"` {
			t.Fatalf("%s: %d %s, want 200 with the body and no Expect upstream", expect, resp.StatusCode, b)
		}
	}
}

// TestExpectRefused: a request with a body that expects 100-continue,
// for a host not served here, gets its 404 at once, with no 100
// Continue and without its body read, and the connection closes.
func TestExpectRefused(t *testing.T) {
	dial := rawEdge(t)
	c, br := dial()
	if _, err := io.WriteString(c, "POST /a HTTP/1.1\r\nHost: nowhere.p2p\r\nExpect: 100-continue\r\nContent-Length: 5\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 404 || !strings.Contains(string(b), "nowhere.p2p") {
		t.Fatalf("unknown host: %d %s, want its 404 page with no 100 Continue", resp.StatusCode, b)
	}
	if n, err := br.Read(make([]byte, 1)); err != io.EOF {
		t.Fatalf("after the 404: %d bytes, %v; want the connection closed", n, err)
	}
}

// stubSites serves one plugin domain whose site is never reached.
type stubSites struct{}

// stubSite is a plugin that no request reaches (its methods are never
// called).
type stubSite struct{ pluginweb.Site }

func (stubSites) Site(domain string) pluginweb.Site {
	if domain == "plug.p2p" {
		return stubSite{}
	}
	return nil
}

// TestExpectOverLimit: a request that expects 100-continue and declares
// a body over the limit of the admin API or a plugin gets its 413 at
// once, with no 100 Continue and its body unread, and the connection
// closes (nginx answers so); one within the limit gets 100 Continue.
func TestExpectOverLimit(t *testing.T) {
	s := New(Deps{HTTPAddr: "127.0.0.1:0", HTTPSAddr: "127.0.0.1:0", AdminDomain: "admin.p2p",
		Admin:   func(ctx *fasthttp.RequestCtx) { ctx.SetBodyString("admin") },
		Plugins: stubSites{}})
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Shutdown)
	edge, _ := s.Addrs()
	send := func(head string) (net.Conn, *bufio.Reader) {
		c, err := net.Dial("tcp", edge.String())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		_ = c.SetDeadline(time.Now().Add(10 * time.Second))
		if _, err := io.WriteString(c, head); err != nil {
			t.Fatal(err)
		}
		return c, bufio.NewReader(c)
	}
	for host, limit := range map[string]int{"admin.p2p": admin.MaxBody, "plug.p2p": pluginweb.MaxBody} {
		_, br := send(fmt.Sprintf("POST /a HTTP/1.1\r\nHost: %s\r\nExpect: 100-continue\r\nContent-Length: %d\r\n\r\n", host, limit+1))
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatalf("%s: %v", host, err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusRequestEntityTooLarge {
			t.Fatalf("%s, %d bytes declared: %d, want 413 with no 100 Continue", host, limit+1, resp.StatusCode)
		}
		if rest, err := io.ReadAll(br); err != nil || len(rest) > 0 {
			t.Fatalf("%s: after the 413: %q, %v; want the connection closed", host, rest, err)
		}
	}
	c, br := send("POST /a HTTP/1.1\r\nHost: admin.p2p\r\nExpect: 100-continue\r\nContent-Length: 5\r\n\r\n")
	if line := statusLine(t, br); line != "HTTP/1.1 100 Continue" {
		t.Fatalf("admin within its limit: %q, want 100 Continue", line)
	}
	if _, err := io.WriteString(c, "hello"); err != nil {
		t.Fatal(err)
	}
	if resp, err := http.ReadResponse(br, nil); err != nil || resp.StatusCode != 200 {
		t.Fatalf("admin within its limit: %v %v", resp, err)
	}
}
