//go:build linux

// Command soak puts steady load on two `peerdns node` processes on
// loopback for a set time (default one hour) and samples each minute:
// each node's RSS, open files and threads, and the p99 latency of the
// DNS answers and admin API reads of that minute. It prints a table and,
// at the end, minute 5 against the last minute.
//
//	go build -o /tmp/peerdns ./cmd/peerdns
//	go run ./bench/soak -bin /tmp/peerdns -duration 1h
//
// The load: node B joins node A; A claims soak.p2p, resolved on both;
// 200 DNS queries/s for it spread over both nodes (miekg/dns client,
// UDP), 10 reads/s of /api/resolved-domains, and one new claim every
// 5 s on alternating nodes (the ledger grows slowly, as a live network's
// does). Not in this load yet: edge requests through a tunnel, tunnel
// bulk traffic, WebSocket stats subscribers and the agent. The node's
// goroutine count is exposed only on its WebSocket stats stream, so the
// table shows threads instead.
//
// Everything runs on loopback with ports the nodes pick (port 0), in a
// temporary folder removed at the end; it stops by itself after
// -duration, or on Ctrl-C, and kills what it started.
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/miekg/dns"
)

type proc struct {
	cmd   *exec.Cmd
	admin string
	dns   string
}

var listenRE = regexp.MustCompile(`(admin|dns) listening on ([0-9.:]+)`)

func start(bin, dir string, args ...string) (*proc, error) {
	all := append([]string{"node", "--data", dir, "--admin-addr", "127.0.0.1:0", "--dns-addr", "127.0.0.1:0",
		"--http-addr", "127.0.0.1:0", "--https-addr", "127.0.0.1:0", "--p2p-addr", "127.0.0.1:0", "--upstream", "127.0.0.1:1"}, args...)
	cmd := exec.Command(bin, all...)
	// The nodes die with this program, however it ends. (Pdeathsig
	// follows the thread that started the child: safe here, where no
	// goroutine locks and ends a thread; bench/chaos does, and so stops
	// its nodes itself.)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	out, err := cmd.StderrPipe()
	if err != nil {
		return nil, err
	}
	cmd.Stdout = io.Discard
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	p := &proc{cmd: cmd}
	found := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(out)
		done := false
		for sc.Scan() {
			if m := listenRE.FindStringSubmatch(sc.Text()); m != nil && !done {
				if m[1] == "admin" {
					p.admin = m[2]
				} else if p.dns == "" {
					p.dns = m[2]
				}
				if p.admin != "" && p.dns != "" {
					done = true
					close(found)
				}
			}
		}
	}()
	select {
	case <-found:
	case <-time.After(30 * time.Second):
		cmd.Process.Kill()
		return nil, fmt.Errorf("node did not log its admin and DNS addresses within 30 s")
	}
	return p, nil
}

var client = &http.Client{Timeout: 5 * time.Second}

func call(method, url, body string) (int, string, error) {
	var r io.Reader
	if body != "" {
		r = strings.NewReader(body)
	}
	req, _ := http.NewRequest(method, url, r)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := client.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), nil
}

// lat collects latencies of one kind for the current minute.
type lat struct {
	mu   sync.Mutex
	d    []time.Duration
	errs int
}

func (l *lat) add(d time.Duration, err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err != nil {
		l.errs++
		return
	}
	l.d = append(l.d, d)
}

// take returns the p99 and the error count, and starts a new minute.
func (l *lat) take() (time.Duration, int, int) {
	l.mu.Lock()
	d, errs := l.d, l.errs
	l.d, l.errs = nil, 0
	l.mu.Unlock()
	if len(d) == 0 {
		return 0, 0, errs
	}
	sort.Slice(d, func(i, j int) bool { return d[i] < d[j] })
	return d[len(d)*99/100], len(d), errs
}

func procFigures(pid int) (rssKB, fds, threads int) {
	b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	for _, l := range strings.Split(string(b), "\n") {
		f := strings.Fields(l)
		if len(f) < 2 {
			continue
		}
		switch f[0] {
		case "VmRSS:":
			fmt.Sscan(f[1], &rssKB)
		case "Threads:":
			fmt.Sscan(f[1], &threads)
		}
	}
	ents, _ := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	return rssKB, len(ents), threads
}

func main() {
	bin := flag.String("bin", "", "the peerdns binary")
	dur := flag.Duration("duration", time.Hour, "how long the load runs")
	every := flag.Duration("every", time.Minute, "sampling period")
	flag.Parse()
	if *bin == "" {
		fmt.Fprintln(os.Stderr, "soak: -bin is required")
		os.Exit(2)
	}
	if err := soak(*bin, *dur, *every); err != nil {
		fmt.Fprintln(os.Stderr, "soak:", err)
		os.Exit(1)
	}
}

func soak(bin string, dur, every time.Duration) error {
	work, err := os.MkdirTemp("", "peerdns-soak-*")
	if err != nil {
		return err
	}
	defer os.RemoveAll(work)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	ctx, cancel := context.WithTimeout(ctx, dur)
	defer cancel()

	a, err := start(bin, filepath.Join(work, "a"))
	if err != nil {
		return err
	}
	defer func() { a.cmd.Process.Kill(); a.cmd.Wait() }()
	code, body, err := call("POST", "http://"+a.admin+"/api/invites", "")
	var inv struct{ Invite string }
	if err != nil || code != 200 || json.Unmarshal([]byte(body), &inv) != nil {
		return fmt.Errorf("invite: %d %s %v", code, body, err)
	}
	b, err := start(bin, filepath.Join(work, "b"), "--join", inv.Invite)
	if err != nil {
		return err
	}
	defer func() { b.cmd.Process.Kill(); b.cmd.Wait() }()
	nodes := []*proc{a, b}
	hash := "hs://" + strings.Repeat("ab", 32)
	if code, body, err := call("POST", "http://"+a.admin+"/api/add-domain", `{"domain":"soak.p2p","hash":"`+hash+`"}`); err != nil || code != 200 {
		return fmt.Errorf("claim: %d %s %v", code, body, err)
	}
	// Wait until both answer DNS for it.
	for _, n := range nodes {
		deadline := time.Now().Add(60 * time.Second)
		for {
			m := new(dns.Msg).SetQuestion("soak.p2p.", dns.TypeA)
			r, err := dns.Exchange(m, n.dns)
			if err == nil && len(r.Answer) > 0 {
				break
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("%s does not answer soak.p2p after 60 s", n.dns)
			}
			time.Sleep(200 * time.Millisecond)
		}
	}

	var dnsLat, adminLat lat
	var wg sync.WaitGroup
	tick := func(period time.Duration, f func(i int)) {
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
	dc := &dns.Client{Timeout: 2 * time.Second}
	tick(5*time.Millisecond, func(i int) {
		m := new(dns.Msg).SetQuestion("soak.p2p.", dns.TypeA)
		t0 := time.Now()
		r, _, err := dc.Exchange(m, nodes[i%2].dns)
		if err == nil && len(r.Answer) == 0 {
			err = fmt.Errorf("no answer")
		}
		dnsLat.add(time.Since(t0), err)
	})
	tick(100*time.Millisecond, func(i int) {
		t0 := time.Now()
		code, _, err := call("GET", "http://"+nodes[i%2].admin+"/api/resolved-domains", "")
		if err == nil && code != 200 {
			err = fmt.Errorf("status %d", code)
		}
		adminLat.add(time.Since(t0), err)
	})
	tick(5*time.Second, func(i int) {
		_, _, _ = call("POST", "http://"+nodes[i%2].admin+"/api/add-domain", fmt.Sprintf(`{"domain":"soak%06d.p2p","hash":"%s"}`, i, hash))
	})

	fmt.Println("minute  node  rss_MB  open_files  threads  dns_p99_ms  dns_n  dns_err  admin_p99_ms  admin_n  admin_err")
	type row struct {
		rss            [2]int
		dnsP99, admP99 time.Duration
	}
	var rows []row
	t := time.NewTicker(every)
	defer t.Stop()
	for m := 1; ; m++ {
		select {
		case <-ctx.Done():
			wg.Wait()
			if len(rows) >= 5 {
				f, l := rows[4], rows[len(rows)-1]
				fmt.Printf("minute 5 -> minute %d: RSS A %+.1f%%, B %+.1f%%; DNS p99 x%.2f; admin p99 x%.2f\n", len(rows),
					pct(f.rss[0], l.rss[0]), pct(f.rss[1], l.rss[1]), ratio(f.dnsP99, l.dnsP99), ratio(f.admP99, l.admP99))
			}
			return nil
		case <-t.C:
		}
		dp, dn, de := dnsLat.take()
		ap, an, ae := adminLat.take()
		var r row
		r.dnsP99, r.admP99 = dp, ap
		for i, n := range nodes {
			rss, fds, thr := procFigures(n.cmd.Process.Pid)
			r.rss[i] = rss
			fmt.Printf("%6d  %4s  %6.1f  %10d  %7d  %10.2f  %5d  %7d  %12.2f  %7d  %9d\n", m, string(rune('A'+i)), float64(rss)/1024, fds, thr,
				ms(dp), dn, de, ms(ap), an, ae)
		}
		rows = append(rows, r)
	}
}

func ms(d time.Duration) float64 { return float64(d) / 1e6 }

func pct(a, b int) float64 {
	if a == 0 {
		return 0
	}
	return float64(b-a) * 100 / float64(a)
}

func ratio(a, b time.Duration) float64 {
	if a == 0 {
		return 0
	}
	return float64(b) / float64(a)
}
