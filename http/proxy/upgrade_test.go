package proxy

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"peerdns/internal/testutil"
	"strconv"
	"strings"
	"testing"
	"time"
)

// An upgrade the upstream refuses (403) is answered as the upstream
// answered it (with the edge's Date, as every answer), and the client's connection stays HTTP: its next request
// is the edge's to read and forward (X-Forwarded-For set), not piped to
// the upstream past it. One the upstream accepts gets the 101 head as it
// came, and bytes flow both ways. The upgrade request reaches the
// upstream without the client's hop-by-hop headers, but one Connection:
// Upgrade and one Upgrade: websocket.
func TestEdgeUpgradeOnlyOn101(t *testing.T) {
	up := serveUpstream(t, false, func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.URL.Path == "/ws" && r.Header.Get("X-Allow") != "":
			c, brw, err := w.(http.Hijacker).Hijack()
			if err != nil {
				return
			}
			defer c.Close()
			saw := fmt.Sprintf("connection=%q upgrade=%q te=%q keep-alive=%q proxy-authorization=%q x-hop=%q xff=%q", r.Header.Values("Connection"), r.Header.Values("Upgrade"),
				r.Header.Get("Te"), r.Header.Get("Keep-Alive"), r.Header.Get("Proxy-Authorization"), r.Header.Get("X-Hop"), r.Header.Get("X-Forwarded-For"))
			_, _ = brw.WriteString("HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nX-Up: kept as it came\r\nX-Saw: " + saw + "\r\n\r\n")
			_ = brw.Flush()
			_, _ = io.Copy(c, brw) // echo
		case r.URL.Path == "/ws":
			w.Header()["Date"] = nil // an upstream that sends none: the edge's own
			http.Error(w, "no upgrade for you", http.StatusForbidden)
		default:
			fmt.Fprintf(w, "%s xff=%s", r.URL.Path, r.Header.Get("X-Forwarded-For"))
		}
	})
	e := newTestH2Edge(t, map[string]string{"f.p2p": up}, Deps{})
	httpAddr, _ := e.s.Addrs()
	dial := func() net.Conn {
		t.Helper()
		return sendRaw(t, httpAddr.String(), "")
	}
	ask := "GET /ws HTTP/1.1\r\nHost: f.p2p\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"

	c := dial()
	if _, err := io.WriteString(c, ask+"\r\n"); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(c)
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 403 || strings.TrimSpace(string(b)) != "no upgrade for you" {
		t.Fatalf("refused upgrade: %d %q", resp.StatusCode, b)
	}
	if d := resp.Header.Values("Date"); len(d) != 1 {
		t.Fatalf("refused upgrade: Date %q, want the edge's one, as on every answer", d)
	} else if _, err := http.ParseTime(d[0]); err != nil {
		t.Fatalf("refused upgrade: Date %q: %v", d[0], err)
	}
	if _, err := io.WriteString(c, "GET /second HTTP/1.1\r\nHost: f.p2p\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	resp, err = http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	b, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || string(b) != "/second xff=127.0.0.1" {
		t.Fatalf("the request after a refused upgrade: %d %q, want it forwarded by the edge", resp.StatusCode, b)
	}

	c = dial()
	// Its hop-by-hop headers go as on any other path, but for the two
	// that ask for the upgrade, which the upstream gets as one of each.
	hop := "Connection: X-Hop\r\nX-Hop: 1\r\nTE: trailers\r\nKeep-Alive: timeout=5\r\nProxy-Authorization: Basic eA==\r\nX-Forwarded-For: 203.0.113.7\r\n"
	if _, err := io.WriteString(c, "GET /ws HTTP/1.1\r\nHost: f.p2p\r\nUpgrade: WebSocket\r\nConnection: keep-alive, Upgrade\r\n"+hop+"X-Allow: 1\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	br = bufio.NewReader(c)
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	var head strings.Builder
	for {
		l, err := br.ReadString('\n')
		if err != nil {
			t.Fatalf("101 head: %v (%q)", err, head.String())
		}
		head.WriteString(l)
		if l == "\r\n" {
			break
		}
	}
	if want := "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nX-Up: kept as it came\r\n" +
		`X-Saw: connection=["Upgrade"] upgrade=["websocket"] te="" keep-alive="" proxy-authorization="" x-hop="" xff="203.0.113.7, 127.0.0.1"` + "\r\n\r\n"; head.String() != want {
		t.Fatalf("101 head %q, want %q", head.String(), want)
	}
	if _, err := io.WriteString(c, "ping"); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, 4)
	if _, err := io.ReadFull(br, got); err != nil || string(got) != "ping" {
		t.Fatalf("after the upgrade: %q %v", got, err)
	}
}

// upgradeWithBody sends a WebSocket upgrade request to ws.p2p on the edge
// at addr whose Content-Length declares n bytes, and then sends them
// (filler) from a goroutine until the edge stops taking them.
func upgradeWithBody(t *testing.T, addr string, n int) net.Conn {
	t.Helper()
	c := sendRaw(t, addr, "GET /ws HTTP/1.1\r\nHost: ws.p2p\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"+
		"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\nContent-Length: "+strconv.Itoa(n)+"\r\n\r\n")
	go func() {
		chunk := []byte(strings.Repeat("x", 64<<10))
		for sent := 0; sent < n; sent += len(chunk) {
			if _, err := c.Write(chunk[:min(len(chunk), n-sent)]); err != nil {
				return
			}
		}
	}()
	return c
}

// bigBody is longer than what loopback's socket buffers hold between
// the edge and an upstream that reads nothing.
const bigBody = 64 << 20

// A WebSocket upgrade request with a body that the upstream stops
// taking (it closes the connection) is answered 502, and the client's
// connection closes after it: the part of the body the edge did not read
// is not taken for a next request (RFC 9112 §6.3: the body is
// Content-Length bytes, whatever the upstream did with them).
func TestEdgeUpgradeBodyNotReadAsRequest(t *testing.T) {
	up := testutil.ServeTCP(t, func(net.Conn) {}) // closes at once, the request unread
	e := newTestH2Edge(t, map[string]string{"ws.p2p": up.String()}, Deps{})
	httpAddr, _ := e.s.Addrs()
	c := upgradeWithBody(t, httpAddr.String(), bigBody)
	code, hdr, _ := answer(t, c)
	if code != 502 || hdr.Get("Connection") != "close" {
		t.Fatalf("%d, Connection %q; want 502 and the connection closed", code, hdr.Get("Connection"))
	}
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	if rest, _ := io.ReadAll(c); len(rest) > 0 {
		t.Fatalf("after the 502, the body's bytes were answered as a request: %.200q", rest)
	}
}

// An upstream that takes a WebSocket upgrade's connection and then reads
// nothing of it (hung) holds the edge's write of the upgrade request
// once the socket buffers are full (a request with a long body). That
// write is held to UpstreamTimeout, as every write to an upstream is:
// the client gets a 504 and its connection closes, instead of the
// exchange (its goroutine, the client's connection and its slot, the
// upstream connection) staying stuck for as long as the upstream keeps
// the connection open.
func TestEdgeUpgradeWriteTimesOut(t *testing.T) {
	hold := make(chan struct{})
	up := testutil.ServeTCP(t, func(net.Conn) { <-hold }) // open, never read
	e := newTestH2Edge(t, map[string]string{"ws.p2p": up.String()}, Deps{UpstreamTimeout: 300 * time.Millisecond})
	t.Cleanup(func() { close(hold) }) // before the edge's Shutdown
	httpAddr, _ := e.s.Addrs()
	c := upgradeWithBody(t, httpAddr.String(), bigBody)
	if code, hdr, _ := answer(t, c); code != 504 || hdr.Get("Connection") != "close" {
		t.Fatalf("%d, Connection %q; want 504 and the connection closed", code, hdr.Get("Connection"))
	}
}

// An upgrade the upstream answers with informational answers (a 100
// Continue, a 103 Early Hints) before its 101 is taken: the client gets
// the 101 head as it came, and bytes flow both ways. Those answers are
// read past, as on the pool's path; a 101 is not informational here.
func TestEdgeUpgradeAfterEarlyHints(t *testing.T) {
	up := testutil.ServeTCP(t, func(c net.Conn) {
		br := bufio.NewReader(c)
		if _, err := http.ReadRequest(br); err != nil {
			return
		}
		_, _ = io.WriteString(c, "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nLink: </a.css>; rel=preload\r\n\r\n"+
			"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n")
		_, _ = io.Copy(c, br) // echo
	})
	e := newTestH2Edge(t, map[string]string{"ws.p2p": up.String()}, Deps{})
	httpAddr, _ := e.s.Addrs()
	c := sendRaw(t, httpAddr.String(), "GET /ws HTTP/1.1\r\nHost: ws.p2p\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n")
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	br := bufio.NewReader(c)
	var head strings.Builder
	for {
		l, err := br.ReadString('\n')
		if err != nil {
			t.Fatalf("101 head: %v (%q)", err, head.String())
		}
		head.WriteString(l)
		if l == "\r\n" {
			break
		}
	}
	if want := "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n"; head.String() != want {
		t.Fatalf("head %q, want %q", head.String(), want)
	}
	if _, err := io.WriteString(c, "ping"); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, 4)
	if _, err := io.ReadFull(br, got); err != nil || string(got) != "ping" {
		t.Fatalf("after the upgrade: %q %v", got, err)
	}
}
