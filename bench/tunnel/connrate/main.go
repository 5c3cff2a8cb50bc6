// Command connrate is the small TCP client and echo server that
// bench/tunnel/compare.sh uses to measure a tunnel beyond bulk throughput:
// connections per second and the latency of a small request.
//
//	connrate echo  -addr 127.0.0.1:0                 # echo server; prints "echo listening on ADDR"
//	connrate conn  -addr A -d 5s -c 8                # open, 1-byte echo, close, in a loop
//	connrate rr    -addr A -d 5s -size 64            # request/response on one connection
//	connrate probe -addr A -timeout 30s              # wait until one 1-byte echo succeeds
//	connrate ports -n 4                              # print N free loopback TCP ports
//
// conn and rr print one JSON line: {"ops", "seconds", "rate", "errors",
// "p50_us", "p99_us", "max_us"}. Every run stops by itself after -d.
// Only loopback addresses are accepted.
package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"slices"
	"sync"
	"time"
)

func main() {
	if len(os.Args) < 2 {
		usage()
	}
	mode := os.Args[1]
	fs := flag.NewFlagSet(mode, flag.ExitOnError)
	addr := fs.String("addr", "127.0.0.1:0", "address to serve (echo) or to dial")
	dur := fs.Duration("d", 5*time.Second, "how long to run (conn, rr)")
	conc := fs.Int("c", 8, "concurrent workers (conn)")
	size := fs.Int("size", 64, "request and response size in bytes (rr)")
	timeout := fs.Duration("timeout", 30*time.Second, "deadline (probe)")
	n := fs.Int("n", 1, "how many ports (ports)")
	_ = fs.Parse(os.Args[2:])

	if mode != "ports" {
		if err := loopbackOnly(*addr); err != nil {
			fatal(err)
		}
	}
	switch mode {
	case "echo":
		echo(*addr)
	case "conn":
		emit(connLoop(*addr, *dur, *conc))
	case "rr":
		emit(rrLoop(*addr, *dur, *size))
	case "probe":
		probe(*addr, *timeout)
	case "ports":
		ports(*n)
	default:
		usage()
	}
}

func usage() {
	fmt.Fprintln(os.Stderr, "usage: connrate echo|conn|rr|probe|ports [flags]")
	os.Exit(2)
}

func fatal(err error) {
	fmt.Fprintln(os.Stderr, "connrate:", err)
	os.Exit(1)
}

// loopbackOnly refuses any target that is not a loopback address: this
// tool is a load generator and must never aim at another machine.
func loopbackOnly(addr string) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return err
	}
	if host == "localhost" {
		return nil
	}
	ip := net.ParseIP(host)
	if ip == nil || !ip.IsLoopback() {
		return fmt.Errorf("%s: only loopback addresses are allowed", addr)
	}
	return nil
}

func echo(addr string) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		fatal(err)
	}
	fmt.Fprintf(os.Stderr, "echo listening on %s\n", ln.Addr())
	for {
		c, err := ln.Accept()
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			fatal(err)
		}
		go func() {
			defer c.Close()
			_, _ = io.Copy(c, c)
		}()
	}
}

type result struct {
	Ops     int     `json:"ops"`
	Seconds float64 `json:"seconds"`
	Rate    float64 `json:"rate"`
	Errors  int     `json:"errors"`
	FirstEr string  `json:"first_error,omitempty"`
	P50us   float64 `json:"p50_us"`
	P99us   float64 `json:"p99_us"`
	MaxUs   float64 `json:"max_us"`
}

func emit(r result) {
	b, _ := json.Marshal(r)
	fmt.Println(string(b))
}

func summarize(lat []time.Duration, errs int, firstErr error, elapsed time.Duration) result {
	r := result{Ops: len(lat), Seconds: elapsed.Seconds(), Errors: errs}
	if firstErr != nil {
		r.FirstEr = firstErr.Error()
	}
	if elapsed > 0 {
		r.Rate = float64(len(lat)) / elapsed.Seconds()
	}
	if len(lat) > 0 {
		slices.Sort(lat)
		pct := func(p float64) float64 {
			i := int(p * float64(len(lat)-1))
			return float64(lat[i].Nanoseconds()) / 1e3
		}
		r.P50us, r.P99us = pct(0.50), pct(0.99)
		r.MaxUs = float64(lat[len(lat)-1].Nanoseconds()) / 1e3
	}
	return r
}

// oneConn dials, sends one byte, reads it back and closes.
func oneConn(addr string) error {
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		return err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	var b [1]byte
	b[0] = 'x'
	if _, err := c.Write(b[:]); err != nil {
		return err
	}
	if _, err := io.ReadFull(c, b[:]); err != nil {
		return err
	}
	return nil
}

// connLoop runs conc workers that each open, echo one byte and close,
// until d has passed; the latency of each is connect + echo.
func connLoop(addr string, d time.Duration, conc int) result {
	var (
		mu       sync.Mutex
		lat      []time.Duration
		errs     int
		firstErr error
		wg       sync.WaitGroup
	)
	start := time.Now()
	end := start.Add(d)
	for range conc {
		wg.Add(1)
		go func() {
			defer wg.Done()
			mine := make([]time.Duration, 0, 1<<14)
			var e int
			var fe error
			for time.Now().Before(end) {
				t := time.Now()
				if err := oneConn(addr); err != nil {
					e++
					if fe == nil {
						fe = err
					}
					time.Sleep(time.Millisecond) // do not spin on a refused port
					continue
				}
				mine = append(mine, time.Since(t))
			}
			mu.Lock()
			lat = append(lat, mine...)
			errs += e
			if firstErr == nil {
				firstErr = fe
			}
			mu.Unlock()
		}()
	}
	wg.Wait()
	return summarize(lat, errs, firstErr, time.Since(start))
}

// rrLoop sends size bytes and reads size bytes back on one connection,
// one request at a time, until d has passed.
func rrLoop(addr string, d time.Duration, size int) result {
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		return summarize(nil, 1, err, 0)
	}
	defer c.Close()
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.SetNoDelay(true)
	}
	req := make([]byte, size)
	for i := range req {
		req[i] = byte(i)
	}
	resp := make([]byte, size)
	lat := make([]time.Duration, 0, 1<<16)
	start := time.Now()
	end := start.Add(d)
	for time.Now().Before(end) {
		_ = c.SetDeadline(time.Now().Add(5 * time.Second))
		t := time.Now()
		if _, err := c.Write(req); err != nil {
			return summarize(lat, 1, err, time.Since(start))
		}
		if _, err := io.ReadFull(c, resp); err != nil {
			return summarize(lat, 1, err, time.Since(start))
		}
		lat = append(lat, time.Since(t))
	}
	return summarize(lat, 0, nil, time.Since(start))
}

// probe waits until a 1-byte echo through addr succeeds.
func probe(addr string, timeout time.Duration) {
	deadline := time.Now().Add(timeout)
	var last error
	for time.Now().Before(deadline) {
		if last = oneConn(addr); last == nil {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	fatal(fmt.Errorf("no echo through %s within %s: %v", addr, timeout, last))
}

// ports prints n distinct free loopback TCP ports, all held open until
// every one is chosen so none repeats.
func ports(n int) {
	var lns []net.Listener
	for range n {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			fatal(err)
		}
		lns = append(lns, ln)
	}
	for _, ln := range lns {
		fmt.Println(ln.Addr().(*net.TCPAddr).Port)
		ln.Close()
	}
}
