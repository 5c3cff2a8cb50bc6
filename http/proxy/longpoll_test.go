package proxy

import (
	"bufio"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/quic-go/quic-go"
)

// longPoll is how long the upstream below holds each request before it
// answers: over half a minute, as a chat's or a bot API's long poll
// holds its request for 50 s and more (nginx waits 60 s for an
// upstream's answer).
const longPoll = 32 * time.Second

// TestEdgeWaitsOutALongPoll: with the edge's default timeouts, a long
// poll that answers after longPoll reaches its client whole, over
// HTTP/1.1 and HTTP/2 at once, as through nginx (proxy_read_timeout,
// 60 s). The upstream's answer is its own: one that came by the
// edge's error page would not carry it.
func TestEdgeWaitsOutALongPoll(t *testing.T) {
	t.Parallel()
	up := serveUpstream(t, false, func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-time.After(longPoll):
			w.Header().Set("X-Poll", "answered")
			_, _ = w.Write([]byte("events: none"))
		case <-r.Context().Done():
		}
	})
	e := startTestEdge(t, map[string]string{"poll.p2p": up}, Deps{})
	httpAddr, _ := e.s.Addrs()
	c2 := *e.c // HTTP/2, waiting as long as the poll's client would
	c2.Timeout = 2 * longPoll
	var wg sync.WaitGroup
	errs := make(chan error, 2)
	c := sendRaw(t, httpAddr.String(), "GET /events HTTP/1.1\r\nHost: poll.p2p\r\n\r\n")
	wg.Go(func() {
		_ = c.SetReadDeadline(time.Now().Add(2 * longPoll))
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		errs <- polled("HTTP/1.1", resp, err)
	})
	wg.Go(func() {
		resp, err := c2.Get("https://poll.p2p/events")
		errs <- polled("HTTP/2", resp, err)
	})
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
}

// polled checks a long poll's answer: the upstream's own, whole.
func polled(proto string, resp *http.Response, err error) error {
	if err != nil {
		return fmt.Errorf("%s: %w", proto, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK || resp.Header.Get("X-Poll") != "answered" || string(b) != "events: none" {
		return fmt.Errorf("%s: %d %v %q %v", proto, resp.StatusCode, resp.Header, b, err)
	}
	return nil
}

// TestEdgeWaitsOutALongPollHTTP3: a long poll over HTTP/3 is not cut by
// QUIC's idle timeout (the smaller of the edge's and the client's, 30 s
// for a quic-go client by default) when the client sends no keep-alive
// of its own, as a quic-go client given a quic.Config does not: the
// edge keeps the connection alive while it is open. Here the edge's
// IdleTimeout stands for the client's, a poll held past three of it.
// Once the poll has ended, the connection is closed after IdleTimeout
// all the same: the edge's PINGs keep no idle connection open.
func TestEdgeWaitsOutALongPollHTTP3(t *testing.T) {
	t.Parallel()
	const idle = time.Second
	up := serveUpstream(t, false, func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-time.After(3 * idle):
			w.Header().Set("X-Poll", "answered")
			_, _ = w.Write([]byte("events: none"))
		case <-r.Context().Done():
		}
	})
	e := startTestEdge(t, map[string]string{"poll.p2p": up}, Deps{IdleTimeout: idle})
	tr := e.h3(t, "poll.p2p")
	tr.QUICConfig = &quic.Config{} // no KeepAlivePeriod
	conns := make(chan *quic.Conn, 1)
	dial := tr.Dial
	tr.Dial = func(ctx context.Context, addr string, tc *tls.Config, qc *quic.Config) (*quic.Conn, error) {
		c, err := dial(ctx, addr, tc, qc)
		if err == nil {
			conns <- c
		}
		return c, err
	}
	resp, err := (&http.Client{Timeout: 10 * idle, Transport: tr}).Get("https://poll.p2p/events")
	if err := polled("HTTP/3", resp, err); err != nil {
		t.Fatal(err)
	}
	select {
	case <-(<-conns).Context().Done():
	case <-time.After(10 * idle):
		t.Fatalf("the connection was still open %v after its last request, IdleTimeout %v", 10*idle, idle)
	}
}
