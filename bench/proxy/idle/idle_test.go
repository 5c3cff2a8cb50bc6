// Package idle measures the edge proxy of the real binary: memory per
// idle keep-alive connection and TLS handshakes per second.
package idle

import (
	"bufio"
	"crypto/tls"
	"net"
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

	"peerdns/bench/procstat"
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

// BenchmarkIdleKeepAlive: IDLE_CONNS (10,000) connections each send one
// keep-alive request for the admin domain's health and stay open; the
// node's RSS before and after, per connection.
func BenchmarkIdleKeepAlive(b *testing.B) {
	n := 10000
	if v, err := strconv.Atoi(os.Getenv("IDLE_CONNS")); err == nil && v > 0 {
		n = v
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
