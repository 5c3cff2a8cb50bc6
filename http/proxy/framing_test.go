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
)

// A request that declares its body's length both ways (Content-Length
// and Transfer-Encoding, in either order, in any case) is
// refused with 400 and its connection closed before anything reaches
// the upstream: a proxy in front of the edge that went by the
// Content-Length would take the rest of the body for a next request.
// A chunked request alone goes through.
func TestEdgeRefusesBothFramings(t *testing.T) {
	var seen atomic.Int64
	up := serveUpstream(t, false, func(w http.ResponseWriter, r *http.Request) {
		seen.Add(1)
		b, _ := io.ReadAll(r.Body)
		fmt.Fprintf(w, "%s %q", r.URL.Path, b)
	})
	e := newTestH2Edge(t, map[string]string{"f.p2p": up}, Deps{})
	httpAddr, _ := e.s.Addrs()
	send := func(head, body string) net.Conn {
		t.Helper()
		return sendRaw(t, httpAddr.String(), "POST /a HTTP/1.1\r\nHost: f.p2p\r\n"+head+"\r\n"+body)
	}
	smuggled := "0\r\n\r\nGET /smuggled HTTP/1.1\r\nHost: f.p2p\r\n\r\n"
	for _, head := range []string{
		"Content-Length: 4\r\nTransfer-Encoding: chunked\r\n",
		"Transfer-Encoding: chunked\r\nContent-Length: 4\r\n",
		"transfer-encoding: chunked\r\ncontent-length: 4\r\n",
		"Transfer-Encoding: chunked\r\nContent-Length: 0\r\n",
		"Content-Length: 4\r\nTransfer-Encoding: identity\r\n",
	} {
		c := send(head, smuggled)
		code, hdr, _ := answer(t, c)
		if code != 400 || hdr.Get("Connection") != "close" {
			t.Fatalf("%q: %d, Connection %q; want 400 and the connection closed", head, code, hdr.Get("Connection"))
		}
		// Nothing more comes: not the answer to the smuggled request.
		_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
		if rest, _ := io.ReadAll(c); len(rest) > 0 {
			t.Fatalf("%q: after the 400: %q", head, rest)
		}
	}
	if n := seen.Load(); n != 0 {
		t.Fatalf("the upstream saw %d requests, want none", n)
	}
	c := send("Transfer-Encoding: chunked\r\n", "5\r\nhello\r\n0\r\n\r\n")
	if code, _, body := answer(t, c); code != 200 || body != `/a "hello"` {
		t.Fatalf("a chunked request: %d %q", code, body)
	}
	if n := seen.Load(); n != 1 {
		t.Fatalf("the upstream saw %d requests, want 1", n)
	}
}

// A chunked request body fasthttp cannot read (a chunk size that is not
// hex, or overflows; a chunk not ended by CRLF) is the client's fault:
// 400, not the 502 of an upstream that failed.
func TestEdgeBrokenChunksAreBadRequests(t *testing.T) {
	up := serveUpstream(t, false, func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
	})
	e := newTestH2Edge(t, map[string]string{"f.p2p": up}, Deps{})
	httpAddr, _ := e.s.Addrs()
	for _, body := range []string{"zz\r\nhello\r\n0\r\n\r\n", "ffffffffffffffffff\r\nhello\r\n0\r\n\r\n", "5\r\nhelloXX0\r\n\r\n"} {
		c := sendRaw(t, httpAddr.String(), "POST /a HTTP/1.1\r\nHost: f.p2p\r\nTransfer-Encoding: chunked\r\n\r\n"+body)
		if code, _, msg := answer(t, c); code != 400 {
			t.Fatalf("%q: %d %q, want 400", body, code, msg)
		}
	}
}

// An HTTP/1.1 request asking to upgrade to h2c reaches the upstream
// without its Upgrade header (the edge would go on speaking HTTP/1.1 on
// the connection after an upstream's 101), and is answered as a plain
// request.
func TestEdgeDropsH2CUpgrade(t *testing.T) {
	up := serveUpstream(t, false, func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "upgrade=%q connection=%q", r.Header.Get("Upgrade"), r.Header.Get("Connection"))
	})
	e := newTestH2Edge(t, map[string]string{"f.p2p": up}, Deps{})
	httpAddr, _ := e.s.Addrs()
	c := sendRaw(t, httpAddr.String(), "GET / HTTP/1.1\r\nHost: f.p2p\r\nUpgrade: h2c\r\nHTTP2-Settings: AAMAAABkAARAAAAAAAIAAAAA\r\nConnection: Upgrade, HTTP2-Settings\r\n\r\n")
	if code, _, body := answer(t, c); code != 200 || body != `upgrade="" connection=""` {
		t.Fatalf("h2c upgrade: %d %q", code, body)
	}
}

// Heads fasthttp reads but the edge must not pass on: a version other
// than HTTP/1.x (505), a transfer coding other than chunked (501; the
// bytes that followed are not taken for a next request), CONNECT and
// TRACE (501), a field name that is not a token, user information
// in the Host or an absolute-form target (fasthttp would turn it into
// an Authorization header; 400), a Host or such a target's authority
// that is not a host name and port though it ends in a served name
// (400), a Content-Length, Transfer-Encoding or Host folded over lines
// (400), a target of * but for OPTIONS, and one that is neither a
// path, * nor an http or https URI (400): the connection
// closed, nothing upstream. HTTP/1.2 goes
// upstream as HTTP/1.1, HTTP/1.0 as itself, an obs-fold as one space,
// OPTIONS * as itself.
func TestEdgeRefusesUnfitHeads(t *testing.T) {
	var seen atomic.Int64
	up := serveUpstream(t, false, func(w http.ResponseWriter, r *http.Request) {
		seen.Add(1)
		fmt.Fprintf(w, "%s %s auth=%q x=%q", r.Proto, r.Host, r.Header.Get("Authorization"), r.Header.Get("X-A"))
	})
	e := newTestH2Edge(t, map[string]string{"f.p2p": up}, Deps{})
	httpAddr, _ := e.s.Addrs()
	send := func(head string) net.Conn {
		t.Helper()
		return sendRaw(t, httpAddr.String(), head+"\r\n")
	}
	for _, tc := range []struct {
		head string
		code int
	}{
		{"GET / HTTP/2.0\r\nHost: f.p2p\r\n", 505},
		{"GET / HTTP/0.9\r\nHost: f.p2p\r\n", 505},
		{"GET / HTTP/1.1\r\nHost: f.p2p\r\nX A: b\r\n", 400},
		{"GET / HTTP/1.1\r\nHost: f.p2p\r\nTransfer Encoding: chunked\r\n", 400},
		{"GET / HTTP/1.1\r\nHost: evil@f.p2p\r\n", 400},
		{"GET http://evil:pw@f.p2p/ HTTP/1.1\r\nHost: f.p2p\r\n", 400},
		{"GET http://evil@f.p2p HTTP/1.0\r\n", 400},
		{"POST / HTTP/1.1\r\nHost: f.p2p\r\nTransfer-Encoding: identity\r\n\r\n0\r\n\r\nGET /smuggled HTTP/1.1\r\nHost: f.p2p\r\n", 501},
		{"CONNECT f.p2p:443 HTTP/1.1\r\nHost: f.p2p:443\r\n", 501},
		{"CONNECT f.p2p:80 HTTP/1.1\r\nHost: f.p2p\r\n", 501},
		{"TRACE / HTTP/1.1\r\nHost: f.p2p\r\nCookie: s=1\r\n", 501},
		{"GET * HTTP/1.1\r\nHost: f.p2p\r\n", 400},
		{"POST / HTTP/1.1\r\nHost: f.p2p\r\nTransfer-Encoding:\r\n chunked\r\n\r\n0\r\n\r\nGET /smuggled HTTP/1.1\r\nHost: f.p2p\r\n", 400},
		{"POST / HTTP/1.1\r\nHost: f.p2p\r\nContent-Length:\r\n\t5\r\n\r\nhello", 400},
		{"GET / HTTP/1.1\r\nHost:\r\n f.p2p\r\n", 400},
		{"GET / HTTP/1.1\r\nHost: evil.example,x.f.p2p\r\n", 400},
		{"GET / HTTP/1.1\r\nHost: evil.example;x.f.p2p\r\n", 400},
		{"GET / HTTP/1.1\r\nHost: x.f.p2p<script>\r\n", 400},
		{"GET http://evil.example,x.f.p2p/ HTTP/1.1\r\nHost: f.p2p\r\n", 400},
		{"POST * HTTP/1.1\r\nHost: f.p2p\r\nContent-Length: 0\r\n", 400},
		{"GET ftp://f.p2p/ HTTP/1.1\r\nHost: f.p2p\r\n", 400},
	} {
		c := send(tc.head)
		code, hdr, body := answer(t, c)
		if code != tc.code || hdr.Get("Connection") != "close" || !strings.Contains(body, "<title>"+http.StatusText(tc.code)+"</title>") {
			t.Fatalf("%q: %d, Connection %q, %q; want the edge's %d and the connection closed", tc.head, code, hdr.Get("Connection"), body, tc.code)
		}
	}
	if n := seen.Load(); n != 0 {
		t.Fatalf("the upstream saw %d requests, want none", n)
	}
	// OPTIONS * goes upstream (net/http's server answers it itself).
	if code, _, _ := answer(t, send("OPTIONS * HTTP/1.1\r\nHost: f.p2p\r\n")); code != 200 {
		t.Fatalf("OPTIONS *: %d, want the upstream's 200", code)
	}
	for _, tc := range []struct{ head, want string }{
		{"GET / HTTP/1.2\r\nHost: f.p2p\r\n", `HTTP/1.1 f.p2p auth="" x=""`},
		{"GET / HTTP/1.0\r\nHost: f.p2p\r\n", `HTTP/1.0 f.p2p auth="" x=""`},
		{"GET / HTTP/1.1\r\nHost: X_1.F.p2p.:80\r\n", `HTTP/1.1 x_1.f.p2p.:80 auth="" x=""`},
		{"GET / HTTP/1.1\r\nHost: f.p2p\r\nX-A: a\r\n b\r\n", `HTTP/1.1 f.p2p auth="" x="a b"`},
		{"GET / HTTP/1.1\r\nHost: f.p2p\r\nX-A:\r\n b\r\n", `HTTP/1.1 f.p2p auth="" x="b"`},
		{"GET /?u=a@b HTTP/1.1\r\nHost: f.p2p\r\n", `HTTP/1.1 f.p2p auth="" x=""`},
		{"GET http://f.p2p/?u=a@b HTTP/1.1\r\nHost: f.p2p\r\n", `HTTP/1.1 f.p2p auth="" x=""`},
		{"POST / HTTP/1.1\r\nHost: f.p2p\r\nTransfer-Encoding: Chunked\r\n\r\n0\r\n", `HTTP/1.1 f.p2p auth="" x=""`},
	} {
		if code, _, body := answer(t, send(tc.head)); code != 200 || body != tc.want {
			t.Fatalf("%q: %d %q, want 200 %q", tc.head, code, body, tc.want)
		}
	}
}
