package proxy

import (
	"context"
	"crypto/tls"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
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

// An HTTP/3 connection's upstream slots: a request takes one while one
// is free, waits while none is, goes on when one is given back, and is
// answered 499 (not sent upstream) when its client leaves while it
// waits. Requests of other protocols take none.
func TestH3SlotsBoundAConnection(t *testing.T) {
	slots := make(h3Slots, 2)
	req := func(ctx context.Context, major int) *http.Request {
		r := httptest.NewRequestWithContext(context.WithValue(ctx, h3ConnKey{}, &h3Conn{slots: slots}), "GET", "https://site.p2p/", nil)
		r.ProtoMajor = major
		return r
	}
	var held []h3Slots
	for range cap(slots) {
		sl, ok := h3Slot(httptest.NewRecorder(), req(context.Background(), 3))
		if !ok || sl == nil {
			t.Fatalf("a free slot not taken: %v %v", sl, ok)
		}
		held = append(held, sl)
	}
	if sl, ok := h3Slot(httptest.NewRecorder(), req(context.Background(), 2)); !ok || sl != nil {
		t.Fatalf("an HTTP/2 request took an HTTP/3 slot: %v %v", sl, ok)
	}

	ctx, cancel := context.WithCancel(context.Background())
	w := httptest.NewRecorder()
	left := make(chan bool)
	go func() {
		_, ok := h3Slot(w, req(ctx, 3))
		left <- ok
	}()
	waiting := make(chan bool)
	go func() {
		sl, ok := h3Slot(httptest.NewRecorder(), req(context.Background(), 3))
		sl.release()
		waiting <- ok
	}()
	select {
	case <-left:
		t.Fatal("a request went on with every slot taken")
	case <-waiting:
		t.Fatal("a request went on with every slot taken")
	case <-time.After(50 * time.Millisecond): // a wait that must not end: nothing to poll for
	}
	cancel()
	if ok := <-left; ok || w.Code != 499 {
		t.Fatalf("a request whose client left while it waited: ok %v, status %d; want false, 499", ok, w.Code)
	}
	held[0].release()
	select {
	case ok := <-waiting:
		if !ok {
			t.Fatal("the waiting request was refused a slot given back")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the waiting request did not take the slot given back")
	}
	if len(slots) != 1 {
		t.Fatalf("%d slots taken, want 1", len(slots))
	}
}

// retryCounter is a client's UDP socket that counts the QUIC Retry
// packets it reads (a long header of type Retry, QUIC version 1).
type retryCounter struct {
	net.PacketConn
	retries atomic.Int64
}

func (c *retryCounter) ReadFrom(b []byte) (int, net.Addr, error) {
	n, addr, err := c.PacketConn.ReadFrom(b)
	if n >= 5 && b[0]&0xf0 == 0xf0 && b[1] == 0 && b[2] == 0 && b[3] == 0 && b[4] == 1 {
		c.retries.Add(1)
	}
	return n, addr, err
}

// New HTTP/3 connections within the handshake burst are served at once;
// past it (the rate spent), each is sent a Retry, counted, and served
// once the client has answered it from its address.
func TestEdgeHTTP3RetriesPastTheHandshakeRate(t *testing.T) {
	up := serveUpstream(t, false, func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, "ok")
	})
	const burst, conns = 2, 5
	e := startTestEdge(t, map[string]string{"rt.p2p": up}, Deps{H3HandshakeRate: 1e-3, H3HandshakeBurst: burst})
	for i := range conns {
		pc, err := net.ListenPacket("udp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		rc := &retryCounter{PacketConn: pc}
		qt := &quic.Transport{Conn: rc}
		tr := e.h3Over(qt, "rt.p2p")
		c := &http.Client{Timeout: 10 * time.Second, Transport: tr}
		resp, err := c.Get("https://rt.p2p/")
		if err != nil {
			t.Fatalf("connection %d: %v", i, err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		tr.Close()
		qt.Close()
		pc.Close()
		if resp.StatusCode != 200 || resp.ProtoMajor != 3 || string(b) != "ok" {
			t.Fatalf("connection %d: %s %d %q", i, resp.Proto, resp.StatusCode, b)
		}
		if got, retried := rc.retries.Load(), i >= burst; (got > 0) != retried {
			t.Fatalf("connection %d read %d Retry packets; want a Retry: %v", i, got, retried)
		}
	}
	if got := e.s.Counters().H3Retries; got < conns-burst {
		t.Fatalf("counted %d Retries, want at least %d", got, conns-burst)
	}
}

// HTTP/3 handshakes are counted as the TCP ones are: one completed
// (result ok) for each QUIC connection served, one refused
// (no_certificate) for a name the node serves no site for.
func TestEdgeHTTP3HandshakesCounted(t *testing.T) {
	up := serveUpstream(t, false, func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "ok") })
	e := startTestEdge(t, map[string]string{"hs.p2p": up}, Deps{})
	c := &http.Client{Timeout: 10 * time.Second, Transport: e.h3(t, "hs.p2p")}
	resp, err := c.Get("https://hs.p2p/")
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || resp.ProtoMajor != 3 {
		t.Fatalf("GET over HTTP/3: %s %d", resp.Proto, resp.StatusCode)
	}
	_, httpsAddr := e.s.Addrs()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if c, err := quic.DialAddr(ctx, httpsAddr.String(), &tls.Config{ServerName: "nothing.example", InsecureSkipVerify: true, NextProtos: []string{http3.NextProtoH3}}, nil); err == nil {
		_ = c.CloseWithError(0, "")
		t.Fatal("a QUIC handshake for a name without a site succeeded")
	}
	if m := e.s.Metrics(); m.TLSHandshakes != 1 || m.TLSNoCertificate != 1 {
		t.Fatalf("handshakes counted: ok %d, no_certificate %d; want 1 and 1", m.TLSHandshakes, m.TLSNoCertificate)
	}
}
