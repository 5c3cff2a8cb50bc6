//go:build linux

package main

import (
	"context"
	"fmt"
	"io"
	"math/rand"
	randv2 "math/rand/v2"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// Config is one run.
type Config struct {
	Binary string // the peerdns binary
	Prefix string // namespace names
	Work   string // data folders and logs
	Out    io.Writer
	Seed   int64

	Nodes      int           // node processes
	Wave       int           // nodes started side by side while joining
	MinPeers   int           // connected peers each node needs before the claims (-1: all others)
	Claimers   int           // nodes that claim in a burst
	ClaimsEach int           // claims per claimer per burst
	Clients    int           // concurrent requests per claimer
	Rounds     int           // bursts (each of new domains)
	Kills      int           // nodes killed with SIGKILL and restarted (0: none)
	Partition  bool          // split the fleet in two, claim on both sides, heal
	SideClaims int           // claims on each side during the partition
	Conflicts  int           // domains claimed on both sides during the partition
	PartHold   time.Duration // the least time from the cut to the heal
	Settle     time.Duration // bound on each wait for agreement (after a burst, a restart, the heal)
	JoinWithin time.Duration // bound on joining and meshing
	IdleWindow time.Duration // the fleet's idle CPU is measured over this (0: not)
	Profile    string        // folder for the nodes' CPU profiles ("": none)
	// ProfileStep limits the profiles to one step: "idle" or "bursts"
	// ("": the whole run)
	ProfileStep string
}

// Result is what a run measured; Failures is set when a check failed.
type Result struct {
	Rows     [][2]string // the table: step, measured
	Bursts   []Burst
	Failures []string
}

// Burst is one burst's timings.
type Burst struct {
	Claims    int
	Acked     time.Duration // first request sent → last acknowledged
	FromFirst time.Duration // first request sent → resolved alike on every node
	FromAck   time.Duration // last acknowledged → resolved alike on every node
	Slowest   int           // the node that held them all last
	Reads     *readTimes    // the listing reads of the wait
	// AckP50, AckP90: a claim's request → its 200 answer (the claim
	// settled on its node), over the burst's claims.
	AckP50, AckP90 time.Duration
}

type runner struct {
	cfg   Config
	f     *fleet
	rng   *rand.Rand
	res   *Result
	start time.Time
	all   *claims // every acknowledged claim of the run
	// unknown counts add-domain requests that got no answer in time.
	unknown atomic.Int64
}

func (r *runner) logf(format string, a ...any) {
	fmt.Fprintf(r.cfg.Out, "%7.1fs  %s\n", time.Since(r.start).Seconds(), fmt.Sprintf(format, a...))
}

func (r *runner) row(step, format string, a ...any) {
	r.res.Rows = append(r.res.Rows, [2]string{step, fmt.Sprintf(format, a...)})
	r.logf("%s: %s", step, fmt.Sprintf(format, a...))
}

// profileStep marks the nodes' profile window (sig: SIGUSR1 opens it,
// SIGUSR2 writes it) when the run profiles step alone.
func (r *runner) profileStep(step string, sig syscall.Signal) {
	if r.cfg.Profile != "" && r.cfg.ProfileStep == step {
		r.f.signal(sig)
	}
}

func (r *runner) fail(format string, a ...any) {
	r.res.Failures = append(r.res.Failures, fmt.Sprintf(format, a...))
	r.logf("FAILURE: %s", fmt.Sprintf(format, a...))
}

// Run builds the fleet, runs the steps the config asks for, and deletes
// everything it made before returning (also when ctx ends). The error is
// set when the run could not be made; failed checks are in
// Result.Failures.
func Run(ctx context.Context, cfg Config) (*Result, error) {
	r := &runner{cfg: cfg, rng: rand.New(rand.NewSource(cfg.Seed)), res: &Result{}, start: time.Now(), all: &claims{}}
	r.logf("seed %d: %d nodes, %d claimers × %d claims × %d rounds, kills %d, partition %v", cfg.Seed, cfg.Nodes, cfg.Claimers, cfg.ClaimsEach, cfg.Rounds, cfg.Kills, cfg.Partition)
	t := time.Now()
	f, err := newFleet(cfg.Prefix, cfg.Binary, cfg.Work, cfg.Nodes, cfg.Profile, cfg.ProfileStep, r.logf)
	if err != nil {
		return nil, err
	}
	r.f = f
	defer f.close()
	r.row("lab", "%d namespaces on one bridge made in %.1f s", cfg.Nodes+1, time.Since(t).Seconds())

	t = time.Now()
	if err := f.join(ctx, r.rng, cfg.Wave, cfg.JoinWithin); err != nil {
		return r.res, fmt.Errorf("join: %w", err)
	}
	hubs := map[int]int{}
	for _, by := range f.joinedBy[1:] {
		hubs[by]++
	}
	r.row("join", "%d processes started and each connected in %.1f s (waves of %d; %d distinct introducers, node 0 introduced %d)",
		cfg.Nodes, time.Since(t).Seconds(), cfg.Wave, len(hubs), hubs[0])
	everyone := f.everyone()
	t = time.Now()
	conns, err := f.meshed(ctx, everyone, cfg.MinPeers, cfg.JoinWithin)
	if err != nil {
		return r.res, fmt.Errorf("mesh: %w", err)
	}
	sort.Ints(conns)
	r.row("mesh", "every node connected to %s and hearing all %d others (connected or by heartbeat) within %.1f s of the last start; sessions per node %d-%d, median %d",
		peersWanted(cfg), cfg.Nodes-1, time.Since(t).Seconds(), conns[0], conns[len(conns)-1], conns[len(conns)/2])
	r.row("memory", "RSS per node after meshing: %s", r.rssSummary())
	cpu0 := r.cpu()
	r.row("cpu", "all nodes' CPU from their starts to meshed: %.1f s", cpu0)
	// The fleet's idle cost: its CPU over a 5 s window with no request.
	if cfg.IdleWindow > 0 {
		t := time.Now()
		r.profileStep("idle", syscall.SIGUSR1)
		select {
		case <-time.After(cfg.IdleWindow):
		case <-ctx.Done():
			return r.res, ctx.Err()
		}
		r.profileStep("idle", syscall.SIGUSR2)
		c := r.cpu()
		r.row("idle", "all nodes' CPU while idle: %.2f cores (%.1f s over %.1f s; %.3f cores per node)", (c-cpu0)/time.Since(t).Seconds(), c-cpu0, time.Since(t).Seconds(), (c-cpu0)/time.Since(t).Seconds()/float64(cfg.Nodes))
		cpu0 = c
	}

	// Bursts: every claimer claims at once; agreement is polled once
	// every claim is acknowledged.
	claimers := r.rng.Perm(cfg.Nodes)[:cfg.Claimers]
	sort.Ints(claimers)
	r.profileStep("bursts", syscall.SIGUSR1)
	w0 := r.f.counters()
	for round := 0; round < cfg.Rounds && ctx.Err() == nil; round++ {
		b, err := r.burst(ctx, fmt.Sprintf("b%d", round), claimers, cfg.ClaimsEach)
		if err != nil {
			r.fail("burst %d: %v", round, err)
			break
		}
		r.res.Bursts = append(r.res.Bursts, b)
		r.row(fmt.Sprintf("burst %d", round+1), "%d claims from nodes %v: acknowledged in %.2f s (each in %.1f ms, p90 %.1f); resolved alike on all %d %.2f s after the first claim, %.2f s after the last acknowledgement (slowest node %d); listings read while waiting: %v",
			b.Claims, claimers, b.Acked.Seconds(), ms(b.AckP50), ms(b.AckP90), cfg.Nodes, b.FromFirst.Seconds(), b.FromAck.Seconds(), b.Slowest, b.Reads)
	}
	if len(r.res.Bursts) > 1 {
		var ff, fa []time.Duration
		for _, b := range r.res.Bursts {
			ff, fa = append(ff, b.FromFirst), append(fa, b.FromAck)
		}
		r.row("bursts", "median of %d: %s from the first claim, %s from the last acknowledgement", len(ff), medianRange(ff), medianRange(fa))
	}
	r.profileStep("bursts", syscall.SIGUSR2)
	cpu1 := r.cpu()
	r.row("cpu", "all nodes' CPU from meshed to the end of the bursts: %.1f s", cpu1-cpu0)
	r.row("work", "the bursts, all nodes: %s", r.f.settledCounters().minus(w0))

	if cfg.Kills > 0 && ctx.Err() == nil && len(r.res.Failures) == 0 {
		r.kills(ctx, claimers)
	}
	if cfg.Partition && ctx.Err() == nil && len(r.res.Failures) == 0 {
		r.partition(ctx)
	}
	r.row("memory", "RSS per node at the end: %s", r.rssSummary())
	if u := r.unknown.Load(); u > 0 {
		r.row("timeouts", "%d add-domain requests unanswered within %v or answered 5xx (outcome unknown, left out of the checks)", u, callTimeout)
	}
	if p := f.panics(); len(p) > 0 {
		r.fail("%d panics: %s", len(p), strings.Join(p, "; "))
	}
	if err := ctx.Err(); err != nil {
		return r.res, err
	}
	return r.res, nil
}

func peersWanted(cfg Config) string {
	if cfg.MinPeers < 0 || cfg.MinPeers >= cfg.Nodes-1 {
		return fmt.Sprintf("all %d others", cfg.Nodes-1)
	}
	return fmt.Sprintf("at least %d others", cfg.MinPeers)
}

func (f *fleet) everyone() []int {
	out := make([]int, len(f.nodes))
	for i := range out {
		out[i] = i
	}
	return out
}

// claimOn sends add-domain requests for n new domains on node i,
// clients at a time, and records the acknowledged ones in cs and in the
// run's set. It returns the time of the last acknowledgement.
func (r *runner) claimOn(i int, tag string, n, clients int, cs *claims, domains []string) (time.Time, error) {
	node := r.f.nodes[i].get()
	if node == nil {
		return time.Time{}, fmt.Errorf("node %d is down", i)
	}
	if domains == nil {
		for k := 0; k < n; k++ {
			domains = append(domains, fmt.Sprintf("f50%s-n%d-%d.p2p", tag, i, k))
		}
	}
	work := make(chan string)
	var mu sync.Mutex
	var last time.Time
	var firstErr error
	var wg sync.WaitGroup
	for c := 0; c < max(clients, 1); c++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for d := range work {
				hash := fmt.Sprintf("hs://%016x%016x%016x%016x", randv2.Uint64(), randv2.Uint64(), randv2.Uint64(), randv2.Uint64())
				sent := time.Now()
				code, body, err := r.f.call(i, "POST", "/api/add-domain", `{"domain":"`+d+`","hash":"`+hash+`"}`)
				took := time.Since(sent)
				mu.Lock()
				switch {
				case err != nil || code >= 500:
					// No answer within callTimeout, or the node's own
					// "did not answer in time" (500): the claim may or may
					// not have been written; it is left out of the checks
					// and counted.
					if err == nil {
						err = fmt.Errorf("%d %s", code, strings.TrimSpace(string(body)))
					}
					r.unknown.Add(1)
					r.logf("node %d: add-domain %s: %v (outcome unknown, left out)", i, d, err)
				case code != 200:
					if firstErr == nil {
						firstErr = fmt.Errorf("node %d: add-domain %s: %d %s", i, d, code, strings.TrimSpace(string(body)))
					}
				default:
					cl := claim{node: i, id: node.ID, hash: hash}
					cs.add(d, cl)
					cs.acked(took)
					r.all.add(d, cl)
					last = time.Now()
				}
				mu.Unlock()
			}
		}()
	}
	for _, d := range domains {
		work <- d
	}
	close(work)
	wg.Wait()
	return last, firstErr
}

// burst claims n domains on each claimer at once and waits until every
// node resolves them all alike.
func (r *runner) burst(ctx context.Context, tag string, claimers []int, n int) (Burst, error) {
	cs := &claims{}
	first := time.Now()
	var mu sync.Mutex
	var lastAck time.Time
	errs := make([]error, len(claimers))
	var wg sync.WaitGroup
	for k, i := range claimers {
		wg.Add(1)
		go func(k, i int) {
			defer wg.Done()
			last, err := r.claimOn(i, tag, n, r.cfg.Clients, cs, nil)
			errs[k] = err
			mu.Lock()
			if last.After(lastAck) {
				lastAck = last
			}
			mu.Unlock()
		}(k, i)
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return Burst{}, err
		}
	}
	b := Burst{Claims: len(cs.list), Acked: lastAck.Sub(first), Reads: &readTimes{}}
	b.AckP50, b.AckP90 = cs.ackTimes()
	done, err := r.f.converge(ctx, r.f.everyone(), cs, "f50"+tag+"-", first, r.cfg.Settle, b.Reads)
	if err != nil {
		return b, err
	}
	b.Slowest, b.FromFirst = slowest(done)
	b.FromAck = b.FromFirst - b.Acked
	return b, nil
}

// kills: SIGKILL a few nodes (never node 0, which every run keeps as a
// fixed point), claim on live nodes while they are down, start them again
// on their data, and wait until every node holds every claim of the run.
func (r *runner) kills(ctx context.Context, claimers []int) {
	victims := r.rng.Perm(r.cfg.Nodes - 1)[:min(r.cfg.Kills, r.cfg.Nodes-2)]
	for k := range victims {
		victims[k]++
	}
	sort.Ints(victims)
	down := map[int]bool{}
	for _, v := range victims {
		r.f.kill(v)
		down[v] = true
	}
	r.logf("kill -9 nodes %v", victims)
	var live []int
	for _, i := range claimers {
		if !down[i] {
			live = append(live, i)
		}
	}
	if len(live) == 0 {
		live = []int{0}
	}
	cs := &claims{}
	n := max(r.cfg.ClaimsEach/2, 1)
	if _, err := r.claimOn(live[0], "k", n, r.cfg.Clients, cs, nil); err != nil {
		r.fail("claims while nodes were down: %v", err)
		return
	}
	t := time.Now()
	for _, v := range victims {
		if err := r.f.start(v, ""); err != nil {
			r.fail("restart of node %d on its data: %v", v, err)
			return
		}
	}
	up := time.Since(t)
	done, err := r.f.converge(ctx, r.f.everyone(), r.all, "f50", t, r.cfg.Settle, nil)
	if err != nil {
		r.fail("after restarting %v: %v", victims, err)
		return
	}
	who, d := slowest(done)
	r.row("kill -9", "nodes %v killed; %d claims made on node %d while they were down; restarted on their data in %.1f s; every node held all %d claims of the run, alike, %.2f s after the restarts began (slowest node %d)",
		victims, len(cs.list), live[0], up.Seconds(), len(r.all.list), d.Seconds(), who)
}

// partition: two random halves, cut apart on the bridge; claims on both
// sides and conflicting claims (one domain claimed on each side); then
// the heal and the wait for one view everywhere.
func (r *runner) partition(ctx context.Context) {
	perm := r.rng.Perm(r.cfg.Nodes)
	// Uneven halves, so a conflict voted along the cut has a majority.
	cutAt := r.cfg.Nodes / 2
	if r.cfg.Nodes%2 == 0 {
		cutAt--
	}
	a, b := append([]int(nil), perm[:cutAt]...), append([]int(nil), perm[cutAt:]...)
	sort.Ints(a)
	sort.Ints(b)
	if err := r.f.partition(a, b); err != nil {
		r.fail("partition: %v", err)
		return
	}
	t := time.Now()
	cut := t
	r.logf("partition: %v | %v", a, b)
	// Each node notices: it lists no peer of the other side.
	err := poll(ctx, r.cfg.Settle, func() error {
		return forAll(r.f.everyone(), 8, func(i int) error {
			ids, err := r.f.peers(i)
			if err != nil {
				return fmt.Errorf("node %d: %w", i, err)
			}
			other := b
			if contains(b, i) {
				other = a
			}
			for _, id := range ids {
				for _, j := range other {
					if n := r.f.nodes[j].get(); n != nil && n.ID == id {
						return fmt.Errorf("node %d still lists node %d as connected", i, j)
					}
				}
			}
			return nil
		})
	})
	if err != nil {
		r.fail("partition not noticed: %v", err)
		return
	}
	r.row("partition", "%d and %d nodes cut apart on the bridge; every node dropped the other side's sessions within %.1f s", len(a), len(b), time.Since(t).Seconds())

	sideA, sideB := &claims{}, &claims{}
	var conflicts []string
	for k := 0; k < r.cfg.Conflicts; k++ {
		conflicts = append(conflicts, fmt.Sprintf("f50x-%d.p2p", k))
	}
	var wg sync.WaitGroup
	errs := make([]error, 4)
	wg.Add(4)
	go func() {
		defer wg.Done()
		_, errs[0] = r.claimOn(a[0], "pa", r.cfg.SideClaims, r.cfg.Clients, sideA, nil)
	}()
	go func() {
		defer wg.Done()
		_, errs[1] = r.claimOn(b[0], "pb", r.cfg.SideClaims, r.cfg.Clients, sideB, nil)
	}()
	go func() { defer wg.Done(); _, errs[2] = r.claimOn(a[len(a)-1], "x", 0, 1, sideA, conflicts) }()
	go func() { defer wg.Done(); _, errs[3] = r.claimOn(b[len(b)-1], "x", 0, 1, sideB, conflicts) }()
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			r.fail("claims during the partition: %v", err)
			return
		}
	}
	// What each side makes of its own claims while cut off (reported, not
	// required: a side may lack a quorum).
	for _, s := range []struct {
		name string
		set  []int
		cs   *claims
	}{{"A", a, sideA}, {"B", b, sideB}} {
		t := time.Now()
		if _, err := r.f.converge(ctx, s.set, s.cs, "f50", t, 10*time.Second, nil); err != nil {
			r.row("side "+s.name, "its %d claims not resolved alike on its %d nodes within 10 s: %v", len(s.cs.list), len(s.set), err)
		} else {
			r.row("side "+s.name, "its %d claims (%d conflicting with the other side) resolved alike on its %d nodes within %.2f s", len(s.cs.list), len(conflicts), len(s.set), time.Since(t).Seconds())
		}
	}
	if wait := r.cfg.PartHold - time.Since(cut); wait > 0 {
		// A partition longer than the half minute a dialer held back
		// by a full view lives.
		r.logf("partition: held %v more before the heal", wait.Round(time.Second))
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
	}
	if err := r.f.heal(); err != nil {
		r.fail("heal: %v", err)
		return
	}
	t = time.Now()
	done, err := r.f.converge(ctx, r.f.everyone(), r.all, "f50", t, r.cfg.Settle, nil)
	if err != nil {
		r.fail("after the heal: %v", err)
		// Each node's consensus on the conflicting domains, to tell a
		// split view from a slow one.
		for _, c := range conflicts {
			for i := range r.f.nodes {
				var cs struct {
					Status           string         `json:"status"`
					ResolvedClaimant *string        `json:"resolvedClaimant"`
					VoteCounts       map[string]int `json:"voteCounts"`
					ActivePeers      int            `json:"activePeers"`
					MinVotes         int            `json:"minVotes"`
					TotalVotes       int            `json:"totalVotes"`
				}
				if err := r.f.getJSON(i, "/api/consensus/"+c, &cs); err != nil {
					r.logf("%s on node %d: %v", c, i, err)
					continue
				}
				who := ""
				if cs.ResolvedClaimant != nil {
					who = (*cs.ResolvedClaimant)[:8]
				}
				votes := map[string]int{}
				for k, v := range cs.VoteCounts {
					votes[k[:min(8, len(k))]] = v
				}
				r.logf("%s on node %d: %s %s votes %v active %d minVotes %d total %d", c, i, cs.Status, who, votes, cs.ActivePeers, cs.MinVotes, cs.TotalVotes)
			}
		}
		return
	}
	who, d := slowest(done)
	// How the conflicts came out.
	v, err := r.f.view(0, "f50x-")
	var outcome []string
	if err == nil {
		for _, c := range conflicts {
			s := v[c]
			side := s.Status
			if s.Status == "resolved" {
				side = "side B's"
				for _, cl := range sideA.by[c] {
					if cl.hash == s.Hash {
						side = "side A's"
					}
				}
			}
			outcome = append(outcome, c+": "+side)
		}
	}
	r.row("heal", "all %d nodes held all %d claims of the run, alike, %.2f s after the heal (slowest node %d); conflicts: %s",
		r.cfg.Nodes, len(r.all.list), d.Seconds(), who, strings.Join(outcome, ", "))
}

func contains(s []int, x int) bool {
	for _, v := range s {
		if v == x {
			return true
		}
	}
	return false
}

func (r *runner) cpu() float64 {
	s := 0.0
	for i := range r.f.nodes {
		s += r.f.cpuSeconds(i)
	}
	return s
}

func (r *runner) rssSummary() string {
	var kb []int
	for i := range r.f.nodes {
		if v := r.f.rssKB(i); v > 0 {
			kb = append(kb, v)
		}
	}
	if len(kb) == 0 {
		return "unknown"
	}
	sort.Ints(kb)
	sum := 0
	for _, v := range kb {
		sum += v
	}
	return fmt.Sprintf("median %.0f MB (%.0f-%.0f), %.1f GB in all", float64(kb[len(kb)/2])/1024, float64(kb[0])/1024, float64(kb[len(kb)-1])/1024, float64(sum)/1024/1024)
}

// medianRange is "median (min-max)" of ds in seconds.
func medianRange(ds []time.Duration) string {
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return fmt.Sprintf("%.2f s (%.2f-%.2f)", s[len(s)/2].Seconds(), s[0].Seconds(), s[len(s)-1].Seconds())
}
