// Package ws benchmarks the node's WebSocket stats stream as shipped:
// the real `peerdns node` binary (built by the benchmark), N subscribers
// in this process, and the node's own CPU read from /proc.
package ws

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fasthttp/websocket"

	"peerdns/bench/procstat"
)

// BenchmarkStatsSubscribers: 1,000 WebSocket clients subscribed to stats
// (update-stats every second) for WS_SECONDS (default 30); reports the
// node's CPU as % of one core over that window, updates received per
// second and the node's RSS. Linux only (/proc).
func BenchmarkStatsSubscribers(b *testing.B) {
	subs := envInt("WS_SUBSCRIBERS", 1000)
	secs := envInt("WS_SECONDS", 30)
	dir := b.TempDir()
	bin := filepath.Join(dir, "peerdns")
	if out, err := exec.Command("go", "build", "-o", bin, "peerdns/cmd/peerdns").CombinedOutput(); err != nil {
		b.Fatalf("build: %v %s", err, out)
	}
	start := func() (*exec.Cmd, string) {
		cmd := exec.Command(bin, "node", "--data", filepath.Join(dir, "data"), "--admin-addr", "127.0.0.1:0", "--dns-addr", "127.0.0.1:0",
			"--http-addr", "127.0.0.1:0", "--https-addr", "127.0.0.1:0", "--p2p-addr", "127.0.0.1:0", "--upstream", "127.0.0.1:9")
		stderr, _ := cmd.StderrPipe()
		if err := cmd.Start(); err != nil {
			b.Fatal(err)
		}
		re := regexp.MustCompile(`^admin listening on (\S+)`)
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			if m := re.FindStringSubmatch(sc.Text()); m != nil {
				go func() {
					for sc.Scan() {
					}
				}()
				return cmd, m[1]
			}
		}
		b.Fatal("node did not start")
		return nil, ""
	}
	cmd, admin := start()
	// Allow the subscribers (WS_MAX_CLIENTS, applied at the next start).
	resp, err := http.Post("http://"+admin+"/api/update-settings", "application/json",
		strings.NewReader(fmt.Sprintf(`{"settings":{"WS_MAX_CLIENTS":%d}}`, subs+16)))
	if err != nil || resp.StatusCode != 200 {
		b.Fatalf("settings: %v %v", resp, err)
	}
	resp.Body.Close()
	_ = cmd.Process.Signal(os.Interrupt)
	_ = cmd.Wait()
	cmd, admin = start()
	defer func() { _ = cmd.Process.Signal(os.Interrupt); _ = cmd.Wait() }()

	var updates atomic.Int64
	var wg sync.WaitGroup
	conns := make([]*websocket.Conn, 0, subs)
	d := websocket.Dialer{HandshakeTimeout: 10 * time.Second}
	for i := 0; i < subs; i++ {
		c, _, err := d.Dial("ws://"+admin+"/ws", nil)
		if err != nil {
			b.Fatalf("subscriber %d: %v", i, err)
		}
		if err := c.WriteJSON(map[string]any{"type": "subscribe-stats", "minutes": 1}); err != nil {
			b.Fatal(err)
		}
		conns = append(conns, c)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				_, m, err := c.ReadMessage()
				if err != nil {
					return
				}
				var h struct{ Type string }
				if json.Unmarshal(m, &h) == nil && h.Type == "update-stats" {
					updates.Add(1)
				}
			}
		}()
	}
	// Measure once every subscriber has had its first update.
	deadline := time.Now().Add(30 * time.Second)
	for updates.Load() < int64(subs) {
		if time.Now().After(deadline) {
			b.Fatalf("only %d updates after 30 s", updates.Load())
		}
		time.Sleep(50 * time.Millisecond)
	}
	b.ResetTimer()
	cpu0, t0, u0 := cpuSeconds(b, cmd.Process.Pid), time.Now(), updates.Load()
	time.Sleep(time.Duration(secs) * time.Second) // the measurement window
	cpu1, t1, u1 := cpuSeconds(b, cmd.Process.Pid), time.Now(), updates.Load()
	b.StopTimer()
	el := t1.Sub(t0).Seconds()
	b.ReportMetric((cpu1-cpu0)*100/el, "%core")
	b.ReportMetric(float64(u1-u0)/el, "updates/s")
	b.ReportMetric(float64(procstat.RSSKB(cmd.Process.Pid))/1024, "MiB_rss")
	for _, c := range conns {
		c.Close()
	}
	wg.Wait()
}

func envInt(k string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(k)); err == nil && v > 0 {
		return v
	}
	return def
}

func cpuSeconds(b *testing.B, pid int) float64 {
	s, err := procstat.CPUSeconds(pid)
	if err != nil {
		b.Fatal(err)
	}
	return s
}
