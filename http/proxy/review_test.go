package proxy

import (
	"io"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"peerdns/internal/testutil"
)

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
