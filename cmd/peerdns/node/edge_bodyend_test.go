package node

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/quic-go/quic-go"
	"github.com/quic-go/quic-go/http3"
	"golang.org/x/net/http2"

	"peerdns/http/proxy"
	"peerdns/internal/testutil"
)

// bodyLog is an HTTP/1.1 upstream that notes, for each request, the
// connection it came on, its path and how its body ended, and answers
// "ok" to every request whose body came whole.
type bodyLog struct {
	mu   sync.Mutex
	seen []string
}

func (l *bodyLog) note(s string) { l.mu.Lock(); l.seen = append(l.seen, s); l.mu.Unlock() }

func (l *bodyLog) lines() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.seen...)
}

func bodyLogUpstream(t *testing.T) (int, *bodyLog) {
	l := &bodyLog{}
	var conns atomic.Int64
	up := testutil.ServeTCP(t, func(c net.Conn) {
		conn := conns.Add(1) - 1
		testutil.ReadRequests(c, func(req *http.Request) bool {
			n, err := io.Copy(io.Discard, req.Body)
			l.note(fmt.Sprintf("conn %d %s %d/%d %v", conn, req.URL.Path, n, req.ContentLength, err))
			if err != nil {
				return false
			}
			_, err = io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
			return err == nil
		})
	})
	return up.Port, l
}

// A request body that ends before its content-length says (an HTTP/3
// stream ended short of it, an HTTP/2 stream whose DATA do not add up
// to it) is the client's fault: the edge answers 400, as over HTTP/1.1,
// and counts and logs it as such, not as the upstream unreachable (a
// 502 that would send an operator after a healthy upstream). The
// upstream connection the cut body went on is not used again (the next
// request would be read as the rest of the body), and the site serves
// on.
func TestEdgeBodyEndsEarly(t *testing.T) {
	n := newNetwork(t, 1)[0]
	port, ups := bodyLogUpstream(t)
	_, url := tunnelServerURL(t, n, fmt.Sprintf(`{"name":"cut","port":%d,"domain":"cut.p2p"}`, port))
	testutil.Eventually(t, 20*time.Second, func() error {
		if cs := consensusOn(t, n, "cut.p2p"); cs.Status != "resolved" || cs.Hash == nil || *cs.Hash != url {
			return fmt.Errorf("cut.p2p: %+v", cs)
		}
		return nil
	})
	edge := n.edge.Load()
	_, httpsAddr := n.EdgeAddrs()
	pool := rootPool(t, n)
	c2 := h2Client(httpsAddr, pool)
	get := func(c *http.Client, path string) {
		t.Helper()
		resp, err := c.Get("https://cut.p2p" + path)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || string(b) != "ok" {
			t.Fatalf("GET %s: %d %q", path, resp.StatusCode, b)
		}
	}
	testutil.Eventually(t, 20*time.Second, func() error {
		resp, err := c2.Get("https://cut.p2p/first")
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != 200 {
			return fmt.Errorf("GET /first: %d", resp.StatusCode)
		}
		return nil
	})

	// HTTP/3: quic-go's client ends the stream after the body it was
	// given, whatever the content-length. Both sizes: one read whole
	// before it is sent on, one streamed to the upstream.
	tr := &http3.Transport{
		TLSClientConfig: &tls.Config{RootCAs: pool, ServerName: "cut.p2p"},
		Dial: func(ctx context.Context, _ string, tc *tls.Config, qc *quic.Config) (*quic.Conn, error) {
			return quic.DialAddrEarly(ctx, httpsAddr, tc, qc)
		},
	}
	defer tr.Close()
	c3 := &http.Client{Transport: tr, Timeout: 10 * time.Second}
	for _, size := range []struct{ sent, declared int64 }{{5, 1000}, {100 << 10, 2 << 20}} {
		req, _ := http.NewRequest("POST", "https://cut.p2p/h3cut", io.LimitReader(zeros{}, size.sent))
		req.ContentLength = size.declared
		resp, err := c3.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(b), "The request body ended early.") {
			t.Fatalf("HTTP/3 body of %d bytes of %d: %d %q, want 400", size.sent, size.declared, resp.StatusCode, b)
		}
		get(c3, "/h3after")
	}

	// HTTP/2: a body shorter than its content-length is a malformed
	// request (RFC 9113 §8.1.1): the HTTP/2 server resets the stream,
	// which cancels the request, and the edge counts it a 400 whichever
	// it saw first, the cancel or the failed read.
	clients := func() int64 {
		return routeCount(edge, proxy.RouteTunnel, http.StatusBadRequest)
	}
	before := clients()
	r := dialRawH2(t, n, "cut.p2p")
	if err := r.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: r.head("POST", "cut.p2p", "/h2cut", "content-length", "2000000"), EndHeaders: true}); err != nil {
		t.Fatal(err)
	}
	chunk := make([]byte, 16<<10)
	for i := 0; i < 6; i++ {
		if err := r.fr.WriteData(1, i == 5, chunk); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := r.until(10*time.Second, func(f http2.Frame) bool {
		rs, ok := f.(*http2.RSTStreamFrame)
		return ok && rs.StreamID == 1 && rs.ErrCode == http2.ErrCodeProtocol
	}); err != nil {
		t.Fatalf("a stream ended short of its content-length was not reset: %v", err)
	}
	testutil.Eventually(t, 10*time.Second, func() error {
		if c := clients(); c != before+1 {
			return fmt.Errorf("answers counted 400: %d, want %d (%+v)", c, before+1, edge.Metrics().Requests)
		}
		return nil
	})
	get(c2, "/h2after")

	if c := routeCount(edge, proxy.RouteTunnel, http.StatusBadGateway); c != 0 {
		t.Errorf("%d answers counted 502", c)
	}
	// A cut body that reached the upstream (a small one is read whole
	// first, and an HTTP/2 stream may be reset before its exchange
	// starts) reached it cut: its connection ended mid-body, and no
	// request went on that connection after it.
	testutil.Eventually(t, 10*time.Second, func() error {
		cut := map[string]bool{}
		for _, s := range ups.lines() {
			f := strings.Fields(s)
			if len(f) < 4 {
				return fmt.Errorf("upstream line %q", s)
			}
			if cut[f[1]] {
				return fmt.Errorf("a request went on upstream connection %s after a cut body: %q", f[1], s)
			}
			if strings.HasSuffix(f[2], "cut") {
				if s[len(s)-len("<nil>"):] == "<nil>" {
					return fmt.Errorf("a cut body reached the upstream whole: %q", s)
				}
				cut[f[1]] = true
			}
		}
		if len(cut) == 0 {
			return fmt.Errorf("no cut body reached the upstream (%q): the streamed one over HTTP/3 should", ups.lines())
		}
		return nil
	})
}
