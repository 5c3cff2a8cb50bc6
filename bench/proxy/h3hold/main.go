// Command h3hold measures what request bodies the edge holds for HTTP/3
// clients whose upstream stops reading (bench/proxy/h3hold.sh).
//
// With -upstream it is the upstream: a TCP server that reads the first
// -first bytes of each connection, then holds it without reading more;
// it prints its port, then every five seconds (on stderr) what it read.
// Otherwise it is the client: -conns QUIC connections to the edge (each
// its own http3.Transport), -streams POSTs on each, whose bodies never
// end, for -dur; it prints what its bodies gave the client every five
// seconds and at the end. Once the upstream stops reading, the bodies
// wait in the kernel's socket buffers and then in what the edge took
// from QUIC: its receive windows bound the latter.
//
// Bounded in time: the client exits after -dur; the upstream when its
// listener fails or it is killed. Certificates are checked against
// -ca (the node's root), with SNI and Host -host.
package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/quic-go/quic-go/http3"
)

// endless is a body that never ends, counting what it gives.
type endless struct{ given *atomic.Int64 }

func (e endless) Read(p []byte) (int, error) {
	e.given.Add(int64(len(p)))
	return len(p), nil
}

func main() {
	up := flag.Bool("upstream", false, "be the upstream")
	first := flag.Int64("first", 1<<20, "upstream: bytes read from each connection before it stops reading")
	addr := flag.String("addr", "", "client: the edge's HTTPS address")
	ca := flag.String("ca", "", "client: the node's root certificate (PEM)")
	host := flag.String("host", "bench.p2p", "client: SNI and Host")
	conns := flag.Int("conns", 10, "client: QUIC connections")
	streams := flag.Int("streams", 8, "client: requests on each")
	dur := flag.Duration("dur", 30*time.Second, "client: how long")
	flag.Parse()
	if *up {
		upstream(*first)
		return
	}
	pem, err := os.ReadFile(*ca)
	if err != nil {
		log.Fatal(err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		log.Fatalf("%s: no certificate", *ca)
	}
	var given atomic.Int64
	ctx, cancel := context.WithTimeout(context.Background(), *dur)
	defer cancel()
	for range *conns {
		cl := &http.Client{Transport: &http3.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, ServerName: *host}}}
		for range *streams {
			go func() {
				req, err := http.NewRequestWithContext(ctx, "POST", "https://"+*addr+"/upload", io.NopCloser(endless{&given}))
				if err != nil {
					log.Fatal(err)
				}
				req.Host = *host
				if resp, err := cl.Do(req); err == nil {
					resp.Body.Close()
				}
			}()
		}
	}
	tick := time.NewTicker(5 * time.Second)
	defer tick.Stop()
	for {
		select {
		case <-tick.C:
			fmt.Printf("bodies gave %d MiB\n", given.Load()>>20)
		case <-ctx.Done():
			fmt.Printf("bodies gave %d MiB at the end\n", given.Load()>>20)
			return
		}
	}
}

// upstream serves until its listener fails: each connection is read for
// its first bytes, then held unread until the process ends.
func upstream(first int64) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(ln.Addr().(*net.TCPAddr).Port)
	var (
		read atomic.Int64
		mu   sync.Mutex
		held []net.Conn // kept reachable: a lost net.Conn is closed by its finalizer
	)
	go func() {
		for range time.Tick(5 * time.Second) {
			mu.Lock()
			n := len(held)
			mu.Unlock()
			fmt.Fprintf(os.Stderr, "upstream read %d MiB on %d connections\n", read.Load()>>20, n)
		}
	}()
	for {
		c, err := ln.Accept()
		if err != nil {
			log.Fatal(err)
		}
		mu.Lock()
		held = append(held, c)
		mu.Unlock()
		go func() {
			n, _ := io.CopyN(io.Discard, c, first)
			read.Add(n)
		}()
	}
}
