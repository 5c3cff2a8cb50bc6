package node

import (
	"bufio"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"peerdns/internal/testutil"
	"peerdns/messages"
)

// resettingBackend answers one request per connection, as keep-alive
// (no Connection: close), in TLS with cert when it is not nil, and
// resets the connection when told on reset: a server that drops a
// keep-alive connection with a reset (it closed with bytes unread, or
// with no linger), as seen from the proxy in front. conns counts the
// connections it took.
func resettingBackend(t *testing.T, cert *tls.Certificate) (port int, conns *atomic.Int64, reset chan struct{}) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	conns = new(atomic.Int64)
	reset = make(chan struct{})
	go func() {
		for {
			raw, err := ln.Accept()
			if err != nil {
				return
			}
			conns.Add(1)
			go func() {
				defer raw.Close()
				c := raw
				if cert != nil {
					c = tls.Server(raw, &tls.Config{Certificates: []tls.Certificate{*cert}})
				}
				req, err := http.ReadRequest(bufio.NewReader(c))
				if err != nil {
					return
				}
				n, _ := io.Copy(io.Discard, req.Body)
				body := fmt.Sprintf("%s %s %d", req.Method, req.URL.Path, n)
				fmt.Fprintf(c, "HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
				<-reset
				_ = raw.(*net.TCPConn).SetLinger(0)
			}()
		}
	}()
	return ln.Addr().(*net.TCPAddr).Port, conns, reset
}

// TestEdgeTunnelUpstreamEndedIdle: through a tunnel, an upstream that
// drops a keep-alive connection after its answer ends the tunnel stream
// the edge keeps for the next request; the edge sees that end before it
// sends the next request there, so a POST, which is never sent twice,
// goes on a fresh stream and is answered, over HTTP/1.1 and HTTP/2
// alike, instead of failing with 502; so does one in TLS (a claim with
// ssl: true), where the look into what TLS holds sees the reset too and
// the stream's look comes after it. (transport's TestStreamSpoke has the
// stream's look see a clean end, a FIN, and on a stream path bytes sent
// unasked.)
//
// The drop is a reset, which A's side of the connection answers by
// resetting the stream and closing the connection, which its server's
// counters show; a request to another domain of A's then crosses the
// same peer connection and back, and B handles a peer connection's
// packets in order: B has the stream's reset before the POST.
func TestEdgeTunnelUpstreamEndedIdle(t *testing.T) {
	nodes := newNetwork(t, 2)
	a, b := nodes[0], nodes[1]
	keep := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "kept") }))
	t.Cleanup(keep.Close)
	_, keptURL := tunnelServerURL(t, a, fmt.Sprintf(`{"name":"kept","port":%d,"domain":"kept.p2p"}`, keep.Listener.Addr().(*net.TCPAddr).Port))
	urls := map[string]string{"kept.p2p": keptURL}
	// The upstreams that drop their connections: one in plain HTTP, one
	// in TLS (a claim with ssl: true; a leaf of A's CA, which the edge
	// does not check).
	leaf, err := a.CA().Certificate("ending-tls.p2p", netip.Addr{})
	if err != nil {
		t.Fatal(err)
	}
	type ending struct {
		domain string
		id     string
		conns  *atomic.Int64
		reset  chan struct{}
	}
	var endings []*ending
	for _, tc := range []struct {
		domain string
		cert   *tls.Certificate
	}{{"ending.p2p", nil}, {"ending-tls.p2p", leaf}} {
		port, conns, reset := resettingBackend(t, tc.cert)
		e := &ending{domain: tc.domain, conns: conns, reset: reset}
		name := strings.TrimSuffix(tc.domain, ".p2p")
		if tc.cert == nil {
			e.id, urls[tc.domain] = tunnelServerURL(t, a, fmt.Sprintf(`{"name":%q,"port":%d,"domain":%q}`, name, port, tc.domain))
		} else {
			e.id, urls[tc.domain] = tunnelServerURL(t, a, fmt.Sprintf(`{"name":%q,"port":%d}`, name, port))
			mustJSON(t, "POST", "http://"+a.AdminAddr()+"/api/add-domain", `{"domain":"`+tc.domain+`","hash":"`+urls[tc.domain]+`","ssl":true}`, 200, nil)
		}
		endings = append(endings, e)
	}
	httpAddr, httpsAddr := b.EdgeAddrs()
	for d, url := range urls {
		testutil.Eventually(t, 20*time.Second, func() error {
			if cs := consensusOn(t, b, d); cs.Status != "resolved" || cs.Hash == nil || *cs.Hash != url {
				return fmt.Errorf("%s on B: %+v", d, cs)
			}
			return nil
		})
	}
	// dropped resets e's backend's connection and waits until A has
	// ended its side.
	dropped := func(e *ending) {
		t.Helper()
		e.reset <- struct{}{}
		testutil.Eventually(t, 10*time.Second, func() error {
			var ss []messages.TunnelServer
			mustJSON(t, "GET", "http://"+a.AdminAddr()+"/api/tunnel-servers", "", 200, &ss)
			for _, s := range ss {
				if s.ID == e.id && s.Info.ConnectionsOpen != 0 {
					return fmt.Errorf("%d connections open on A for %s", s.Info.ConnectionsOpen, e.domain)
				}
			}
			return nil
		})
	}
	for name, c := range map[string]*http.Client{
		"HTTP/1.1": edgeClient(httpAddr, nil),
		"HTTP/2":   h2Client(httpsAddr, rootPool(t, b)),
	} {
		scheme := "http"
		if name == "HTTP/2" {
			scheme = "https"
		}
		do := func(method, url, want string) {
			t.Helper()
			req, _ := http.NewRequest(method, url, strings.NewReader("form=1"))
			resp, err := c.Do(req)
			if err != nil {
				t.Fatalf("%s %s %s: %v", name, method, url, err)
			}
			got, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			if err != nil || resp.StatusCode != 200 || string(got) != want {
				t.Fatalf("%s %s %s: %d %q %v, want 200 %q", name, method, url, resp.StatusCode, got, err, want)
			}
		}
		waitServed(t, c, scheme+"://kept.p2p/")
		for _, e := range endings {
			waitServed(t, c, scheme+"://"+e.domain+"/")
			dropped(e)
			for i := range 3 {
				before := e.conns.Load()
				do("GET", fmt.Sprintf("%s://%s/get-%d", scheme, e.domain, i), fmt.Sprintf("GET /get-%d 6", i))
				dropped(e)
				do("GET", scheme+"://kept.p2p/", "kept")
				do("POST", fmt.Sprintf("%s://%s/post-%d", scheme, e.domain, i), fmt.Sprintf("POST /post-%d 6", i))
				dropped(e)
				if n := e.conns.Load() - before; n != 2 {
					t.Fatalf("%s %s: %d upstream connections for two requests, want 2", name, e.domain, n)
				}
			}
		}
	}
}
