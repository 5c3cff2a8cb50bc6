//go:build linux

package main

import (
	"context"
	"fmt"
	"io"
	"math/rand"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"peerdns/internal/testutil"
	"peerdns/transport"
)

// Config is one chaos run.
type Config struct {
	Binary   string        // the peerdns binary
	Nodes    int           // node processes (5)
	Duration time.Duration // how long the nemesis acts
	Seed     int64
	Converge time.Duration // the bound within which every node must agree after the last fault
	Prefix   string        // namespace name prefix
	Work     string        // data folders and logs
	Out      io.Writer     // the history
	Faults   []string      // the fault kinds the nemesis picks from (nil: all of faultKinds)
}

// Summary is what a run did and found.
type Summary struct {
	Seed                int64
	Duration            time.Duration
	Ops, Acked, Removed int
	Unknown             int // requests whose outcome is not known (timeouts): not counted either way
	LocalOps            int // local record writes
	Faults              map[string]int
	Lost, Resurrected   []string
	ConvergedAfter      time.Duration // every node holds every acknowledged claim and no removed one
	TunnelsAfter        time.Duration // every tunnel client carried a round trip again
	WSAfter             time.Duration // every node's WebSocket subscriber got a hint again
	// Tunnel round trips intact / failed (under faults) and bytes echoed.
	TunnelOK, TunnelFail, TunnelBytes int
	WSMsgs, WSConnects                int
	DNSQueries, DNSAnswered           int
	Panics                            []string
	Before, After                     []levels // per node, before the nemesis and once it stopped
	FreshNode                         int      // the node restarted at the end as the memory reference
	Fresh                             levels   // its levels, fresh on the same data
	Failures                          []string
}

// history prints one line per event, with the time since the start.
type history struct {
	mu    sync.Mutex
	out   io.Writer
	start time.Time
}

func (h *history) logf(format string, a ...any) {
	h.mu.Lock()
	defer h.mu.Unlock()
	fmt.Fprintf(h.out, "%7.1fs  %s\n", time.Since(h.start).Seconds(), fmt.Sprintf(format, a...))
}

// Run runs the chaos run and returns its summary; the error is set when
// the run could not be made (not when it found a failure: Summary.Failures).
func Run(ctx context.Context, cfg Config) (*Summary, error) {
	out := cfg.Out
	if f, err := os.Create(filepath.Join(cfg.Work, "history.log")); err == nil {
		defer f.Close()
		out = io.MultiWriter(cfg.Out, f)
	}
	h := &history{out: out, start: time.Now()}
	rng := rand.New(rand.NewSource(cfg.Seed))
	sum := &Summary{Seed: cfg.Seed, Duration: cfg.Duration, Faults: map[string]int{}}
	h.logf("seed %d, %d nodes, nemesis for %v", cfg.Seed, cfg.Nodes, cfg.Duration)
	c, err := startCluster(ctx, cfg.Prefix, cfg.Work, cfg.Binary, cfg.Nodes)
	if err != nil {
		return nil, err
	}
	defer c.close()
	lab, nodes := c.lab, c.nodes
	h.logf("%d nodes up, each with a session to every other", len(nodes))

	// The echo service behind node 0's tunnel server.
	el, err := listenIn(lab.nsPath(0), echoAddr)
	if err != nil {
		return nil, err
	}
	defer el.Close()
	go testutil.Accept(el, testutil.Echo) // the echo service, until el is closed
	addrs, err := setupTunnels(ctx, nodes, 60*time.Second)
	if err != nil {
		return nil, err
	}
	h.logf("tunnel server on node 0 (echo on %s), clients on the others at %v", echoAddr, addrs[1:])

	rec := newRecord(len(nodes))
	// Writes (claims, local records) stop shortly after the nemesis, so
	// the checker has a fixed set to look for; the traffic (tunnels,
	// WebSocket subscribers, DNS queries) goes on until the checks end.
	wctx, stopWrites := context.WithCancel(ctx)
	tctx, stopTraffic := context.WithCancel(ctx)
	var writes, traffic sync.WaitGroup
	defer func() { stopWrites(); stopTraffic(); writes.Wait(); traffic.Wait() }()
	for i, n := range nodes {
		seed := cfg.Seed*100 + int64(i)*10
		writes.Add(2)
		go func() { defer writes.Done(); workload(wctx, n, rec, seed+1) }()
		go func() { defer writes.Done(); localWorkload(wctx, n, rec, seed+2) }()
		traffic.Add(3)
		go func() { defer traffic.Done(); wsSubscriber(tctx, n, rec) }()
		go func() { defer traffic.Done(); dnsQuerier(tctx, n, rec, seed+3) }()
		go func() { defer traffic.Done(); interfaceSampler(tctx, n, rec) }()
		if i > 0 {
			traffic.Add(1)
			go func() { defer traffic.Done(); tunnelTraffic(tctx, n, addrs[i], rec, seed+4) }()
		}
	}
	// The levels to come back to: every subscriber connected, every
	// tunnel carrying, the workload running.
	if err := waitFor(ctx, 60*time.Second, func() string { return trafficFlowing(rec, len(nodes), time.Time{}) }); err != nil {
		return nil, fmt.Errorf("the workload did not start: %v", err)
	}
	sum.Before = c.levels()
	h.logf("workload running; levels before the nemesis: %v", sum.Before)

	nctx, stopNemesis := context.WithTimeout(ctx, cfg.Duration)
	nemesis(nctx, h, rng, lab, nodes, sum, cfg.Faults)
	stopNemesis()
	lastFault := time.Now()
	if ctx.Err() != nil {
		// Ctrl-C (or the caller's deadline): nothing is checked, the
		// deferred calls stop and remove everything.
		h.logf("interrupted; stopping and removing everything")
		sum.Failures = append(sum.Failures, "interrupted before the checks: "+ctx.Err().Error())
		return sum, nil
	}
	h.logf("nemesis stopped; every fault healed, every node running")
	// The writes go on for a moment on the healed network, then stop.
	transport.Wait(ctx, 2*time.Second)
	stopWrites()
	writes.Wait()

	rec.mu.Lock()
	sum.Ops, sum.Unknown, sum.LocalOps = rec.ops, len(rec.unknown), rec.localOps
	want := map[string]string{}
	for d, hash := range rec.claims {
		if rec.unknown[d] {
			continue
		}
		if rec.removed[d] {
			sum.Removed++
			continue
		}
		want[d] = hash
	}
	sum.Acked = len(rec.claims)
	removed := map[string]bool{}
	for d := range rec.removed {
		if !rec.unknown[d] {
			removed[d] = true
		}
	}
	rec.mu.Unlock()
	h.logf("writes stopped: %d claims and removals (%d claims acknowledged, %d removals acknowledged, %d outcomes unknown), %d local record writes",
		sum.Ops, sum.Acked, sum.Removed, sum.Unknown, sum.LocalOps)

	// Convergence: every node holds every acknowledged claim that was not
	// removed, none of the removed ones, and all agree; every acknowledged
	// local record is there with its last value; every tunnel carries and
	// every subscriber hears again.
	deadline := lastFault.Add(cfg.Converge)
	var last []string
	nextNote := time.Now()
	for {
		polled := time.Now()
		last = check(nodes, want, removed)
		last = append(last, checkLocal(nodes, rec)...)
		took := time.Since(polled)
		if len(last) == 0 && sum.ConvergedAfter == 0 {
			sum.ConvergedAfter = time.Since(lastFault)
			h.logf("converged %.1fs after the last fault (this poll took %.1fs): %d domains on every node, every acknowledged local record in place",
				sum.ConvergedAfter.Seconds(), took.Seconds(), len(want))
		}
		if tr := trafficFlowing(rec, len(nodes), lastFault); tr != "" {
			last = append(last, tr)
		}
		rec.mu.Lock()
		lastTun, lastWS := latest(rec.tunLastOK[1:]), latest(rec.wsLastHint)
		rec.mu.Unlock()
		if sum.TunnelsAfter == 0 && lastTun.After(lastFault) && trafficFlowing(rec, len(nodes), lastFault) == "" {
			sum.TunnelsAfter, sum.WSAfter = lastTun.Sub(lastFault), lastWS.Sub(lastFault)
		}
		if len(last) == 0 {
			h.logf("tunnels carried again %.1fs and every WebSocket subscriber heard a hint %.1fs after the last fault", sum.TunnelsAfter.Seconds(), sum.WSAfter.Seconds())
			break
		}
		if time.Now().After(nextNote) {
			// What is still missing, and each node's sessions: the history
			// says why a convergence took long.
			var ps []int
			for _, n := range nodes {
				ps = append(ps, n.peers())
			}
			slow, _ := lastSlow.Load().(string)
			h.logf("not converged yet (the poll took %.1fs %s; peers per node %v): %s", took.Seconds(), slow, ps, strings.Join(last, "; "))
			nextNote = time.Now().Add(time.Second)
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			sum.Failures = append(sum.Failures, fmt.Sprintf("not converged %v after the last fault: %s", cfg.Converge, strings.Join(last, "; ")))
			for _, l := range last {
				if strings.Contains(l, "lost") {
					sum.Lost = append(sum.Lost, l)
				}
				if strings.Contains(l, "undone") {
					sum.Resurrected = append(sum.Resurrected, l)
				}
			}
			break
		}
		transport.Wait(ctx, 250*time.Millisecond)
	}
	// After a few seconds of the workload's traffic on the healed
	// network, DNS answers what the view holds.
	// Only a converged network has one answer to agree with: without
	// convergence the failure above says it all.
	converged := sum.ConvergedAfter > 0
	if converged {
		dnsAgree(ctx, nodes, want, removed, rec)
	}

	// Goroutines and memory come back to their level (see the bounds
	// beside goroutinesExceed).
	var excess []string
	var tooMany []int // nodes whose goroutines stayed above the bound
	_ = waitFor(ctx, levelSettle, func() string {
		sum.After = c.levels()
		excess = goroutinesExceed(sum.Before, sum.After)
		return strings.Join(excess, "; ")
	})
	h.logf("levels after (goroutines/RSS/live heap): %v", sum.After)
	if len(excess) > 0 {
		sum.Failures = append(sum.Failures, "goroutines not back to their level of before the nemesis: "+strings.Join(excess, "; "))
		for i := range nodes {
			if slices.ContainsFunc(excess, func(e string) bool { return strings.HasPrefix(e, fmt.Sprintf("node %d:", i)) }) {
				tooMany = append(tooMany, i)
			}
		}
	}
	if !converged {
		h.logf("memory not judged: a node that has not converged still holds work in flight")
	} else if ref, fresh, err := freshLevel(ctx, nodes, sum.After, want, removed); err != nil {
		sum.Failures = append(sum.Failures, fmt.Sprintf("node %d restarted for the memory reference: %v", ref, err))
	} else {
		sum.FreshNode, sum.Fresh = ref, fresh
		h.logf("node %d restarted on its data as the memory reference: %v", ref, fresh)
		if ex := heapExceeds(sum.After, fresh); len(ex) > 0 {
			sum.Failures = append(sum.Failures, "memory not back to its level: "+strings.Join(ex, "; "))
		}
	}

	stopTraffic()
	traffic.Wait()
	rec.mu.Lock()
	sum.TunnelOK, sum.TunnelFail, sum.TunnelBytes = rec.tunOK, rec.tunFail, rec.tunBytes
	for i := range nodes {
		sum.WSMsgs += rec.wsMsgs[i]
		sum.WSConnects += rec.wsConnects[i]
	}
	sum.DNSQueries, sum.DNSAnswered = rec.dnsQueries, rec.dnsAnswered
	for _, l := range [][]string{rec.tunCorrupt, rec.dnsBad, rec.wsBad} {
		sum.Failures = append(sum.Failures, l...)
	}
	rec.mu.Unlock()
	for _, n := range nodes {
		for _, p := range n.panics() {
			sum.Panics = append(sum.Panics, fmt.Sprintf("node %d: %s", n.i, p))
		}
	}
	if len(sum.Panics) > 0 {
		sum.Failures = append(sum.Failures, fmt.Sprintf("%d panics: %s", len(sum.Panics), strings.Join(sum.Panics, "; ")))
	}
	// What the extra goroutines do: a Go process writes every
	// goroutine's stack to its stderr on SIGQUIT (and exits), after every
	// other check.
	for _, i := range tooMany {
		nodes[i].quitDump()
		h.logf("node %d's goroutines written to %s (SIGQUIT)", i, filepath.Join(nodes[i].dir, "stderr.log"))
	}
	if len(sum.Failures) > 0 {
		h.logf("FAILED: %d findings; rerun with -seed %d -duration %v", len(sum.Failures), cfg.Seed, cfg.Duration)
	}
	return sum, nil
}

// freshLevel restarts the node with the largest live heap on its own
// data, waits until it holds the converged view again and its tunnel
// client and subscriber work, lets the workload run on it for a few
// seconds and returns its levels.
func freshLevel(ctx context.Context, nodes []*node, after []levels, want map[string]string, removed map[string]bool) (int, levels, error) {
	ref := 0
	for i, l := range after {
		if l.LiveKB > after[ref].LiveKB {
			ref = i
		}
	}
	n := nodes[ref]
	n.kill()
	if err := n.start(""); err != nil {
		return ref, levels{}, err
	}
	err := waitFor(ctx, 60*time.Second, func() string {
		return strings.Join(check([]*node{n}, want, removed), "; ")
	})
	if err != nil {
		return ref, levels{}, err
	}
	// Five seconds of the workload's traffic, read every half second:
	// the largest live heap any collection in that time left (one taken
	// early, while the node was still loading, says less than it holds).
	var fresh levels
	for end := time.Now().Add(5 * time.Second); time.Now().Before(end) && transport.Wait(ctx, 500*time.Millisecond); {
		l := n.levels()
		if l.LiveKB < fresh.LiveKB {
			l.LiveKB = fresh.LiveKB
		}
		fresh = l
	}
	return ref, fresh, nil
}

func latest(ts []time.Time) time.Time {
	var m time.Time
	for _, t := range ts {
		if t.After(m) {
			m = t
		}
	}
	return m
}

// waitFor polls cond (which returns what is still wrong, "" when
// nothing) until it holds or within passes.
func waitFor(ctx context.Context, within time.Duration, cond func() string) error {
	deadline := time.Now().Add(within)
	for {
		what := cond()
		if what == "" {
			return nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("not within %v: %s", within, what)
		}
		transport.Wait(ctx, 200*time.Millisecond)
	}
}

// trafficFlowing says what of the traffic has not worked since since:
// a tunnel client without an intact round trip, a node whose WebSocket
// subscriber heard no update-database hint ("" when all did).
func trafficFlowing(rec *record, n int, since time.Time) string {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	var tun, ws []string
	for i := 0; i < n; i++ {
		if i > 0 && !rec.tunLastOK[i].After(since) {
			tun = append(tun, fmt.Sprint(i))
		}
		if !rec.wsLastHint[i].After(since) {
			ws = append(ws, fmt.Sprint(i))
		}
	}
	var out []string
	if len(tun) > 0 {
		out = append(out, "no tunnel round trip yet through node "+strings.Join(tun, ", "))
	}
	if len(ws) > 0 {
		out = append(out, "no WebSocket hint yet on node "+strings.Join(ws, ", "))
	}
	return strings.Join(out, "; ")
}

// check compares every node's view with what was acknowledged; it
// returns what is wrong, nil when every node agrees with it.
// lastSlow says which node's listing took longest in the last check,
// when that was over a second (for the history).
var lastSlow atomic.Value

// The nodes' views are read at once (one request each, in parallel), so
// a poll ends soon after the moment it looks at.
func check(nodes []*node, want map[string]string, removed map[string]bool) []string {
	var bad []string
	views := make([]map[string]string, len(nodes))
	errs := make([]error, len(nodes))
	tk := make([]time.Duration, len(nodes))
	var wg sync.WaitGroup
	for k, n := range nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s := time.Now()
			views[k], errs[k] = n.view()
			tk[k] = time.Since(s)
		}()
	}
	wg.Wait()
	slowest, took := 0, time.Duration(0)
	for k := range nodes {
		if tk[k] > took {
			slowest, took = k, tk[k]
		}
	}
	if took > time.Second {
		lastSlow.Store(fmt.Sprintf("node %d's listing took %.1fs", slowest, took.Seconds()))
	} else {
		lastSlow.Store("")
	}
	for k, n := range nodes {
		v, err := views[k], errs[k]
		if err != nil {
			bad = append(bad, fmt.Sprintf("node %d: %v", n.i, err))
			continue
		}
		var missing, back, wrong []string
		for d, hash := range want {
			got, ok := v[d]
			switch {
			case !ok:
				missing = append(missing, d)
			case got != hash:
				wrong = append(wrong, d)
			}
		}
		for d := range removed {
			if _, ok := v[d]; ok {
				back = append(back, d)
			}
		}
		bad = append(bad, nodeFindings(n.i,
			finding{missing, "acknowledged claims lost or not there yet"},
			finding{wrong, "claims with another hash"},
			finding{back, "acknowledged removals undone"})...)
	}
	return bad
}

// faultKinds are the nemesis's faults, in the order the summary lists them.
var faultKinds = []string{"kill", "pause", "partition", "netem", "outdrop", "clock", "diskfull"}

// nemesis acts at random until ctx ends: one fault at a time, held for
// a few seconds, then healed, with a quiet gap between faults.
func nemesis(ctx context.Context, h *history, rng *rand.Rand, lab *lab, nodes []*node, sum *Summary, faults []string) {
	if len(faults) == 0 {
		faults = faultKinds
	}
	hold := func(min, max int) bool {
		select {
		case <-time.After(time.Duration(min*1000+rng.Intn((max-min)*1000+1)) * time.Millisecond):
			return true
		case <-ctx.Done():
			return false
		}
	}
	for ctx.Err() == nil {
		if !hold(1, 3) {
			return
		}
		f := faults[rng.Intn(len(faults))]
		i := rng.Intn(len(nodes))
		n := nodes[i]
		sum.Faults[f]++
		switch f {
		case "kill":
			h.logf("nemesis: kill -9 node %d", i)
			n.kill()
			hold(1, 4)
			if err := n.start(""); err != nil {
				h.logf("nemesis: restart of node %d failed: %v", i, err)
				sum.Failures = append(sum.Failures, fmt.Sprintf("node %d did not restart after kill -9: %v", i, err))
				return
			}
			h.logf("nemesis: node %d restarted", i)
		case "pause":
			h.logf("nemesis: SIGSTOP node %d", i)
			n.signal(syscall.SIGSTOP)
			hold(2, 8)
			n.signal(syscall.SIGCONT)
			h.logf("nemesis: SIGCONT node %d", i)
		case "partition":
			perm := rng.Perm(len(nodes))
			k := 1 + rng.Intn(len(nodes)/2)
			side := map[int]bool{}
			for _, p := range perm[:k] {
				side[p] = true
			}
			h.logf("nemesis: partition %v | rest", perm[:k])
			for a := range nodes {
				var cut []string
				for b := range nodes {
					if side[a] != side[b] {
						cut = append(cut, lab.ip(b))
					}
				}
				_ = lab.nsRun(a, "nft", "add element inet chaos cut { "+strings.Join(cut, ", ")+" }")
			}
			hold(3, 10)
			for a := range nodes {
				_ = lab.nsRun(a, "nft", "flush set inet chaos cut")
			}
			h.logf("nemesis: partition healed")
		case "netem":
			loss, delay := 5+rng.Intn(20), 20+rng.Intn(80)
			h.logf("nemesis: netem on node %d: loss %d%%, delay %dms ±%dms, reorder 25%%", i, loss, delay, delay/2)
			_ = lab.nsRun(i, "tc", "qdisc", "add", "dev", "v0", "root", "netem", "loss", fmt.Sprintf("%d%%", loss),
				"delay", fmt.Sprintf("%dms", delay), fmt.Sprintf("%dms", delay/2), "reorder", "25%")
			hold(3, 10)
			_ = lab.nsRun(i, "tc", "qdisc", "del", "dev", "v0", "root")
			h.logf("nemesis: netem on node %d removed", i)
		case "outdrop":
			pct := 2 + rng.Intn(20)
			h.logf("nemesis: node %d's host drops %d%% of its outgoing UDP (sendmsg fails with EPERM)", i, pct)
			_ = lab.nsRun(i, "nft", fmt.Sprintf("add rule inet chaos drops meta l4proto udp numgen random mod 100 < %d drop", pct))
			hold(3, 10)
			_ = lab.nsRun(i, "nft", "flush chain inet chaos drops")
			h.logf("nemesis: node %d's output drops removed", i)
		case "diskfull":
			h.logf("nemesis: node %d's data folder fills up", i)
			filled, err := n.fill()
			if err != nil {
				h.logf("nemesis: fill node %d: %v", i, err)
			}
			hold(3, 10)
			n.free()
			h.logf("nemesis: node %d's data folder has space again (%d MB were filled)", i, filled>>20)
		case "clock":
			// The node's clock: restarted with its wall clock shifted
			// (PEERDNS_TEST_CLOCK_OFFSET, read by the node at start; see
			// the package doc), then restarted on the true clock.
			off := time.Duration(rng.Intn(10)-5) * time.Minute
			if off == 0 {
				off = 3 * time.Minute
			}
			h.logf("nemesis: node %d's clock jumps %v (kill -9, started with the offset)", i, off)
			n.kill()
			n.clockOffset = off
			if err := n.start(""); err != nil {
				sum.Failures = append(sum.Failures, fmt.Sprintf("node %d did not start with its clock %v off: %v", i, off, err))
				return
			}
			hold(3, 10)
			n.kill()
			n.clockOffset = 0
			if err := n.start(""); err != nil {
				sum.Failures = append(sum.Failures, fmt.Sprintf("node %d did not restart on the true clock: %v", i, err))
				return
			}
			h.logf("nemesis: node %d back on the true clock", i)
		}
	}
}
