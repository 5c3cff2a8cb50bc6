//go:build linux

package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fasthttp/websocket"
	"github.com/miekg/dns"
	"github.com/quic-go/quic-go"
	"github.com/quic-go/quic-go/http3"
)

// lat collects latencies of one kind for the current minute.
type lat struct {
	mu   sync.Mutex
	d    []time.Duration
	errs int
	last string // the last error, for the log
}

func (l *lat) add(d time.Duration, err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err != nil {
		l.errs++
		l.last = err.Error()
		return
	}
	l.d = append(l.d, d)
}

// minute is one minute's figures of one kind of request.
type minute struct {
	p50, p99 time.Duration
	n, errs  int
	lastErr  string
}

// take returns this minute's figures and starts a new minute.
func (l *lat) take() minute {
	l.mu.Lock()
	d, errs, last := l.d, l.errs, l.last
	l.d, l.errs, l.last = nil, 0, ""
	l.mu.Unlock()
	m := minute{n: len(d), errs: errs, lastErr: last}
	if len(d) == 0 {
		return m
	}
	sort.Slice(d, func(i, j int) bool { return d[i] < d[j] })
	m.p50, m.p99 = d[len(d)/2], d[len(d)*99/100]
	return m
}

// every calls f(i) each period until ctx ends; f runs on the ticker's
// goroutine, so a slow call delays the next one rather than piling up
// (the load is offered at most at the stated rate, never above it).
func every(ctx context.Context, wg *sync.WaitGroup, period time.Duration, f func(i int)) {
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(period)
		defer t.Stop()
		for i := 0; ; i++ {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				f(i)
			}
		}
	}()
}

// dnsLoad sends one query per period per worker to addr, alternating
// between names, and records each answer's latency in l.
func dnsLoad(ctx context.Context, wg *sync.WaitGroup, addr string, names []string, period time.Duration, workers int, l *lat) {
	dc := &dns.Client{Timeout: 2 * time.Second}
	for w := 0; w < workers; w++ {
		every(ctx, wg, period, func(i int) {
			m := new(dns.Msg).SetQuestion(names[i%len(names)], dns.TypeA)
			t0 := time.Now()
			r, _, err := dc.ExchangeContext(ctx, m, addr)
			if ctx.Err() != nil {
				return
			}
			if err == nil && (r.Rcode != dns.RcodeSuccess || len(r.Answer) == 0) {
				err = fmt.Errorf("%s: rcode %s, %d answers", names[i%len(names)], dns.RcodeToString[r.Rcode], len(r.Answer))
			}
			l.add(time.Since(t0), err)
		})
	}
}

// rootPool is a pool holding the certificates of the PEM file at path
// (a node's root).
func rootPool(path string) (*x509.CertPool, error) {
	pem, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("%s holds no certificate", path)
	}
	return pool, nil
}

// edgeGetter fetches URLs from a node's edge at httpsAddr (whatever the
// URL's host), trusting roots, in proto: "http/1.1", "h2" (TLS with ALPN
// h2) or "h3" (QUIC on the same port), and checks the answer came back
// whole and in proto. keep: its connections are kept (as browsers keep
// them); else each request opens a connection of its own (handshake,
// certificate lookup, a place under the edge's connection cap, a new
// tunnel stream) and closes it once answered.
func edgeGetter(httpsAddr string, roots *x509.CertPool, proto string, keep bool) func(ctx context.Context, url, want string) error {
	transport := func() (http.RoundTripper, func()) {
		conf := &tls.Config{RootCAs: roots}
		if proto == "h3" {
			t := &http3.Transport{TLSClientConfig: conf,
				Dial: func(ctx context.Context, _ string, tc *tls.Config, qc *quic.Config) (*quic.Conn, error) {
					return quic.DialAddrEarly(ctx, httpsAddr, tc, qc)
				}}
			return t, func() { t.Close() }
		}
		t := &http.Transport{
			DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
				return (&net.Dialer{}).DialContext(ctx, "tcp", httpsAddr)
			},
			TLSClientConfig: conf, MaxIdleConnsPerHost: 4, ForceAttemptHTTP2: proto == "h2",
		}
		return t, t.CloseIdleConnections
	}
	major := map[string]int{"http/1.1": 1, "h2": 2, "h3": 3}[proto]
	get := func(ctx context.Context, rt http.RoundTripper, url, want string) error {
		resp, err := (&http.Client{Timeout: 5 * time.Second, Transport: rt}).Do(mustRequest(ctx, url))
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		switch {
		case err != nil:
			return err
		case resp.StatusCode != 200 || !strings.HasPrefix(string(b), want):
			return fmt.Errorf("status %d: %.80q", resp.StatusCode, b)
		case resp.ProtoMajor != major:
			return fmt.Errorf("answered in %s, not %s", resp.Proto, proto)
		}
		return nil
	}
	if keep {
		rt, _ := transport()
		return func(ctx context.Context, url, want string) error { return get(ctx, rt, url, want) }
	}
	return func(ctx context.Context, url, want string) error {
		rt, done := transport()
		defer done()
		return get(ctx, rt, url, want)
	}
}

func mustRequest(ctx context.Context, url string) *http.Request {
	req, err := http.NewRequestWithContext(ctx, "GET", url, nil)
	if err != nil {
		panic(err) // the soak's own URL
	}
	return req
}

// backend is the service exposed on node A through its tunnel server: a
// small HTTP page for the edge requests and a TCP sink for the bulk
// stream, counting what reaches it.
type backend struct {
	web, sink net.Listener
	srv       *http.Server
	received  atomic.Int64
	wg        sync.WaitGroup
	mu        sync.Mutex
	conns     map[net.Conn]bool
}

// page is what the backend answers on every path (about 1 KiB: a small
// page, not an empty body).
var page = "soak backend\n" + strings.Repeat("0123456789abcdef", 64)

func startBackend() (*backend, error) {
	b := &backend{conns: map[net.Conn]bool{}}
	var err error
	if b.web, err = net.Listen("tcp", "127.0.0.1:0"); err != nil {
		return nil, err
	}
	if b.sink, err = net.Listen("tcp", "127.0.0.1:0"); err != nil {
		b.web.Close()
		return nil, err
	}
	b.srv = &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, page)
	}), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = b.srv.Serve(b.web) }()
	b.wg.Add(1)
	go func() {
		defer b.wg.Done()
		for {
			c, err := b.sink.Accept()
			if err != nil {
				return
			}
			b.mu.Lock()
			b.conns[c] = true
			b.mu.Unlock()
			b.wg.Add(1)
			go func() {
				defer b.wg.Done()
				buf := make([]byte, 64<<10)
				for {
					n, err := c.Read(buf)
					b.received.Add(int64(n))
					if err != nil {
						break
					}
				}
				c.Close()
				b.mu.Lock()
				delete(b.conns, c)
				b.mu.Unlock()
			}()
		}
	}()
	return b, nil
}

func (b *backend) port(l net.Listener) int { return l.Addr().(*net.TCPAddr).Port }

func (b *backend) close() {
	b.srv.Close()
	b.sink.Close()
	b.mu.Lock()
	for c := range b.conns {
		c.Close()
	}
	b.mu.Unlock()
	b.wg.Wait()
}

// bulk writes to addr (the tunnel client's local address) at rate
// bytes/s in 16 KiB writes, on one connection that it replaces every
// reconnect (so streams are opened and closed over the hour too). Write
// errors are counted and the connection redialled.
func bulk(ctx context.Context, wg *sync.WaitGroup, addr string, rate int, reconnect time.Duration, errs *atomic.Int64) {
	const chunk = 16 << 10
	wg.Add(1)
	go func() {
		defer wg.Done()
		buf := make([]byte, chunk)
		for i := range buf {
			buf[i] = byte(i)
		}
		period := time.Duration(float64(time.Second) * chunk / float64(rate))
		t := time.NewTicker(period)
		defer t.Stop()
		var c net.Conn
		var since time.Time
		defer func() {
			if c != nil {
				c.Close()
			}
		}()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			if c != nil && time.Since(since) > reconnect {
				c.Close()
				c = nil
			}
			if c == nil {
				var err error
				if c, err = (&net.Dialer{Timeout: 5 * time.Second}).DialContext(ctx, "tcp", addr); err != nil {
					errs.Add(1)
					c = nil
					continue
				}
				since = time.Now()
			}
			_ = c.SetWriteDeadline(time.Now().Add(5 * time.Second))
			if _, err := c.Write(buf); err != nil {
				errs.Add(1)
				c.Close()
				c = nil
			}
		}
	}()
}

// wsSubscriber holds a /ws connection to admin subscribed to stats and
// counts the messages it reads; with churn > 0 it closes and redials
// after that long (a panel tab reloaded), else it stays for the run.
func wsSubscriber(ctx context.Context, wg *sync.WaitGroup, admin string, churn time.Duration, msgs, errs *atomic.Int64) {
	wg.Add(1)
	go func() {
		defer wg.Done()
		d := websocket.Dialer{HandshakeTimeout: 5 * time.Second}
		for ctx.Err() == nil {
			c, _, err := d.DialContext(ctx, "ws://"+admin+"/ws", nil)
			if err != nil {
				if ctx.Err() == nil {
					errs.Add(1)
				}
				select {
				case <-ctx.Done():
				case <-time.After(time.Second):
				}
				continue
			}
			end := make(chan struct{})
			go func() {
				// Closing the connection ends the read loop below, at the
				// end of the run or after churn.
				var t <-chan time.Time
				if churn > 0 {
					t = time.After(churn)
				}
				select {
				case <-ctx.Done():
				case <-t:
				case <-end:
				}
				c.Close()
			}()
			if err := c.WriteJSON(map[string]string{"type": "subscribe-stats"}); err != nil {
				errs.Add(1)
			}
			for {
				if _, _, err := c.ReadMessage(); err != nil {
					break
				}
				msgs.Add(1)
			}
			close(end)
		}
	}()
}

// getJSON GETs url into v.
func getJSON(c *http.Client, url string, v any) error {
	resp, err := c.Get(url)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode != 200 {
		return fmt.Errorf("GET %s: %d %.100s", url, resp.StatusCode, b)
	}
	if v == nil {
		return nil
	}
	return json.Unmarshal(b, v)
}

// goroutines is the node's goroutine count from its latest stats sample
// (GET /api/stats, process.goroutines), -1 when it cannot be read.
func goroutines(c *http.Client, admin string) int {
	var st struct {
		Process *struct{ Goroutines *int }
		Stats   *struct {
			Process *struct{ Goroutines *int }
		}
	}
	if err := getJSON(c, "http://"+admin+"/api/stats", &st); err != nil {
		return -1
	}
	switch {
	case st.Process != nil && st.Process.Goroutines != nil:
		return *st.Process.Goroutines
	case st.Stats != nil && st.Stats.Process != nil && st.Stats.Process.Goroutines != nil:
		return *st.Stats.Process.Goroutines
	}
	return -1
}
