//go:build linux

// Command chaos is the chaos run: five `peerdns node` processes in
// network namespaces of their own, a steady workload on their admin
// APIs, and a nemesis acting at random (with a seed) for a set time; then
// a checker that says whether anything acknowledged was lost and how
// long the nodes took to agree after the last fault.
//
//	go build -o /tmp/peerdns ./cmd/peerdns
//	sudo go run ./bench/chaos -bin /tmp/peerdns -duration 10m -seed 42
//
// The lab: namespaces <prefix>0..4 (default pft-c<pid>-) on a bridge in
// <prefix>h, addresses 192.0.2.10-14/24, no route out. Each node's admin
// API listens on its namespace's loopback; the run reaches it through
// sockets made inside the namespace (setns on a thread of their own).
//
// The workload: on every node, one client claims a new domain every
// 100-300 ms (w<node>-<seq>.p2p, a random hash) and now and then removes
// one of its own acknowledged claims. It records each outcome: 200 is
// acknowledged; a timeout or a refused connection is unknown (the write
// may or may not have happened) and is left out of the checks.
//
// The nemesis, one fault at a time, each held 2-10 s then healed, 1-3 s
// apart: kill -9 and restart on the same data; SIGSTOP then SIGCONT;
// a partition of 1-2 nodes from the rest (nftables in every namespace,
// a new shape each time); loss, delay and reordering on one node's link
// (tc netem); drops of 2-21% of one node's outgoing UDP at its own output
// hook (sendmsg fails with EPERM); and a clock jump of minutes on one
// node (restarted with PEERDNS_TEST_CLOCK_OFFSET, which shifts the
// ledger's wall clock: the node reads its time through an injectable
// clock, and the system clock of a shared machine is not ours to move);
// and a data folder that fills up (each node's is a 256 MB tmpfs; a
// filler file takes the rest, then goes). Writes a full disk refuses are
// answered 507, so they are not acknowledged and not expected.
//
// The checker, once the nemesis stopped and every fault is healed:
// every acknowledged claim not removed is resolved with its hash on every
// node and no acknowledged removal is undone, within -converge (30 s) of
// the last fault (the time it took is printed); no node process panicked
// (its stderr); RSS at the start and the end is printed. Not checked
// here: DNS answers, tunnel traffic and WebSocket subscribers under the
// nemesis, and goroutine counts (the node exposes them only on its
// WebSocket stats).
//
// Everything it made (processes, namespaces) is removed on exit, also on
// Ctrl-C. A failure prints the seed that reproduces the run.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"
)

func main() {
	cfg := Config{Out: os.Stdout, Nodes: 5}
	flag.StringVar(&cfg.Binary, "bin", "", "the peerdns binary (go build -o /tmp/peerdns ./cmd/peerdns)")
	flag.DurationVar(&cfg.Duration, "duration", 10*time.Minute, "how long the nemesis acts")
	flag.Int64Var(&cfg.Seed, "seed", time.Now().UnixNano()%1_000_000, "random seed (printed; reruns the same faults in the same order)")
	flag.DurationVar(&cfg.Converge, "converge", 30*time.Second, "bound on the time to agree after the last fault")
	flag.StringVar(&cfg.Prefix, "prefix", fmt.Sprintf("ch-%d-", os.Getpid()%100000), "network namespace prefix")
	flag.Parse()
	if cfg.Binary == "" {
		fmt.Fprintln(os.Stderr, "chaos: -bin is required")
		os.Exit(2)
	}
	work, err := os.MkdirTemp("", "peerdns-chaos-*")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	cfg.Work = work
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	sum, err := Run(ctx, cfg)
	if err != nil {
		fmt.Fprintf(os.Stderr, "chaos: %v (seed %d; logs in %s)\n", err, cfg.Seed, work)
		os.Exit(1)
	}
	fmt.Print(sum.String())
	if len(sum.Failures) > 0 {
		fmt.Printf("FAILED (seed %d; node logs in %s)\n", sum.Seed, work)
		os.Exit(1)
	}
	os.RemoveAll(work)
}

// String is the summary as printed.
func (s *Summary) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "seed %d, nemesis %v: %d claim and removal operations (%d claims acknowledged, %d removals acknowledged, %d outcomes unknown), %d local record writes\n",
		s.Seed, s.Duration, s.Ops, s.Acked, s.Removed, s.Unknown, s.LocalOps)
	total := 0
	var fs []string
	for _, f := range faultKinds {
		total += s.Faults[f]
		fs = append(fs, fmt.Sprintf("%s %d", f, s.Faults[f]))
	}
	fmt.Fprintf(&b, "faults injected: %d (%s)\n", total, strings.Join(fs, ", "))
	fmt.Fprintf(&b, "tunnels: %d round trips intact (%.1f MB), %d failed under faults; WebSocket: %d messages on %d connections; DNS: %d queries, %d answered\n",
		s.TunnelOK, float64(s.TunnelBytes)/1e6, s.TunnelFail, s.WSMsgs, s.WSConnects, s.DNSQueries, s.DNSAnswered)
	fmt.Fprintf(&b, "lost: %d, acknowledged removals undone: %d, panics: %d\n", len(s.Lost), len(s.Resurrected), len(s.Panics))
	if s.ConvergedAfter > 0 {
		fmt.Fprintf(&b, "converged %.1f s after the last fault; tunnels carried again after %.1f s, WebSocket hints after %.1f s\n",
			s.ConvergedAfter.Seconds(), s.TunnelsAfter.Seconds(), s.WSAfter.Seconds())
	}
	fmt.Fprintf(&b, "levels (goroutines/RSS/heap in use) before the nemesis %v, after %v\n", s.Before, s.After)
	for _, f := range s.Failures {
		fmt.Fprintf(&b, "FAILURE: %s\n", f)
	}
	if len(s.Failures) > 0 {
		fmt.Fprintf(&b, "reproduce: go run ./bench/chaos -bin <peerdns> -seed %d -duration %v\n", s.Seed, s.Duration)
	}
	return b.String()
}
