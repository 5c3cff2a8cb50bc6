//go:build linux

// Command soak puts one steady, modest load on two `peerdns node`
// processes and a `peerdns agent` for a set time (default one hour),
// samples every process each minute and checks, at the end, that the
// last minute looks like minute 5:
//
//	go build -o /tmp/peerdns ./cmd/peerdns
//	go run ./bench/soak -bin /tmp/peerdns -duration 1h
//
// Set-up: node A creates the network, node B joins with A's invite. A
// backend in this process (a small HTTP page of about 1 KiB and a TCP
// sink) is exposed on A through two tunnel servers: "site" with domain
// site.p2p (A claims it), and "bulk", whose hs:// key B claims as
// bulk.p2p and runs a tunnel client for. A also claims soak.p2p. The
// agent runs with its own data folder and a REST port it picks.
//
// The load, all at fixed rates (offered by tickers, never faster; a
// slow answer delays the next request instead of piling up):
//
//   - DNS: 100 queries/s to each node (UDP, miekg/dns), alternating
//     soak.p2p and site.p2p: names claimed on A and resolved on both
//     (each ticker waits for its answer, so a busy machine sends fewer:
//     dns_n in the table is what was answered).
//   - Edge through the tunnel: 20 HTTPS requests/s for https://site.p2p/
//     to B's edge on kept-alive connections, and 4/s each on a new TLS
//     connection; B's edge reaches A's tunnel server over QUIC and A
//     forwards to the backend (B -> tunnel -> A). Beside them, in
//     HTTP/2 and in HTTP/3, 4 requests/s each on a kept connection and
//     2/s each on a new one: over the hour 7,200 connections of each,
//     more than the edge's connection cap holds, so a place under the
//     cap that a closed connection kept would show as errors.
//   - Tunnel bulk: one TCP stream into B's bulk.p2p tunnel client at
//     2 Mbit/s (16 KiB writes), replaced by a new connection every 30 s.
//   - WebSocket: on each node two /ws subscribers to stats for the whole
//     run, and one that redials every 20 s.
//   - Admin: 2 reads/s of /api/resolved-domains alternating nodes, and a
//     new claim every 10 s on alternating nodes, so the ledger grows
//     slowly as a live network's does (360 claims an hour).
//   - Agent: every 5 s /api/v1/info and /api/v1/data?chart=system.cpu
//     for the last minute, as a dashboard would.
//
// Why this load: the soak looks for what grows with time (memory,
// goroutines, descriptors, latency), not for the most a node can take
// (bench/dns, bench/proxy and bench/tunnel measure that). Each kind of
// traffic runs at a rate a busy home or small-office node sees, well
// below saturation, so that a drift in the figures is the node's and not
// a queue building on a shared machine: this machine has two cores
// shared with other builds and tests, and the whole load costs a few
// tenths of a core. The rates are flags, for a bigger machine.
//
// Each minute, per process (A, B, the agent): RSS (VmRSS) and its
// anonymous part (RssAnon: the heap, stacks and runtime; the rest is the
// binary's pages), the Go heap in use (nodes: go_memstats_heap_inuse_bytes
// of GET /metrics) and the heap the runtime keeps idle without returning
// it to the kernel (heap idle minus released), the
// goroutines (the node's own count, GET /api/stats process.goroutines;
// the agent does not expose it), open files (/proc/PID/fd), threads and
// the CPU seconds used in the minute (/proc/PID/stat); and for that
// minute the p50 and p99 latency of the DNS answers of each node and of
// the edge requests (on B's row: they enter at B), with counts and
// errors. A "load" line after each minute gives the machine's load
// average and what the tunnel, the subscribers, the admin reads, the
// agent and the claims saw, and the ledger's length on each node. The
// agent's open files follow the host's process count, not time: its
// apps collector keeps /proc/PID/stat and /proc/PID/io open for every
// process of the host and closes them when the process ends.
//
// At the end: minute 5 against the last minute, with the bounds: RSS
// and goroutines of each node within 10%, the p99 of DNS (each node)
// and of the edge at most 1.5x minute 5's. The exit status is 3 when a
// bound is not met (after the table), 1 when the run could not be done.
//
// Everything runs on loopback with ports the processes pick (port 0),
// in a temporary folder removed at the end (-keep keeps it, with the
// processes' logs); it stops by itself after -duration, or on Ctrl-C or
// SIGTERM, and kills what it started (the children also get SIGKILL if
// this process dies: Pdeathsig).
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/miekg/dns"

	"peerdns/bench/promtext"
	"peerdns/bench/runwork"
)

type proc struct {
	name  string
	cmd   *exec.Cmd
	addrs map[string]string // service -> address, from the "listening on" lines
	exit  chan error        // the process's end, once
}

var listenRE = regexp.MustCompile(`(admin|dns|https|agent) listening on ([0-9.:]+)`)

// launch starts bin with args and env, logs its stderr to logPath, and
// waits until it has printed a "listening on" line for each of want.
func launch(name, logPath string, env []string, want []string, bin string, args ...string) (*proc, error) {
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), env...)
	// The children die with this program, however it ends. (Pdeathsig
	// follows the thread that started the child: safe here, where no
	// goroutine locks and ends a thread.)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	out, err := cmd.StderrPipe()
	if err != nil {
		return nil, err
	}
	cmd.Stdout = io.Discard
	logf, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		logf.Close()
		return nil, err
	}
	p := &proc{name: name, cmd: cmd, addrs: map[string]string{}, exit: make(chan error, 1)}
	found := make(chan struct{})
	var mu sync.Mutex
	go func() {
		sc := bufio.NewScanner(out)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		done := false
		for sc.Scan() {
			fmt.Fprintln(logf, sc.Text())
			if done {
				continue
			}
			if m := listenRE.FindStringSubmatch(sc.Text()); m != nil {
				mu.Lock()
				if p.addrs[m[1]] == "" {
					p.addrs[m[1]] = m[2]
				}
				all := true
				for _, w := range want {
					all = all && p.addrs[w] != ""
				}
				mu.Unlock()
				if all {
					done = true
					close(found)
				}
			}
		}
		// Drain the rest so the child never blocks on a full pipe.
		_, _ = io.Copy(logf, out)
		logf.Close()
		p.exit <- cmd.Wait()
	}()
	select {
	case <-found:
	case <-time.After(60 * time.Second):
		cmd.Process.Kill()
		return nil, fmt.Errorf("%s did not log its %v addresses within 60 s (log: %s)", name, want, logPath)
	}
	mu.Lock()
	defer mu.Unlock()
	return p, nil
}

// stop asks the process to end (SIGTERM: a node shuts down in order and
// writes PEERDNS_ALLOCPROFILE if that is set) and kills it after 10 s.
func (p *proc) stop() {
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.exit:
		return
	case <-time.After(10 * time.Second):
	}
	_ = p.cmd.Process.Kill()
	select {
	case <-p.exit:
	case <-time.After(10 * time.Second):
	}
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

// poll calls f until it returns nil or the deadline passes.
func poll(ctx context.Context, what string, d time.Duration, f func() error) error {
	deadline := time.Now().Add(d)
	for {
		err := f()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s: still %v after %v", what, err, d)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// cpuTicks is the user+system CPU time of pid in clock ticks (USER_HZ,
// 100 a second on Linux), from /proc/PID/stat.
func cpuTicks(pid int) int64 {
	b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 13 {
		return 0
	}
	var u, k int64
	fmt.Sscan(f[11], &u)
	fmt.Sscan(f[12], &k)
	return u + k
}

// loadavg is the machine's 1-minute load average, as text.
func loadavg() string {
	b, _ := os.ReadFile("/proc/loadavg")
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return "?"
	}
	return f[0]
}

func procFigures(pid int) (rssKB, anonKB, fds, threads int) {
	b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	for _, l := range strings.Split(string(b), "\n") {
		f := strings.Fields(l)
		if len(f) < 2 {
			continue
		}
		switch f[0] {
		case "VmRSS:":
			fmt.Sscan(f[1], &rssKB)
		case "RssAnon:":
			fmt.Sscan(f[1], &anonKB)
		case "Threads:":
			fmt.Sscan(f[1], &threads)
		}
	}
	ents, _ := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	return rssKB, anonKB, len(ents), threads
}

type config struct {
	bin             string
	dur, period     time.Duration
	dnsRate         int // queries/s per node
	edgeRate        int // kept-alive requests/s
	edgeFresh       int // new-connection requests/s
	edgeH2, edgeH3  int // kept-alive requests/s in HTTP/2 and in HTTP/3
	muxFresh        int // new-connection requests/s, each of HTTP/2 and HTTP/3
	bulkBits        int // bit/s through the bulk tunnel
	wsStay, wsChurn int // subscribers per node
	claimEvery      time.Duration
	keep            bool
}

func main() {
	var c config
	flag.StringVar(&c.bin, "bin", "", "the peerdns binary")
	flag.DurationVar(&c.dur, "duration", time.Hour, "how long the load runs")
	flag.DurationVar(&c.period, "every", time.Minute, "sampling period (a table row per period)")
	flag.IntVar(&c.dnsRate, "dns-rate", 100, "DNS queries/s to each node")
	flag.IntVar(&c.edgeRate, "edge-rate", 20, "edge requests/s on kept-alive connections")
	flag.IntVar(&c.edgeFresh, "edge-fresh", 4, "edge requests/s each on a new TLS connection")
	flag.IntVar(&c.edgeH2, "edge-h2", 4, "edge requests/s in HTTP/2 on a kept connection")
	flag.IntVar(&c.edgeH3, "edge-h3", 4, "edge requests/s in HTTP/3 on a kept connection")
	flag.IntVar(&c.muxFresh, "edge-mux-fresh", 2, "edge requests/s in HTTP/2 and as many in HTTP/3, each on a new connection")
	flag.IntVar(&c.bulkBits, "bulk-bits", 2_000_000, "bit/s of the bulk stream through the tunnel")
	flag.IntVar(&c.wsStay, "ws", 2, "stats subscribers per node for the whole run")
	flag.IntVar(&c.wsChurn, "ws-churn", 1, "stats subscribers per node that redial every 20 s")
	flag.DurationVar(&c.claimEvery, "claim-every", 10*time.Second, "a new claim this often (0: none)")
	flag.BoolVar(&c.keep, "keep", false, "keep the temporary folder (the processes' logs)")
	flag.Parse()
	if c.bin == "" {
		fmt.Fprintln(os.Stderr, "soak: -bin is required")
		os.Exit(2)
	}
	os.Exit(runwork.Run("peerdns-soak-*", "the processes' logs", 0, c.keep, func(ctx context.Context, work string) int {
		ok, err := soak(ctx, c, work)
		switch {
		case err != nil:
			fmt.Fprintln(os.Stderr, "soak:", err)
			return 1
		case !ok:
			return 3
		}
		return 0
	}))
}

func logf(format string, a ...any) {
	fmt.Fprintf(os.Stderr, "[%s] "+format+"\n", append([]any{time.Now().UTC().Format("15:04:05")}, a...)...)
}

// row is one minute of one process.
type row struct {
	rssKB, anonKB, gor, fds, thr int
	cpu                          float64 // CPU seconds used in the minute
	heapMB                       float64 // Go heap in use (nodes: /metrics), -1 unknown
	idleMB                       float64 // heap the runtime holds but neither uses nor has returned, -1 unknown
	ledgerOps                    int
	dns, edge                    minute
	h2, h3                       minute // the edge in HTTP/2 and HTTP/3 (B's row)
	hasDNS, hasEdge              bool
}

func soak(ctx context.Context, c config, work string) (bool, error) {
	nodeArgs := func(dir string, extra ...string) []string {
		return append([]string{"node", "--data", dir, "--admin-addr", "127.0.0.1:0", "--dns-addr", "127.0.0.1:0",
			"--http-addr", "127.0.0.1:0", "--https-addr", "127.0.0.1:0", "--p2p-addr", "127.0.0.1:0", "--upstream", "127.0.0.1:1"}, extra...)
	}
	want := []string{"admin", "dns", "https"}
	a, err := launch("A", filepath.Join(work, "a.log"), nil, want, c.bin, nodeArgs(filepath.Join(work, "a"))...)
	if err != nil {
		return false, err
	}
	defer a.stop()
	code, body, err := call("POST", "http://"+a.addrs["admin"]+"/api/invites", "")
	var inv struct{ Invite string }
	if err != nil || code != 200 || json.Unmarshal([]byte(body), &inv) != nil {
		return false, fmt.Errorf("invite: %d %s %v", code, body, err)
	}
	b, err := launch("B", filepath.Join(work, "b.log"), nil, want, c.bin, nodeArgs(filepath.Join(work, "b"), "--join", inv.Invite)...)
	if err != nil {
		return false, err
	}
	defer b.stop()
	ag, err := launch("agent", filepath.Join(work, "agent.log"),
		[]string{"AGENT_REST_HOST=127.0.0.1", "AGENT_REST_PORT=0", "AGENT_PEER_ADDR=127.0.0.1:0"},
		[]string{"agent"}, c.bin, "agent", "--data", filepath.Join(work, "agentdata"))
	if err != nil {
		return false, err
	}
	defer ag.stop()
	nodes := []*proc{a, b}
	procs := []*proc{a, b, ag}
	admA, admB := "http://"+a.addrs["admin"], "http://"+b.addrs["admin"]
	logf("A admin %s pid %d, B admin %s pid %d, agent %s pid %d", a.addrs["admin"], a.cmd.Process.Pid,
		b.addrs["admin"], b.cmd.Process.Pid, ag.addrs["agent"], ag.cmd.Process.Pid)
	for _, n := range nodes {
		adm := "http://" + n.addrs["admin"]
		if err := poll(ctx, n.name+" has a peer", 60*time.Second, func() error {
			var peers []string
			if err := getJSON(client, adm+"/api/peers", &peers); err != nil {
				return err
			}
			if len(peers) == 0 {
				return fmt.Errorf("no peer")
			}
			return nil
		}); err != nil {
			return false, err
		}
	}

	be, err := startBackend()
	if err != nil {
		return false, err
	}
	defer be.close()
	// The service on A: the web page as site.p2p (A claims it).
	if _, err := tunnelServer(ctx, admA, fmt.Sprintf(`{"name":"site","host":"127.0.0.1","port":%d,"domain":"site.p2p"}`, be.port(be.web))); err != nil {
		return false, err
	}
	// The bulk sink on A, claimed by B, with B's tunnel client.
	bulkURL, err := tunnelServer(ctx, admA, fmt.Sprintf(`{"name":"bulk","host":"127.0.0.1","port":%d}`, be.port(be.sink)))
	if err != nil {
		return false, err
	}
	if code, body, err := call("POST", admB+"/api/add-domain", `{"domain":"bulk.p2p","hash":"`+bulkURL+`"}`); err != nil || code != 200 {
		return false, fmt.Errorf("claim bulk.p2p on B: %d %s %v", code, body, err)
	}
	bulkAddr, err := tunnelClient(ctx, admB, "bulk.p2p", bulkURL)
	if err != nil {
		return false, err
	}
	hash := "hs://" + strings.Repeat("ab", 32)
	if code, body, err := call("POST", admA+"/api/add-domain", `{"domain":"soak.p2p","hash":"`+hash+`"}`); err != nil || code != 200 {
		return false, fmt.Errorf("claim soak.p2p: %d %s %v", code, body, err)
	}
	names := []string{"soak.p2p.", "site.p2p."}
	for _, n := range nodes {
		for _, name := range names {
			if err := poll(ctx, n.name+" answers "+name, 60*time.Second, func() error {
				r, err := dns.Exchange(new(dns.Msg).SetQuestion(name, dns.TypeA), n.addrs["dns"])
				if err != nil {
					return err
				}
				if len(r.Answer) == 0 {
					return fmt.Errorf("rcode %s, no answer", dns.RcodeToString[r.Rcode])
				}
				return nil
			}); err != nil {
				return false, err
			}
		}
	}
	roots, err := rootPool(filepath.Join(work, "b", "ca", "root.pem"))
	if err != nil {
		return false, err
	}
	const siteURL = "https://site.p2p/soak"
	for _, proto := range []string{"http/1.1", "h2", "h3"} {
		get := edgeGetter(b.addrs["https"], roots, proto, false)
		if err := poll(ctx, "edge of B reaches site.p2p on A in "+proto, 60*time.Second, func() error {
			return get(ctx, siteURL, "soak backend")
		}); err != nil {
			return false, err
		}
	}
	logf("ready: site.p2p through B's edge %s, bulk.p2p client on B at %s; load for %v", b.addrs["https"], bulkAddr, c.dur)

	// The load, until the run's end.
	// The run ends after its last sample; the deadline is a backstop half
	// a period later.
	samples := int(c.dur / c.period)
	ctx, cancel := context.WithTimeout(ctx, c.dur+c.period/2)
	defer cancel()
	var wg sync.WaitGroup
	defer wg.Wait() // runs before cancel: the load stops first, then the processes
	defer cancel()
	dnsLat := []*lat{{}, {}}
	var edgeLat, h2Lat, h3Lat lat
	const dnsWorkers = 2
	for i, n := range nodes {
		if c.dnsRate > 0 {
			dnsLoad(ctx, &wg, n.addrs["dns"], names, time.Second*dnsWorkers/time.Duration(c.dnsRate), dnsWorkers, dnsLat[i])
		}
	}
	edge := func(proto string, keep bool, rate int, l *lat) {
		if rate <= 0 {
			return
		}
		get := edgeGetter(b.addrs["https"], roots, proto, keep)
		// Two workers so that one slow answer does not halve the rate.
		for w := 0; w < 2; w++ {
			every(ctx, &wg, 2*time.Second/time.Duration(rate), func(int) {
				t0 := time.Now()
				err := get(ctx, siteURL, "soak backend")
				if ctx.Err() == nil {
					l.add(time.Since(t0), err)
				}
			})
		}
	}
	edge("http/1.1", true, c.edgeRate, &edgeLat)
	edge("http/1.1", false, c.edgeFresh, &edgeLat)
	edge("h2", true, c.edgeH2, &h2Lat)
	edge("h2", false, c.muxFresh, &h2Lat)
	edge("h3", true, c.edgeH3, &h3Lat)
	edge("h3", false, c.muxFresh, &h3Lat)
	var bulkErrs atomic.Int64
	if c.bulkBits > 0 {
		bulk(ctx, &wg, bulkAddr, c.bulkBits/8, 30*time.Second, &bulkErrs)
	}
	var wsMsgs, wsErrs atomic.Int64
	for _, n := range nodes {
		for i := 0; i < c.wsStay; i++ {
			wsSubscriber(ctx, &wg, n.addrs["admin"], 0, &wsMsgs, &wsErrs)
		}
		for i := 0; i < c.wsChurn; i++ {
			wsSubscriber(ctx, &wg, n.addrs["admin"], 20*time.Second, &wsMsgs, &wsErrs)
		}
	}
	var admLat lat
	every(ctx, &wg, 500*time.Millisecond, func(i int) {
		t0 := time.Now()
		code, _, err := call("GET", "http://"+nodes[i%2].addrs["admin"]+"/api/resolved-domains", "")
		if err == nil && code != 200 {
			err = fmt.Errorf("status %d", code)
		}
		if ctx.Err() == nil {
			admLat.add(time.Since(t0), err)
		}
	})
	var claims, claimErrs atomic.Int64
	if c.claimEvery > 0 {
		every(ctx, &wg, c.claimEvery, func(i int) {
			code, _, err := call("POST", "http://"+nodes[i%2].addrs["admin"]+"/api/add-domain", fmt.Sprintf(`{"domain":"soak%06d.p2p","hash":"%s"}`, i, hash))
			if err != nil || code != 200 {
				claimErrs.Add(1)
			} else {
				claims.Add(1)
			}
		})
	}
	var agentLat lat
	agentBase := "http://" + ag.addrs["agent"]
	every(ctx, &wg, 5*time.Second, func(int) {
		for _, path := range []string{"/api/v1/info", "/api/v1/data?chart=system.cpu&after=-60&points=60"} {
			t0 := time.Now()
			err := getJSON(client, agentBase+path, nil)
			if ctx.Err() == nil {
				agentLat.add(time.Since(t0), err)
			}
		}
	})
	// A process that ends during the run ends the run.
	died := make(chan string, len(procs))
	for _, p := range procs {
		p := p
		go func() {
			select {
			case err := <-p.exit:
				p.exit <- err // for stop()
				died <- fmt.Sprintf("%s exited during the run: %v (log: %s)", p.name, err, filepath.Join(work, strings.ToLower(p.name)+".log"))
				cancel()
			case <-ctx.Done():
			}
		}()
	}

	fmt.Printf("soak: %v, sampled every %v; DNS %d q/s per node, edge through the tunnel HTTP/1.1 %d+%d req/s, HTTP/2 %d+%d, HTTP/3 %d+%d (kept+new connections), bulk %.1f Mbit/s, ws %d+%d per node, a claim every %v\n",
		c.dur, c.period, c.dnsRate, c.edgeRate, c.edgeFresh, c.edgeH2, c.muxFresh, c.edgeH3, c.muxFresh, float64(c.bulkBits)/1e6, c.wsStay, c.wsChurn, c.claimEvery)
	fmt.Println("minute  proc   rss_MB  anon_MB  heap_MB  idle_MB  goroutines  open_files  threads  cpu_s   dns_p50  dns_p99  dns_n  dns_err  edge_p50  edge_p99  edge_n  edge_err")
	var rows [][3]row
	t := time.NewTicker(c.period)
	defer t.Stop()
	start := time.Now()
	lastBytes := int64(0)
	var why string
	var ticks [3]int64
	for i, p := range procs {
		ticks[i] = cpuTicks(p.cmd.Process.Pid)
	}
	for m := 1; ; m++ {
		select {
		case <-ctx.Done():
		case <-t.C:
		}
		if ctx.Err() != nil {
			select {
			case why = <-died:
			default:
			}
			break
		}
		var r [3]row
		for i, p := range procs {
			r[i].rssKB, r[i].anonKB, r[i].fds, r[i].thr = procFigures(p.cmd.Process.Pid)
			tk := cpuTicks(p.cmd.Process.Pid)
			r[i].cpu, ticks[i] = float64(tk-ticks[i])/100, tk
			r[i].gor, r[i].heapMB, r[i].idleMB = -1, -1, -1
			if i < 2 {
				r[i].gor = goroutines(client, p.addrs["admin"])
				pv, _ := promtext.Get(client, p.addrs["admin"], "go_memstats_heap_inuse_bytes", "go_memstats_heap_idle_bytes", "go_memstats_heap_released_bytes", "peerdns_ledger_ops")
				if v, ok := pv["go_memstats_heap_inuse_bytes"]; ok {
					r[i].heapMB = v / (1 << 20)
				}
				if v, ok := pv["go_memstats_heap_idle_bytes"]; ok {
					r[i].idleMB = (v - pv["go_memstats_heap_released_bytes"]) / (1 << 20)
				}
				r[i].ledgerOps = int(pv["peerdns_ledger_ops"])
				r[i].dns, r[i].hasDNS = dnsLat[i].take(), true
			}
		}
		r[1].edge, r[1].h2, r[1].h3, r[1].hasEdge = edgeLat.take(), h2Lat.take(), h3Lat.take(), true
		for i, p := range procs {
			printRow(m, p.name, r[i])
		}
		got := be.received.Load()
		ad, agm := admLat.take(), agentLat.take()
		fmt.Printf("%6d  load: machine loadavg %s; edge HTTP/2 %d reqs p99 %.1f ms (%d errors), HTTP/3 %d reqs p99 %.1f ms (%d errors); tunnel %.2f Mbit/s (%d errors), ws %d msgs (%d errors), admin reads %d p99 %.1f ms (%d errors), agent %d reqs p99 %.1f ms (%d errors), claims %d (%d errors), ledger ops A %d B %d\n",
			m, loadavg(), r[1].h2.n, ms(r[1].h2.p99), r[1].h2.errs, r[1].h3.n, ms(r[1].h3.p99), r[1].h3.errs, float64(got-lastBytes)*8/c.period.Seconds()/1e6, bulkErrs.Swap(0), wsMsgs.Swap(0), wsErrs.Swap(0),
			ad.n, ms(ad.p99), ad.errs, agm.n, ms(agm.p99), agm.errs, claims.Load(), claimErrs.Load(), r[0].ledgerOps, r[1].ledgerOps)
		for _, e := range []struct {
			what string
			m    minute
		}{{"DNS A", r[0].dns}, {"DNS B", r[1].dns}, {"edge", r[1].edge}, {"edge HTTP/2", r[1].h2}, {"edge HTTP/3", r[1].h3}, {"admin", ad}, {"agent", agm}} {
			if e.m.errs > 0 {
				fmt.Printf("%6d  %s: last error: %s\n", m, e.what, e.m.lastErr)
			}
		}
		lastBytes = got
		rows = append(rows, r)
		if len(rows) >= samples {
			break
		}
	}
	cancel()
	wg.Wait()
	if why != "" {
		fmt.Println("run ended early:", why)
	}
	fmt.Printf("ran %v, %d samples\n", time.Since(start).Round(time.Second), len(rows))
	return verdict(rows), nil
}

func printRow(m int, name string, r row) {
	gor := "-"
	if r.gor >= 0 {
		gor = fmt.Sprint(r.gor)
	}
	heap := "-"
	if r.heapMB >= 0 {
		heap = fmt.Sprintf("%.1f", r.heapMB)
	}
	idle := "-"
	if r.idleMB >= 0 {
		idle = fmt.Sprintf("%.1f", r.idleMB)
	}
	fmt.Printf("%6d  %-5s  %6.1f  %7.1f  %7s  %7s  %10s  %10d  %7d  %5.1f", m, name, float64(r.rssKB)/1024, float64(r.anonKB)/1024, heap, idle, gor, r.fds, r.thr, r.cpu)
	if r.hasDNS {
		fmt.Printf("  %8.2f  %7.2f  %5d  %7d", ms(r.dns.p50), ms(r.dns.p99), r.dns.n, r.dns.errs)
	} else {
		fmt.Printf("  %8s  %7s  %5s  %7s", "-", "-", "-", "-")
	}
	if r.hasEdge {
		fmt.Printf("  %8.2f  %8.2f  %6d  %8d", ms(r.edge.p50), ms(r.edge.p99), r.edge.n, r.edge.errs)
	}
	fmt.Println()
}

// verdict prints minute 5 against the last minute with the bounds and
// says whether every bound held.
func verdict(rows [][3]row) bool {
	if len(rows) < 6 {
		fmt.Printf("verdict: none (%d samples; minute 5 and a later one are needed)\n", len(rows))
		return false
	}
	f, l := rows[4], rows[len(rows)-1]
	last := len(rows)
	ok := true
	check := func(what string, held bool, format string, a ...any) {
		mark := "ok  "
		if !held {
			mark, ok = "FAIL", false
		}
		fmt.Printf("  %s %-22s "+format+"\n", append([]any{mark, what}, a...)...)
	}
	fmt.Printf("minute 5 -> minute %d (bounds: RSS and goroutines within 10%%, p99 at most 1.5x):\n", last)
	for i, name := range []string{"A", "B"} {
		p := pct(f[i].rssKB, l[i].rssKB)
		check("RSS "+name, p >= -10 && p <= 10, "%.1f -> %.1f MB (%+.1f%%)", float64(f[i].rssKB)/1024, float64(l[i].rssKB)/1024, p)
		g := pct(f[i].gor, l[i].gor)
		check("goroutines "+name, f[i].gor > 0 && l[i].gor > 0 && g >= -10 && g <= 10, "%d -> %d (%+.1f%%)", f[i].gor, l[i].gor, g)
		x := ratio(f[i].dns.p99, l[i].dns.p99)
		check("DNS p99 "+name, f[i].dns.n > 0 && l[i].dns.n > 0 && x <= 1.5, "%.2f -> %.2f ms (x%.2f)", ms(f[i].dns.p99), ms(l[i].dns.p99), x)
	}
	x := ratio(f[1].edge.p99, l[1].edge.p99)
	check("edge p99 (B -> A)", f[1].edge.n > 0 && l[1].edge.n > 0 && x <= 1.5, "%.2f -> %.2f ms (x%.2f)", ms(f[1].edge.p99), ms(l[1].edge.p99), x)
	fmt.Printf("  info heap in use A %.1f -> %.1f MB, B %.1f -> %.1f MB; ledger ops A %d -> %d\n",
		f[0].heapMB, l[0].heapMB, f[1].heapMB, l[1].heapMB, f[0].ledgerOps, l[0].ledgerOps)
	fmt.Printf("  info agent RSS %.1f -> %.1f MB (%+.1f%%); open files A %d -> %d, B %d -> %d, agent %d -> %d\n",
		float64(f[2].rssKB)/1024, float64(l[2].rssKB)/1024, pct(f[2].rssKB, l[2].rssKB), f[0].fds, l[0].fds, f[1].fds, l[1].fds, f[2].fds, l[2].fds)
	// One minute's p99 on a shared machine moves with whatever else runs;
	// the median of five minutes around minute 5 against the median of the
	// last five says whether a change is a trend or one busy minute.
	if len(rows) >= 12 {
		med := func(from, to int, f func(r [3]row) float64) float64 {
			var v []float64
			for _, r := range rows[from:to] {
				v = append(v, f(r))
			}
			sort.Float64s(v)
			return v[len(v)/2]
		}
		n := len(rows)
		for _, e := range []struct {
			what string
			f    func(r [3]row) float64
		}{
			{"DNS p99 A", func(r [3]row) float64 { return ms(r[0].dns.p99) }},
			{"DNS p99 B", func(r [3]row) float64 { return ms(r[1].dns.p99) }},
			{"edge p99", func(r [3]row) float64 { return ms(r[1].edge.p99) }},
			{"HTTP/2 p99", func(r [3]row) float64 { return ms(r[1].h2.p99) }},
			{"HTTP/3 p99", func(r [3]row) float64 { return ms(r[1].h3.p99) }},
			{"CPU s/min A", func(r [3]row) float64 { return r[0].cpu }},
			{"CPU s/min B", func(r [3]row) float64 { return r[1].cpu }},
		} {
			a, b := med(2, 7, e.f), med(n-5, n, e.f)
			fmt.Printf("  info %-12s median of minutes 3-7 %.2f, of minutes %d-%d %.2f (x%.2f)\n", e.what, a, n-4, n, b, b/a)
		}
	}
	if ok {
		fmt.Println("verdict: every bound held")
	} else {
		fmt.Println("verdict: a bound was not met (FAIL above)")
	}
	return ok
}

// tunnelServer creates a tunnel server on the node at adm and returns its
// hs:// URL once it runs.
func tunnelServer(ctx context.Context, adm, body string) (string, error) {
	code, out, err := call("POST", adm+"/api/tunnel-create", body)
	var created struct{ ID string }
	if err != nil || code != 200 || json.Unmarshal([]byte(out), &created) != nil {
		return "", fmt.Errorf("tunnel-create %s: %d %s %v", body, code, out, err)
	}
	var url string
	err = poll(ctx, "tunnel server "+created.ID+" running", 30*time.Second, func() error {
		var ss []struct {
			ID   string
			Info struct{ State, URL string }
		}
		if err := getJSON(client, adm+"/api/tunnel-servers", &ss); err != nil {
			return err
		}
		for _, s := range ss {
			if s.ID == created.ID && s.Info.State == "running" && s.Info.URL != "" {
				url = s.Info.URL
				return nil
			}
		}
		return fmt.Errorf("not running")
	})
	return url, err
}

// tunnelClient creates a tunnel client for domain (which the node at adm
// claimed) to key on a free loopback port and returns its address once
// it runs. The node accepts the client once its claim has resolved to
// itself: a 400 before that is retried.
func tunnelClient(ctx context.Context, adm, domain, key string) (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	var created struct{ ID string }
	body := fmt.Sprintf(`{"domain":%q,"key":%q,"port":%d}`, domain, key, port)
	if err := poll(ctx, "tunnel-client-create "+domain, 60*time.Second, func() error {
		code, out, err := call("POST", adm+"/api/tunnel-client-create", body)
		if err != nil {
			return err
		}
		if code != 200 {
			return fmt.Errorf("%d %s", code, out)
		}
		return json.Unmarshal([]byte(out), &created)
	}); err != nil {
		return "", err
	}
	var addr string
	err = poll(ctx, "tunnel client "+created.ID+" running", 30*time.Second, func() error {
		var cs []struct {
			ID   string
			Info struct{ State, Address, Error string }
		}
		if err := getJSON(client, adm+"/api/tunnel-clients", &cs); err != nil {
			return err
		}
		for _, c := range cs {
			if c.ID == created.ID {
				if c.Info.State == "running" && c.Info.Address != "" {
					addr = c.Info.Address
					return nil
				}
				return fmt.Errorf("state %q %s", c.Info.State, c.Info.Error)
			}
		}
		return fmt.Errorf("not listed")
	})
	return addr, err
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
