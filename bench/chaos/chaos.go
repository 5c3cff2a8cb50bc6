//go:build linux

package main

import (
	"context"
	"fmt"
	"io"
	"math/rand"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"
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
}

// Summary is what a run did and found.
type Summary struct {
	Seed                 int64
	Ops, Acked, Removed  int
	Unknown              int // requests whose outcome is not known (timeouts): not counted either way
	Faults               map[string]int
	Lost, Resurrected    []string
	ConvergedAfter       time.Duration
	Panics               []string
	RSSStartKB, RSSEndKB []int
	Failures             []string
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

// record is the workload's own record of what each node acknowledged.
type record struct {
	mu      sync.Mutex
	claims  map[string]string // acknowledged claims: domain → hash
	removed map[string]bool   // acknowledged removals
	unknown map[string]bool   // claims or removals whose outcome is unknown
	ops     int
}

// Run runs the chaos run and returns its summary; the error is set when
// the run could not be made (not when it found a failure: Summary.Failures).
func Run(ctx context.Context, cfg Config) (*Summary, error) {
	h := &history{out: cfg.Out, start: time.Now()}
	rng := rand.New(rand.NewSource(cfg.Seed))
	sum := &Summary{Seed: cfg.Seed, Faults: map[string]int{}}
	h.logf("seed %d, %d nodes, nemesis for %v", cfg.Seed, cfg.Nodes, cfg.Duration)
	lab, err := newLab(cfg.Prefix, cfg.Nodes)
	if err != nil {
		return nil, err
	}
	defer lab.close()
	nodes := make([]*node, cfg.Nodes)
	defer func() {
		for _, n := range nodes {
			if n != nil {
				n.kill()
			}
		}
	}()
	for i := range nodes {
		dir := filepath.Join(cfg.Work, fmt.Sprintf("node%d", i))
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return nil, err
		}
		// The data folder is a small tmpfs of its own: the nemesis fills it.
		data := filepath.Join(dir, "data")
		if err := os.MkdirAll(data, 0o700); err != nil {
			return nil, err
		}
		if err := run("mount", "-t", "tmpfs", "-o", "size=256m,mode=0700", "tmpfs", data); err != nil {
			return nil, err
		}
		defer run("umount", "-l", data)
		nodes[i] = &node{i: i, lab: lab, bin: cfg.Binary, dir: dir, http: lab.client(i)}
	}
	if err := nodes[0].start(""); err != nil {
		return nil, err
	}
	for i := 1; i < len(nodes); i++ {
		inv, err := nodes[0].invite()
		if err != nil {
			return nil, err
		}
		if err := nodes[i].start(inv); err != nil {
			return nil, err
		}
	}
	h.logf("%d nodes up", len(nodes))
	// Every node sees every other before the nemesis starts.
	if err := waitPeers(ctx, nodes, 60*time.Second); err != nil {
		return nil, err
	}
	for _, n := range nodes {
		sum.RSSStartKB = append(sum.RSSStartKB, n.rssKB())
	}

	rec := &record{claims: map[string]string{}, removed: map[string]bool{}, unknown: map[string]bool{}}
	wctx, stopWork := context.WithCancel(ctx)
	var wg sync.WaitGroup
	for i := range nodes {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			workload(wctx, nodes[i], rec, cfg.Seed+int64(i))
		}(i)
	}

	nctx, stopNemesis := context.WithTimeout(ctx, cfg.Duration)
	nemesis(nctx, h, rng, lab, nodes, sum)
	stopNemesis()
	lastFault := time.Now()
	h.logf("nemesis stopped; every fault healed, every node running")
	// The workload goes on for a moment on the healed network, then stops.
	select {
	case <-time.After(2 * time.Second):
	case <-ctx.Done():
	}
	stopWork()
	wg.Wait()

	rec.mu.Lock()
	sum.Ops, sum.Unknown = rec.ops, len(rec.unknown)
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
	h.logf("workload stopped: %d operations, %d claims acknowledged, %d removals acknowledged, %d outcomes unknown", sum.Ops, sum.Acked, sum.Removed, sum.Unknown)

	// Convergence: every node holds every acknowledged claim that was not
	// removed, none of the removed ones, and all agree.
	deadline := lastFault.Add(cfg.Converge)
	var last []string
	for {
		last = check(nodes, want, removed)
		if len(last) == 0 {
			sum.ConvergedAfter = time.Since(lastFault)
			h.logf("converged %.1fs after the last fault: %d domains on every node", sum.ConvergedAfter.Seconds(), len(want))
			break
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
		time.Sleep(250 * time.Millisecond)
	}
	for _, n := range nodes {
		sum.RSSEndKB = append(sum.RSSEndKB, n.rssKB())
		for _, p := range n.panics() {
			sum.Panics = append(sum.Panics, fmt.Sprintf("node %d: %s", n.i, p))
		}
	}
	if len(sum.Panics) > 0 {
		sum.Failures = append(sum.Failures, fmt.Sprintf("%d panics: %s", len(sum.Panics), strings.Join(sum.Panics, "; ")))
	}
	return sum, nil
}

func waitPeers(ctx context.Context, nodes []*node, within time.Duration) error {
	deadline := time.Now().Add(within)
	for {
		ok := true
		for _, n := range nodes {
			code, body, err := n.call("GET", "/api/peers", "")
			if err != nil || code != 200 || strings.Count(body, "\"") < 2*(len(nodes)-1) {
				ok = false
				break
			}
		}
		if ok {
			return nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("the nodes did not all connect within %v", within)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// check compares every node's view with what was acknowledged; it
// returns what is wrong, nil when every node agrees with it.
func check(nodes []*node, want map[string]string, removed map[string]bool) []string {
	var bad []string
	for _, n := range nodes {
		v, err := n.view()
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
		sort.Strings(missing)
		if len(missing) > 0 {
			bad = append(bad, fmt.Sprintf("node %d: %d acknowledged claims lost or not there yet (e.g. %s)", n.i, len(missing), missing[0]))
		}
		if len(wrong) > 0 {
			bad = append(bad, fmt.Sprintf("node %d: %d claims with another hash (e.g. %s)", n.i, len(wrong), wrong[0]))
		}
		if len(back) > 0 {
			bad = append(bad, fmt.Sprintf("node %d: %d acknowledged removals undone (e.g. %s)", n.i, len(back), back[0]))
		}
	}
	return bad
}

// workload claims new domains on its node and removes some of its own
// acknowledged ones, as a user of that node's admin API would, and
// records every outcome.
func workload(ctx context.Context, n *node, rec *record, seed int64) {
	rng := rand.New(rand.NewSource(seed))
	var mine []string
	for seq := 0; ctx.Err() == nil; seq++ {
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Duration(100+rng.Intn(200)) * time.Millisecond):
		}
		if len(mine) > 0 && rng.Intn(5) == 0 {
			k := rng.Intn(len(mine))
			d := mine[k]
			mine = append(mine[:k], mine[k+1:]...)
			code, _, err := n.call("POST", "/api/remove-domain", `{"domain":"`+d+`"}`)
			rec.mu.Lock()
			rec.ops++
			switch {
			case code == 200:
				rec.removed[d] = true
			case err != nil || code >= 500:
				// A timeout or a failure half way: the removal may have
				// been signed.
				rec.unknown[d] = true
			}
			// 403 and other refusals: nothing was written, the claim stays.
			rec.mu.Unlock()
			continue
		}
		d := fmt.Sprintf("w%d-%05d.p2p", n.i, seq)
		hash := "hs://" + fmt.Sprintf("%064x", rng.Uint64())
		code, _, err := n.call("POST", "/api/add-domain", `{"domain":"`+d+`","hash":"`+hash+`"}`)
		rec.mu.Lock()
		rec.ops++
		switch {
		case err != nil:
			rec.claims[d] = hash
			rec.unknown[d] = true // a timeout: it may have been written
		case code == 200:
			rec.claims[d] = hash
			mine = append(mine, d)
		}
		rec.mu.Unlock()
	}
}

// nemesis acts at random until ctx ends: one fault at a time, held for
// a few seconds, then healed, with a quiet gap between faults.
func nemesis(ctx context.Context, h *history, rng *rand.Rand, lab *lab, nodes []*node, sum *Summary) {
	faults := []string{"kill", "pause", "partition", "netem", "outdrop", "clock", "diskfull"}
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
