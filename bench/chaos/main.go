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
// -faults picks the fault kinds (e.g. -faults diskfull to reproduce a
// finding of one kind), -keep keeps the node logs and the history of a
// run that passed (a failed run always keeps them).
//
// The lab: namespaces <prefix>0..4 (default ch-<pid>-) on a bridge in
// <prefix>h, addresses 192.0.2.10-14/24, no route out. Each node's admin
// API and DNS listen on its namespace's loopback; the run reaches them
// through sockets made inside the namespace (setns on a thread of their
// own). Every node's data folder is a 256 MB tmpfs of its own.
//
// The workload, on every node, recorded outcome by outcome:
//
//   - claims and removals: one client claims a new domain every 100-300
//     ms (w<node>-<seq>.p2p, a random hash) and now and then removes one
//     of its own acknowledged claims. 200 is acknowledged; a timeout, a
//     refused connection or a 5xx other than 507 is unknown (the write
//     may or may not have happened) and left out of the checks; 403 and
//     507 (disk full) wrote nothing.
//   - local records: another client adds, changes and deletes A records
//     of the node's local DNS (l<node>-<seq>.chaos.lan, 198.51.100.0/24)
//     every 200-600 ms, with the same outcome rules; every value it ever
//     wrote or tried to write is kept per name.
//   - tunnel traffic: an echo service in node 0's namespace behind a
//     tunnel server on node 0; every other node claims t<node>.p2p with
//     the server's URL and runs a tunnel client for it; through each
//     client, every 200-400 ms, a new connection carries 1 B-32 KiB of
//     seeded random bytes, and what comes back must be those bytes.
//   - WebSocket subscribers: one per node on /ws (subscribe-stats),
//     connecting again whenever the connection ends; every message must
//     be JSON with a type; the update-database hints are timed.
//   - DNS queries: every 100-300 ms, each node's DNS is asked for the A
//     record of a p2p name the workload claimed (on any node), a local
//     record written on that node, or a name nobody claimed; the node's
//     /api/interfaces (its domain → address listing) is read every
//     second for the check.
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
// and a data folder that fills up (a filler file takes the rest of the
// tmpfs, then goes). Writes a full disk refuses are answered 507, so they
// are not acknowledged and not expected. The claims and local record
// writes go on for 2 s after the nemesis stopped (then wait for their
// last request, at most the client's 5 s timeout); the traffic goes on
// until the checks end.
//
// The checker:
//
//   - no acknowledged write lost, and convergence: within -converge
//     (default 30 s; the goal is 10 s) of the last fault's healing, every
//     node resolves every acknowledged claim not removed with its hash,
//     none of the acknowledged removals, and holds every local record
//     whose last write was acknowledged with that value (none deleted
//     with an acknowledged delete). The time printed is from the last
//     fault's healing to the end of the first poll that found all of
//     this on every node: it includes the 2 s of writes after the
//     nemesis and the poll itself (the five full listings, read in
//     parallel, each allowed 20 s: thousands of domains are 1-2 MB of
//     JSON, slow on a loaded machine; the history names the slowest node
//     of a poll over a second), so it is an upper bound.
//   - tunnels and hints: within the same bound, every tunnel client
//     carried an intact round trip and every node's subscriber heard an
//     update-database hint after the last fault. Bytes that come back
//     different from those sent fail the run at any time; a connection
//     that fails under a fault does not (it is counted).
//   - DNS never answers a value that was not resolved at some moment:
//     during the whole run, a local name answers only values written to
//     it, a p2p name only an address that node's /api/interfaces gave
//     that domain at some moment (read again at once when an answer is
//     not in the record yet), a name nobody claimed nothing. Once the
//     views agree, a sample of 20 resolved, 20 removed and 20 local names
//     per node must answer the view's value (resolved: an address;
//     removed: none; local: the last acknowledged value).
//   - no process panics: no line of any node's stderr (across all its
//     restarts) starts with "panic:" or "fatal error:".
//     The DNS sample and the memory level below are judged only once the
//     views converged.
//   - levels: goroutines (go_goroutines on /metrics) of each node, taken
//     once the workload runs and before the nemesis, and again after
//     convergence with the same workload running, polled for up to 30 s:
//     at most 1.25x before + 30. Memory: the live Go heap
//     (go_memstats_next_gc_bytes / (1+GOGC/100): what the last
//     collection kept). A node holds more data at the end than at the
//     start, so the level it must come back to is that of the same node
//     started afresh on the same data: the node with the largest live
//     heap is restarted (kill -9) once all were measured, and once it
//     holds the converged view it runs the workload 5 s, read every half
//     second (the largest live heap of those readings counts); every
//     node's live heap after the nemesis must be within 1.5x + 16 MiB of
//     that fresh process's. RSS is printed beside them, not bounded (the Go
//     runtime returns freed memory to the system lazily).
//
// The history (one line per fault, heal and finding, with the time since
// the start) is printed as the run goes; a failure ends with the seed and
// the command that reproduces it, and keeps the node logs.
//
// Everything it made (processes, mounts, namespaces) is removed on exit,
// also on Ctrl-C.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	"peerdns/bench/runwork"
)

func main() {
	cfg := Config{Out: os.Stdout, Nodes: 5}
	flag.StringVar(&cfg.Binary, "bin", "", "the peerdns binary (go build -o /tmp/peerdns ./cmd/peerdns)")
	flag.DurationVar(&cfg.Duration, "duration", 10*time.Minute, "how long the nemesis acts")
	flag.Int64Var(&cfg.Seed, "seed", time.Now().UnixNano()%1_000_000, "random seed (printed; reruns the same faults in the same order)")
	flag.DurationVar(&cfg.Converge, "converge", 30*time.Second, "bound on the time to agree after the last fault")
	flag.StringVar(&cfg.Prefix, "prefix", fmt.Sprintf("ch-%d-", os.Getpid()%100000), "network namespace prefix")
	faults := flag.String("faults", strings.Join(faultKinds, ","), "the fault kinds the nemesis picks from (a subset reproduces one kind of failure)")
	keep := flag.Bool("keep", false, "keep the node logs and the history also when the run passes")
	flag.Parse()
	for _, f := range strings.Split(*faults, ",") {
		if !slices.Contains(faultKinds, f) {
			fmt.Fprintf(os.Stderr, "chaos: unknown fault %q (known: %s)\n", f, strings.Join(faultKinds, ","))
			os.Exit(2)
		}
		cfg.Faults = append(cfg.Faults, f)
	}
	if cfg.Binary == "" {
		fmt.Fprintln(os.Stderr, "chaos: -bin is required")
		os.Exit(2)
	}
	os.Exit(runwork.Run("peerdns-chaos-*", "node logs and history", 0, *keep, func(ctx context.Context, work string) int {
		cfg.Work = work
		sum, err := Run(ctx, cfg)
		if err != nil {
			fmt.Fprintf(os.Stderr, "chaos: %v (seed %d)\n", err, cfg.Seed)
			return 1
		}
		fmt.Print(sum.String())
		if len(sum.Failures) > 0 {
			fmt.Printf("FAILED (seed %d)\n", sum.Seed)
			return 1
		}
		return 0
	}))
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
	fmt.Fprintf(&b, "lost (missing on some node at the deadline): %d, acknowledged removals undone: %d, panics: %d\n", len(s.Lost), len(s.Resurrected), len(s.Panics))
	if s.ConvergedAfter > 0 {
		fmt.Fprintf(&b, "converged %.1f s after the last fault; tunnels carried again after %.1f s, WebSocket hints after %.1f s\n",
			s.ConvergedAfter.Seconds(), s.TunnelsAfter.Seconds(), s.WSAfter.Seconds())
	}
	fmt.Fprintf(&b, "levels (goroutines/RSS/live heap) before the nemesis %v, after %v; node %d restarted on the same data %v\n", s.Before, s.After, s.FreshNode, s.Fresh)
	for _, f := range s.Failures {
		fmt.Fprintf(&b, "FAILURE: %s\n", f)
	}
	if len(s.Failures) > 0 {
		fmt.Fprintf(&b, "reproduce: go run ./bench/chaos -bin <peerdns> -seed %d -duration %v\n", s.Seed, s.Duration)
	}
	return b.String()
}
