package proxy

import (
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/quic-go/quic-go"
	"github.com/quic-go/quic-go/http3"
)

// A client that opens HTTP/3 streams and never sends their heads (or
// sends part of a HEADERS frame) does not hold them, or its connection,
// for good while it keeps the connection alive with PINGs: with no
// request running for the idle and read timeouts, the connection is
// closed (H3_NO_ERROR) and counted. A connection with a request running
// is kept whatever other streams it holds, and one idle with no stream
// open is closed by http3's idle timer, uncounted.
func TestH3StreamsWithoutHeadsEnd(t *testing.T) {
	release := make(chan struct{})
	held := make(chan struct{}, 1)
	up := serveUpstream(t, false, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/hold" {
			held <- struct{}{}
			<-release
		}
		_, _ = io.WriteString(w, "ok")
	})
	const idle, read = time.Second, 500 * time.Millisecond
	e := startTestEdge(t, map[string]string{"site.p2p": up}, Deps{IdleTimeout: idle, ReadTimeout: read})
	_, httpsAddr := e.s.Addrs()
	dial := func() *quic.Conn {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		c, err := quic.DialAddr(ctx, httpsAddr.String(), &tls.Config{RootCAs: e.s.d.CA.Pool(), ServerName: "site.p2p", NextProtos: []string{http3.NextProtoH3}},
			&quic.Config{KeepAlivePeriod: 100 * time.Millisecond, MaxIdleTimeout: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.CloseWithError(0, "") })
		return c
	}
	// Twenty streams, each with part of a HEADERS frame: its type, or
	// its type and the first byte of its length.
	stuck := func(c *quic.Conn) {
		t.Helper()
		for i := range 20 {
			s, err := c.OpenStream()
			if err != nil {
				t.Fatal(err)
			}
			if _, err := s.Write([]byte{0x01, 0x40}[:1+i%2]); err != nil {
				t.Fatal(err)
			}
		}
	}
	closedWith := func(c *quic.Conn, within time.Duration) error {
		select {
		case <-c.Context().Done():
		case <-time.After(within):
			return errors.New("still open")
		}
		var ae *quic.ApplicationError
		if err := context.Cause(c.Context()); !errors.As(err, &ae) || !ae.Remote || ae.ErrorCode != quic.ApplicationErrorCode(http3.ErrCodeNoError) {
			return err
		}
		return nil
	}

	// Streams with no head, and nothing else: closed, counted.
	c := dial()
	start := time.Now()
	stuck(c)
	if err := closedWith(c, 10*time.Second); err != nil {
		t.Fatalf("a connection holding only streams without heads: %v, want closed by the edge with H3_NO_ERROR", err)
	}
	if d := time.Since(start); d < idle {
		t.Fatalf("closed after %v, before its idle time (%v)", d, idle)
	}
	if n := e.s.Counters().H3Stuck; n != 1 {
		t.Fatalf("counted %d connections closed for streams without heads, want 1", n)
	}

	// The same streams beside a request that runs: kept while it does,
	// closed once it has ended and the connection has idled.
	c = dial()
	stuck(c)
	cc := (&http3.Transport{}).NewClientConn(c)
	got := make(chan error, 1)
	go func() {
		req, _ := http.NewRequest("GET", "https://site.p2p/hold", nil)
		resp, err := cc.RoundTrip(req)
		if err == nil {
			_, err = io.ReadAll(resp.Body)
			resp.Body.Close()
		}
		got <- err
	}()
	select {
	case <-held:
	case <-time.After(10 * time.Second):
		t.Fatal("the request never reached the upstream")
	}
	// Three times the limit with the request running: not closed.
	if err := closedWith(c, 3*(idle+read)); err == nil || err.Error() != "still open" {
		t.Fatalf("a connection with a request running: %v, want kept", err)
	}
	close(release)
	if err := <-got; err != nil {
		t.Fatalf("the request that ran: %v", err)
	}
	if err := closedWith(c, 10*time.Second); err != nil {
		t.Fatalf("once its request ended: %v, want closed by the edge with H3_NO_ERROR", err)
	}
	if n := e.s.Counters().H3Stuck; n != 2 {
		t.Fatalf("counted %d, want 2", n)
	}

	// A connection that served a request and holds no stream: http3's
	// own idle timer closes it, and it is not counted.
	c = dial()
	cc = (&http3.Transport{}).NewClientConn(c)
	req, _ := http.NewRequest("GET", "https://site.p2p/", nil)
	resp, err := cc.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	if b, err := io.ReadAll(resp.Body); err != nil || string(b) != "ok" {
		t.Fatalf("GET /: %q %v", b, err)
	}
	resp.Body.Close()
	if err := closedWith(c, 10*time.Second); err != nil {
		t.Fatalf("an idle connection: %v, want closed by the edge with H3_NO_ERROR", err)
	}
	if n := e.s.Counters().H3Stuck; n != 2 {
		t.Fatalf("an idle connection with no stream open was counted: %d, want 2", n)
	}
}
