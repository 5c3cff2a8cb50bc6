package proxy

import (
	"bufio"
	"crypto/tls"
	"io"
	"net"
	"net/http"
	"testing"
	"time"
)

// TestEdgeQuietUpgradeStays: once upgraded, a connection is the two
// ends' own: quiet both ways for longer than ReadTimeout, WriteTimeout
// and UpstreamTimeout together, it still carries what either end sends
// next, in plain HTTP and in TLS (a WebSocket whose ends ping each other rarely, or never).
func TestEdgeQuietUpgradeStays(t *testing.T) {
	const short = 200 * time.Millisecond
	up := serveUpstream(t, false, func(w http.ResponseWriter, r *http.Request) {
		c, brw, err := w.(http.Hijacker).Hijack()
		if err != nil {
			return
		}
		defer c.Close()
		_, _ = brw.WriteString("HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n")
		_ = brw.Flush()
		_, _ = io.Copy(c, brw) // echo
	})
	e := newTestH2Edge(t, map[string]string{"q.p2p": up}, Deps{ReadTimeout: short, WriteTimeout: short, UpstreamTimeout: short})
	httpAddr, httpsAddr := e.s.Addrs()
	ask := "GET /ws HTTP/1.1\r\nHost: q.p2p\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n"
	plain := sendRaw(t, httpAddr.String(), ask)
	tc, err := tls.Dial("tcp", httpsAddr.String(), &tls.Config{RootCAs: e.s.d.CA.Pool(), ServerName: "q.p2p", NextProtos: []string{"http/1.1"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tc.Close() })
	if _, err := io.WriteString(tc, ask); err != nil {
		t.Fatal(err)
	}
	for _, c := range []net.Conn{plain, tc} {
		br := bufio.NewReader(c)
		_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
		resp, err := http.ReadResponse(br, nil)
		if err != nil || resp.StatusCode != http.StatusSwitchingProtocols {
			t.Fatalf("upgrade: %v %v", resp, err)
		}
		for i := range 2 {
			time.Sleep(4 * short) // the quiet spell is what is tried
			if _, err := io.WriteString(c, "ping"); err != nil {
				t.Fatalf("%T after quiet spell %d: write: %v", c, i, err)
			}
			got := make([]byte, 4)
			if _, err := io.ReadFull(br, got); err != nil || string(got) != "ping" {
				t.Fatalf("%T after quiet spell %d: %q %v", c, i, got, err)
			}
		}
	}
}
