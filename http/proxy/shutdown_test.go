package proxy

import (
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/quic-go/quic-go"
	"github.com/quic-go/quic-go/http3"

	"peerdns/internal/testutil"
)

// Shutdown lets the requests in flight finish, on every protocol
// (HTTP/1.1, HTTP/2 and HTTP/3 told by GOAWAY), while it takes no new
// connection on any listener; and it returns once they have.
func TestShutdownFinishesRequestsInFlight(t *testing.T) {
	release := make(chan struct{})
	var arrived atomic.Int64
	up := serveUpstream(t, false, func(w http.ResponseWriter, r *http.Request) {
		arrived.Add(1)
		<-release
		_, _ = io.WriteString(w, "done "+r.URL.Path)
	})
	e := startTestEdge(t, map[string]string{"sd.p2p": up}, Deps{})
	answers := getOnEveryProtocol(t, e, &arrived)

	stopped := make(chan struct{})
	go func() {
		e.s.Shutdown()
		close(stopped)
	}()
	// Every listener refuses new connections while the three requests
	// are still held.
	httpAddr, httpsAddr := e.s.Addrs()
	testutil.Eventually(t, 10*time.Second, func() error {
		for _, a := range []net.Addr{httpAddr, httpsAddr} {
			if c, err := net.DialTimeout("tcp", a.String(), time.Second); err == nil {
				c.Close()
				return errors.New("a TCP listener still accepts")
			}
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		conf := &tls.Config{RootCAs: e.s.d.CA.Pool(), ServerName: "sd.p2p", NextProtos: []string{http3.NextProtoH3}}
		if c, err := quic.DialAddr(ctx, httpsAddr.String(), conf, nil); err == nil {
			_ = c.CloseWithError(0, "")
			return errors.New("the HTTP/3 listener still accepts")
		}
		return nil
	})
	select {
	case <-stopped:
		t.Fatal("Shutdown returned with requests in flight")
	default:
	}
	close(release)
	want := map[string]string{"HTTP/1.1": "done /h1", "HTTP/2.0": "done /h2", "HTTP/3.0": "done /h3"}
	for range 3 {
		a := <-answers
		if a.err != nil {
			t.Fatalf("a request in flight at shutdown: %v", a.err)
		}
		if want[a.proto] != a.body {
			t.Fatalf("%s: %q, want %q", a.proto, a.body, want[a.proto])
		}
		delete(want, a.proto)
	}
	select {
	case <-stopped:
	case <-time.After(shutdownGrace + 5*time.Second):
		t.Fatal("Shutdown did not return after the requests in flight ended")
	}
}

// Answers that never end hold Shutdown for its grace and no longer.
func TestShutdownEndsAfterItsGrace(t *testing.T) {
	var arrived atomic.Int64
	up := serveUpstream(t, false, func(w http.ResponseWriter, r *http.Request) {
		arrived.Add(1)
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for {
			if _, err := io.WriteString(w, "more\n"); err != nil {
				return
			}
			w.(http.Flusher).Flush()
			select {
			case <-r.Context().Done():
				return
			case <-tick.C:
			}
		}
	})
	e := startTestEdge(t, map[string]string{"sd.p2p": up}, Deps{})
	_ = getOnEveryProtocol(t, e, &arrived)
	start := time.Now()
	e.s.Shutdown()
	if d := time.Since(start); d < shutdownGrace-time.Second || d > shutdownGrace+3*time.Second {
		t.Fatalf("Shutdown took %v with answers that never end, want its grace (%v)", d, shutdownGrace)
	}
}

type protoAnswer struct {
	proto, body string
	err         error
}

// getOnEveryProtocol sends GET /h1, /h2 and /h3 for sd.p2p to e in
// HTTP/1.1, HTTP/2 and HTTP/3, and returns once arrived counts all three
// at the upstream; the answers, read whole, come on the channel.
func getOnEveryProtocol(t *testing.T, e *h2Edge, arrived *atomic.Int64) <-chan protoAnswer {
	t.Helper()
	httpAddr, _ := e.s.Addrs()
	h1tr := &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "tcp", httpAddr.String())
		},
	}
	t.Cleanup(h1tr.CloseIdleConnections)
	h3tr := e.h3(t, "sd.p2p")
	answers := make(chan protoAnswer, 3)
	get := func(rt http.RoundTripper, url string) {
		c := &http.Client{Timeout: 30 * time.Second, Transport: rt}
		resp, err := c.Get(url)
		if err != nil {
			answers <- protoAnswer{err: err}
			return
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		answers <- protoAnswer{proto: resp.Proto, body: string(b), err: err}
	}
	go get(h1tr, "http://sd.p2p/h1")
	go get(e.c.Transport, "https://sd.p2p/h2")
	go get(h3tr, "https://sd.p2p/h3")
	testutil.Eventually(t, 10*time.Second, func() error {
		if arrived.Load() < 3 {
			return errors.New("not every request reached the upstream")
		}
		return nil
	})
	return answers
}
