// Package idle measures the edge proxy of the real binary: memory per
// idle keep-alive connection, TLS handshakes per second, and QUIC
// (HTTP/3) handshakes per second with their CPU and Retries.
package idle

import (
	"bufio"
	"context"
	"crypto/tls"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/quic-go/quic-go"
	"github.com/quic-go/quic-go/http3"

	"peerdns/bench/procstat"
	"peerdns/bench/promtext"
	"peerdns/http/proxy"
)

func startNode(b *testing.B) (*exec.Cmd, map[string]string) {
	b.Helper()
	dir := b.TempDir()
	bin := filepath.Join(dir, "peerdns")
	if out, err := exec.Command("go", "build", "-o", bin, "peerdns/cmd/peerdns").CombinedOutput(); err != nil {
		b.Fatalf("build: %v %s", err, out)
	}
	cmd := exec.Command(bin, "node", "--data", filepath.Join(dir, "data"), "--admin-addr", "127.0.0.1:0", "--dns-addr", "127.0.0.1:0",
		"--http-addr", "127.0.0.1:0", "--https-addr", "127.0.0.1:0", "--p2p-addr", "127.0.0.1:0", "--upstream", "127.0.0.1:9")
	stderr, _ := cmd.StderrPipe()
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = cmd.Process.Signal(os.Interrupt); _ = cmd.Wait() })
	re := regexp.MustCompile(`^(\S+) listening on (\S+)`)
	addrs := map[string]string{}
	sc := bufio.NewScanner(stderr)
	for sc.Scan() {
		if m := re.FindStringSubmatch(sc.Text()); m != nil {
			addrs[m[1]] = m[2]
			if m[1] == "https" {
				break
			}
		}
	}
	go func() {
		for sc.Scan() {
		}
	}()
	return cmd, addrs
}

// BenchmarkIdleKeepAlive: IDLE_CONNS (4,000) connections each send one
// keep-alive request for the admin domain's health and stay open; the
// node's RSS before and after, per connection. At most the edge's
// connection cap (proxy.DefaultMaxConns, 4,096): past it a connection
// waits unanswered until another closes.
func BenchmarkIdleKeepAlive(b *testing.B) {
	n := 4000
	if v, err := strconv.Atoi(os.Getenv("IDLE_CONNS")); err == nil && v > 0 {
		n = v
	}
	if n > proxy.DefaultMaxConns {
		b.Fatalf("IDLE_CONNS %d is over the edge's connection cap (%d)", n, proxy.DefaultMaxConns)
	}
	var lim syscall.Rlimit
	if syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim) == nil && lim.Cur < uint64(n+1000) {
		b.Skipf("open files limit %d is below %d connections (raise it with ulimit -n)", lim.Cur, n+1000)
	}
	cmd, addrs := startNode(b)
	pid := cmd.Process.Pid
	before := procstat.RSSKB(pid)
	conns := make([]net.Conn, 0, n)
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	req := "GET /api/health HTTP/1.1\r\nHost: admin.p2p\r\n\r\n"
	for i := 0; i < n; i++ {
		c, err := net.Dial("tcp", addrs["http"])
		if err != nil {
			b.Fatalf("connection %d: %v", i, err)
		}
		if _, err := c.Write([]byte(req)); err != nil {
			b.Fatal(err)
		}
		_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
		br := bufio.NewReader(c)
		status, err := br.ReadString('\n')
		if err != nil || !strings.Contains(status, " 200 ") {
			b.Fatalf("connection %d: %q %v", i, status, err)
		}
		conns = append(conns, c) // the rest of the response stays unread: the connection idles
	}
	after := procstat.RSSKB(pid)
	b.ReportMetric(float64(after-before)*1024/float64(n), "B/conn")
	b.ReportMetric(float64(after)/1024, "MiB_rss")
}

// BenchmarkTLSHandshakes: new TLS connections to the admin domain (its
// leaf cached after the first) from 8 goroutines for 5 s.
func BenchmarkTLSHandshakes(b *testing.B) {
	_, addrs := startNode(b)
	cfg := &tls.Config{ServerName: "admin.p2p", InsecureSkipVerify: true} //nolint:gosec // counts handshakes only
	c, err := tls.Dial("tcp", addrs["https"], cfg)                        // the first issues the leaf
	if err != nil {
		b.Fatal(err)
	}
	c.Close()
	var done atomic.Int64
	stop := time.Now().Add(5 * time.Second)
	var wg sync.WaitGroup
	b.ResetTimer()
	for w := 0; w < 8; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(stop) {
				c, err := tls.Dial("tcp", addrs["https"], cfg)
				if err != nil {
					continue
				}
				c.Close()
				done.Add(1)
			}
		}()
	}
	wg.Wait()
	b.ReportMetric(float64(done.Load())/5, "handshakes/s")
}

// BenchmarkQUICHandshakes: new QUIC connections (ALPN h3) to the edge's
// HTTPS port from 8 goroutines for 5 s, each closed once its handshake
// is done; the node's CPU per handshake, and the Retry packets it sent
// (its handshake rate: http/proxy/h3.go) per handshake. The rate of
// handshakes is the edge's default one plus the connections that
// answered a Retry, so the CPU figure is of handshakes, Retries among
// them.
func BenchmarkQUICHandshakes(b *testing.B) {
	cmd, addrs := startNode(b)
	cfg := &tls.Config{ServerName: "admin.p2p", InsecureSkipVerify: true, NextProtos: []string{http3.NextProtoH3}} //nolint:gosec // counts handshakes only
	dial := func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		c, err := quic.DialAddr(ctx, addrs["https"], cfg, nil)
		if err != nil {
			return err
		}
		return c.CloseWithError(0, "")
	}
	if err := dial(); err != nil { // the first issues the leaf
		b.Fatal(err)
	}
	retries0 := edgeRetries(b, addrs["admin"])
	cpu0, _ := procstat.CPUSeconds(cmd.Process.Pid)
	var done, failed atomic.Int64
	stop := time.Now().Add(5 * time.Second)
	var wg sync.WaitGroup
	b.ResetTimer()
	for range 8 {
		wg.Go(func() {
			for time.Now().Before(stop) {
				if dial() != nil {
					failed.Add(1)
					continue
				}
				done.Add(1)
			}
		})
	}
	wg.Wait()
	cpu1, _ := procstat.CPUSeconds(cmd.Process.Pid)
	n := float64(done.Load())
	b.ReportMetric(n/5, "handshakes/s")
	b.ReportMetric((cpu1-cpu0)*1e6/n, "node-cpu-µs/handshake")
	b.ReportMetric(float64(edgeRetries(b, addrs["admin"])-retries0)/n, "retries/handshake")
	b.ReportMetric(float64(failed.Load()), "failed")
}

// edgeRetries reads peerdns_edge_http3_retries_total from the node's
// /metrics.
func edgeRetries(b *testing.B, admin string) int64 {
	b.Helper()
	const name = "peerdns_edge_http3_retries_total"
	v, err := promtext.Get(http.DefaultClient, admin, name)
	if err != nil {
		b.Fatal(err)
	}
	n, ok := v[name]
	if !ok {
		b.Fatalf("/metrics has no %s", name)
	}
	return int64(n)
}
