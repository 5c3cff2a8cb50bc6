// Command h3load is a small HTTP/3 load client for the edge benchmarks
// (bench/proxy/h2.sh): Debian's h2load is built without HTTP/3, so this
// one measures the edge's HTTP/3 beside h2load's HTTP/2 figures.
//
// Like h2load -c C -m M -D secs it opens C QUIC connections (each its own
// quic-go http3.Transport, so one UDP socket and one connection each) and
// keeps M requests in flight on each, each request a stream, for the
// given duration after a warm-up. Every answer's body is read to its end.
// It prints one line: requests, failed, req/s, p50 and p99 latency of the
// requests finished inside the measured window.
//
// Bounded in time: requests still in flight at the end are cancelled and
// not counted. Certificates are not checked (the edge's leaf comes from
// the node's own CA); -connect-to dials another address than the URL's
// host, as h2load's --connect-to does, so the URL's host is the SNI and
// :authority that route the request.
package main

import (
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/quic-go/quic-go"
	"github.com/quic-go/quic-go/http3"
)

func main() {
	url := flag.String("url", "", "https URL to GET")
	conns := flag.Int("c", 8, "QUIC connections")
	streams := flag.Int("m", 10, "requests in flight per connection")
	dur := flag.Duration("d", 5*time.Second, "measured duration")
	warm := flag.Duration("warmup", time.Second, "warm-up before measuring (not counted)")
	connectTo := flag.String("connect-to", "", "host:port to dial instead of the URL's host")
	flag.Parse()
	if *url == "" || *conns < 1 || *streams < 1 || *dur <= 0 {
		fmt.Fprintln(os.Stderr, "usage: h3load -url https://host:port/path [-c 8] [-m 10] [-d 5s] [-warmup 1s] [-connect-to host:port]")
		os.Exit(2)
	}
	r, err := run(*url, *connectTo, *conns, *streams, *warm, *dur)
	if err != nil {
		fmt.Fprintln(os.Stderr, "h3load:", err)
		os.Exit(1)
	}
	fmt.Printf("h3load: %d requests, %d failed, %.0f req/s, p50 %s, p99 %s\n",
		r.ok, r.failed, float64(r.ok)/dur.Seconds(), r.p50, r.p99)
	if r.failed > 0 {
		fmt.Fprintln(os.Stderr, "h3load: first failure:", r.firstErr)
		os.Exit(1)
	}
}

type result struct {
	ok, failed int
	p50, p99   time.Duration
	firstErr   error
}

// worker is one stream slot: it sends requests one after another and
// keeps the latencies of those that finished inside [from, to).
type worker struct {
	lat      []time.Duration
	failed   int
	firstErr error
}

func run(url, connectTo string, conns, streams int, warm, dur time.Duration) (result, error) {
	tlsConf := &tls.Config{InsecureSkipVerify: true, NextProtos: []string{http3.NextProtoH3}} //nolint:gosec // benchmark of a node-CA leaf
	qconf := &quic.Config{MaxIncomingStreams: int64(streams) * 2}
	var trs []*http3.Transport
	var clients []*http.Client
	for range conns {
		tr := &http3.Transport{TLSClientConfig: tlsConf, QUICConfig: qconf}
		if connectTo != "" {
			tr.Dial = func(ctx context.Context, _ string, tc *tls.Config, qc *quic.Config) (*quic.Conn, error) {
				return quic.DialAddr(ctx, connectTo, tc, qc)
			}
		}
		trs = append(trs, tr)
		clients = append(clients, &http.Client{Transport: tr})
	}
	defer func() {
		for _, tr := range trs {
			tr.Close()
		}
	}()
	// One request per connection first: the handshakes are not measured
	// and a URL that does not answer 200 stops the run here.
	for _, c := range clients {
		if err := get(context.Background(), c, url); err != nil {
			return result{}, err
		}
	}
	start := time.Now()
	from, to := start.Add(warm), start.Add(warm+dur)
	ctx, cancel := context.WithDeadline(context.Background(), to)
	defer cancel()
	var wg sync.WaitGroup
	workers := make([]*worker, conns*streams)
	var stop atomic.Bool
	for i := range workers {
		w := &worker{}
		workers[i] = w
		c := clients[i%conns]
		wg.Add(1)
		go func() {
			defer wg.Done()
			for !stop.Load() {
				t0 := time.Now()
				err := get(ctx, c, url)
				t1 := time.Now()
				if t1.After(to) || ctx.Err() != nil {
					return
				}
				if t0.Before(from) {
					continue
				}
				if err != nil {
					w.failed++
					if w.firstErr == nil {
						w.firstErr = err
					}
					continue
				}
				w.lat = append(w.lat, t1.Sub(t0))
			}
		}()
	}
	<-ctx.Done()
	stop.Store(true)
	wg.Wait()
	var r result
	var all []time.Duration
	for _, w := range workers {
		all = append(all, w.lat...)
		r.failed += w.failed
		if r.firstErr == nil {
			r.firstErr = w.firstErr
		}
	}
	r.ok = len(all)
	if r.ok == 0 {
		return r, errors.New("no request finished in the measured window")
	}
	slices.Sort(all)
	r.p50 = all[len(all)/2]
	r.p99 = all[min(len(all)-1, len(all)*99/100)]
	return r, nil
}

// get fetches url and reads the body to its end; anything but 200 is an
// error.
func get(ctx context.Context, c *http.Client, url string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := c.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if _, err := io.Copy(io.Discard, resp.Body); err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s answered %s", url, resp.Status)
	}
	return nil
}
