package proxy

import (
	"context"
	"crypto/tls"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/quic-go/quic-go"
	"github.com/quic-go/quic-go/http3"

	"peerdns/internal/testutil"
)

// ticketCache is a client session cache that counts the tickets it is
// given.
type ticketCache struct {
	tls.ClientSessionCache
	puts atomic.Int64
}

func (c *ticketCache) Put(key string, cs *tls.ClientSessionState) {
	if cs != nil {
		c.puts.Add(1)
	}
	c.ClientSessionCache.Put(key, cs)
}

// A client that resumes a session and sends its request as 0-RTT early
// data (quic-go's client does for GET_0RTT) has the early data refused:
// the request runs once, after the handshake, whatever its method. A
// replay of early data, which anyone on the path could send, would run
// the request again.
func TestEdgeHTTP3RefusesEarlyData(t *testing.T) {
	var seen atomic.Int64
	up := serveUpstream(t, false, func(w http.ResponseWriter, r *http.Request) {
		seen.Add(1)
		_, _ = io.WriteString(w, r.Method+" "+r.URL.Path)
	})
	e := startTestEdge(t, map[string]string{"zr.p2p": up}, Deps{})
	_, httpsAddr := e.s.Addrs()

	cache := &ticketCache{ClientSessionCache: tls.NewLRUClientSessionCache(4)}
	conf := &tls.Config{RootCAs: e.s.d.CA.Pool(), ServerName: "zr.p2p", ClientSessionCache: cache}
	var mu sync.Mutex
	var conns []*quic.Conn
	client := func() (*http.Client, *http3.Transport) {
		tr := &http3.Transport{
			TLSClientConfig: conf,
			Dial: func(ctx context.Context, _ string, tc *tls.Config, qc *quic.Config) (*quic.Conn, error) {
				c, err := quic.DialAddrEarly(ctx, httpsAddr.String(), tc, qc)
				if err == nil {
					mu.Lock()
					conns = append(conns, c)
					mu.Unlock()
				}
				return c, err
			},
		}
		t.Cleanup(func() { tr.Close() })
		return &http.Client{Timeout: 10 * time.Second, Transport: tr}, tr
	}
	get := func(c *http.Client, method, path string) {
		t.Helper()
		req, _ := http.NewRequest(method, "https://zr.p2p"+path, nil)
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || resp.ProtoMajor != 3 || string(b) != "GET "+path {
			t.Fatalf("%s %s: %s %d %q", method, path, resp.Proto, resp.StatusCode, b)
		}
	}

	// A first connection, for a session ticket.
	c1, tr1 := client()
	get(c1, http.MethodGet, "/first")
	testutil.Eventually(t, 5*time.Second, func() error {
		if cache.puts.Load() == 0 {
			return io.ErrNoProgress
		}
		return nil
	})
	tr1.Close()

	// A second one resumes and sends its request as early data.
	c2, _ := client()
	get(c2, http3.MethodGet0RTT, "/early")
	mu.Lock()
	last := conns[len(conns)-1]
	mu.Unlock()
	cs := last.ConnectionState()
	if !cs.TLS.DidResume {
		t.Fatal("the second connection did not resume its session: the test shows nothing")
	}
	if cs.Used0RTT {
		t.Fatal("the edge accepted 0-RTT early data")
	}
	if n := seen.Load(); n != 2 {
		t.Fatalf("the upstream saw %d requests, want 2", n)
	}
}
