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

// quietTimeout is every timeout the quiet tests give the edge; each quiet
// spell lasts four of them.
const quietTimeout = 200 * time.Millisecond

// TestEdgeQuietUpgradeStays: once upgraded, a connection is the two
// ends' own: quiet both ways for longer than ReadTimeout, WriteTimeout
// and UpstreamTimeout together, it still carries what either end sends
// next, in plain HTTP and in TLS (a WebSocket whose ends ping each other rarely, or never).
func TestEdgeQuietUpgradeStays(t *testing.T) {
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
	e := newTestH2Edge(t, map[string]string{"q.p2p": up}, Deps{ReadTimeout: quietTimeout, WriteTimeout: quietTimeout, UpstreamTimeout: quietTimeout})
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
			time.Sleep(4 * quietTimeout) // the quiet spell is what is tried
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

// TestEdgeQuietGRPCStreamStays: a gRPC server stream (a watch) that
// sends a message, is quiet for longer than every timeout the edge has
// (ReadTimeout, WriteTimeout, UpstreamTimeout), then sends the next,
// reaches its client whole, its trailers with it: a stream's quiet is
// not an upstream's silence before its answer.
func TestEdgeQuietGRPCStreamStays(t *testing.T) {
	up := serveUpstream(t, true, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/grpc")
		w.Header().Set("Trailer", "Grpc-Status")
		for i := range 3 {
			if i > 0 {
				time.Sleep(4 * quietTimeout) // the quiet spell is what is tried
			}
			_, _ = w.Write([]byte{0, 0, 0, 0, 2, 'm', '0' + byte(i)})
			w.(http.Flusher).Flush()
		}
		w.Header().Set("Grpc-Status", "0")
	})
	e := newTestH2Edge(t, map[string]string{"w.p2p": up}, Deps{ReadTimeout: quietTimeout, WriteTimeout: quietTimeout, UpstreamTimeout: quietTimeout})
	req, err := http.NewRequest(http.MethodPost, "https://w.p2p/watch.Watch/Changes", http.NoBody)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/grpc")
	req.Header.Set("Te", "trailers")
	resp, err := e.c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	br := bufio.NewReader(resp.Body)
	for i := range 3 {
		msg := make([]byte, 7)
		if _, err := io.ReadFull(br, msg); err != nil || msg[6] != '0'+byte(i) {
			t.Fatalf("message %d: %q %v", i, msg, err)
		}
	}
	if _, err := br.ReadByte(); err != io.EOF {
		t.Fatalf("after the last message: %v, want the stream's end", err)
	}
	if got := resp.Trailer.Get("Grpc-Status"); got != "0" {
		t.Fatalf("Grpc-Status trailer %q, want 0", got)
	}
}
