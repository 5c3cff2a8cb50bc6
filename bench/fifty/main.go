//go:build linux

// Command fifty runs a fleet of real `peerdns node` processes, each in a
// network namespace of its own on one public segment (bench/natlab's
// bridge, 203.0.113.0/24, no route out), joins them by invites, and
// checks that claims made on several nodes resolve alike on all of them,
// through kills and a partition. It prints a table of what it did and
// measured.
//
//	go build -o /tmp/peerdns ./cmd/peerdns
//	sudo go run ./bench/fifty -bin /tmp/peerdns            # 50 nodes
//	sudo go run ./bench/fifty -bin /tmp/peerdns -mode five # 5 nodes, 1,000 claims
//
// (bench/fifty/run.sh builds the binary and runs both.)
//
// # The fleet mode (default: 50 nodes)
//
//  1. Node 0 starts alone; then waves of up to -wave nodes (never more
//     than have joined: 1, 2, 4, ...) start side by side, each joining
//     with an invite from a node picked at random among those already
//     joined (so the introducers are spread, not node 0 alone); a wave is
//     done when each of its nodes lists a connected peer. Then every node
//     must have sessions with at least -min-peers others (-1: all of
//     them; beyond the node's active view, 12, it keeps no more) and hear
//     every other node, by a session or by the signed heartbeats that
//     travel the overlay (the diagnostics' overlay.heardByHeartbeat):
//     what makes a writer count as active for quorum. The fleet's idle
//     CPU is then read over -idle.
//  2. Bursts (-rounds of them): -claimers nodes, picked at random, each
//     send -claims add-domain requests (-clients at a time) at once:
//     5 × 20 = 100 claims. Timed: from the first request sent to the last
//     200 answer ("acknowledged"), and to the moment every node lists
//     every claim of the burst resolved alike.
//  3. kill -9 of -kills nodes (never node 0); half a burst of claims on a
//     live node while they are down; the killed nodes start again on
//     their data folders (no invite); every node must then hold every
//     claim of the run, alike. Timed from the first restart.
//  4. A partition: the nodes in two random groups (the smaller one of
//     floor(n/2) nodes, minus one when n is even, so a conflict that is
//     voted along the cut has a majority), cut apart by an nftables table
//     of the bridge family in the internet namespace (every IPv4 frame
//     between the two groups dropped; no node's own namespace changes).
//     After every node dropped the other side's sessions: -side-claims
//     claims on a node of each side, and -conflicts domains claimed on
//     both sides (one node each). What each side makes of its own claims
//     while cut off is reported, not required (a side may lack a
//     quorum). Then the heal (no sooner than -partition-hold after the
//     cut: a partition longer than the half minute a dialer held back by
//     a full view lives), timed until every node holds every claim of
//     the run alike.
//
// # The five mode
//
// Five nodes (full mesh), then -rounds bursts of 1,000 claims on one
// node (-claimers 1 -claims 1000, 16 requests at a time), no faults. The
// figure "resolved on all five" counts from the last 200 answer to an
// add-domain request of the burst to the end of the first poll round in
// which every one of the five nodes listed every claim of the burst as
// resolved with the claimed hash and claimant (GET /api/resolved-domains
// on each node). The time from the first request is printed beside it.
//
// # What "resolved alike" is, and what the poll costs
//
// A node holds a claim when GET /api/resolved-domains lists it with
// consensusStatus resolved (or conflict: this node has a losing claim,
// and the hash shown is the winner's) and the hash and resolvedClaimant
// of a claim the run made on that domain. A domain claimed on both sides
// of the partition may resolve either way, or stay a tie when the votes
// split evenly; every node must then show the same outcome. Reading
// starts after the last acknowledgement (polling during the burst would
// take CPU from the nodes being timed) and repeats every 50 ms, eight
// nodes at a time; a node that held everything is not read again until
// all have, then all are read once more together and compared. So a
// figure is late by up to one poll round (about 0.1-0.3 s at 50 nodes on
// a loaded two-core machine); the slowest node is named.
//
// # Bounds and cleanup
//
// Every wait has a bound (-settle for agreement, -join-within for joining
// and meshing) and the whole run stops itself after -timeout. On exit,
// on a failure and on Ctrl-C (SIGINT, SIGTERM) every process is killed
// and every namespace (<prefix>-inet, <prefix>-h<k>; -prefix, default
// f50-<pid>) deleted; the work folder with the node logs is removed
// unless the run failed (then its path is printed).
//
// # This machine
//
// The defaults are the figures (50 nodes, 5 × 20 claims), not a
// fit to this 2-vCPU VM: each node is a whole process (DNS, edge proxy,
// admin API, ledger, sessions to every peer), so a fleet of 50 on two
// cores measures the code under CPU contention as well as the code. The
// table prints RSS and CPU so a reader can tell which one a figure
// shows. -nodes, -wave and the bounds scale it to other machines.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"time"

	"peerdns/bench/runwork"
)

func main() {
	cfg := Config{Out: os.Stdout}
	mode := flag.String("mode", "fleet", "fleet (joins, bursts, kills, a partition) or five (5 nodes, bursts of 1,000 claims on one node)")
	flag.StringVar(&cfg.Binary, "bin", "", "the peerdns binary (go build -o /tmp/peerdns ./cmd/peerdns)")
	flag.IntVar(&cfg.Nodes, "nodes", 0, "node processes (default 50; five mode 5)")
	flag.IntVar(&cfg.Wave, "wave", 4, "nodes started side by side while joining")
	flag.IntVar(&cfg.MinPeers, "min-peers", 3, "connected peers every node needs before the claims (-1: all others; beyond the active view, 12 by default, a node keeps no more)")
	flag.IntVar(&cfg.Claimers, "claimers", 0, "nodes claiming in each burst (default 5; five mode 1)")
	flag.IntVar(&cfg.ClaimsEach, "claims", 0, "claims per claimer per burst (default 20; five mode 1000)")
	flag.IntVar(&cfg.Clients, "clients", 0, "concurrent requests per claimer (default 4; five mode 16)")
	flag.IntVar(&cfg.Rounds, "rounds", 1, "bursts, each of new domains (median printed from 2 on)")
	flag.IntVar(&cfg.Kills, "kills", -1, "nodes killed with SIGKILL and restarted (default 3; five mode 0)")
	partition := flag.Bool("partition", true, "partition the fleet in two, claim on both sides, heal (five mode: off)")
	flag.IntVar(&cfg.SideClaims, "side-claims", 10, "claims on each side of the partition")
	flag.DurationVar(&cfg.PartHold, "partition-hold", 0, "the least time from the cut to the heal (0: heal once both sides have settled)")
	flag.IntVar(&cfg.Conflicts, "conflicts", 3, "domains claimed on both sides of the partition")
	flag.DurationVar(&cfg.Settle, "settle", 60*time.Second, "bound on each wait for agreement")
	flag.DurationVar(&cfg.JoinWithin, "join-within", 3*time.Minute, "bound on joining and on forming the mesh")
	flag.DurationVar(&cfg.IdleWindow, "idle", 5*time.Second, "window over which the meshed fleet's idle CPU is measured (0: not)")
	timeout := flag.Duration("timeout", 20*time.Minute, "the whole run stops after this")
	flag.Int64Var(&cfg.Seed, "seed", time.Now().UnixNano()%1_000_000, "random seed (claimers, victims, partition sides)")
	flag.StringVar(&cfg.Prefix, "prefix", fmt.Sprintf("f50-%d", os.Getpid()%100000), "network namespace name prefix")
	flag.StringVar(&cfg.Profile, "profile", "", "folder where every node writes a CPU profile (cpu-<pid>.prof, written when the run stops the node)")
	flag.StringVar(&cfg.ProfileStep, "profile-step", "", "with -profile: profile only this step, idle or bursts (\"\": the whole run)")
	keep := flag.Bool("keep", false, "keep the work folder (node logs) after a successful run")
	flag.Parse()
	if cfg.Binary == "" {
		fmt.Fprintln(os.Stderr, "fifty: -bin is required (go build -o /tmp/peerdns ./cmd/peerdns)")
		os.Exit(2)
	}
	cfg.Partition = *partition
	switch *mode {
	case "fleet":
		defaults(&cfg, 50, 5, 20, 4, 3)
	case "five":
		defaults(&cfg, 5, 1, 1000, 16, 0)
		cfg.Partition = false
	default:
		fmt.Fprintf(os.Stderr, "fifty: -mode %q: want fleet or five\n", *mode)
		os.Exit(2)
	}
	if why := available(); why != "" {
		fmt.Fprintln(os.Stderr, "fifty:", why)
		os.Exit(2)
	}
	os.Exit(runwork.Run("peerdns-fifty-*", "node logs", *timeout, *keep, func(ctx context.Context, work string) int {
		cfg.Work = work
		res, err := Run(ctx, cfg)
		if res != nil {
			fmt.Print(res.Table(cfg))
		}
		if err != nil || len(res.Failures) > 0 {
			if err != nil {
				fmt.Fprintf(os.Stderr, "fifty: %v\n", err)
			}
			fmt.Fprintf(os.Stderr, "fifty: FAILED (seed %d)\n", cfg.Seed)
			return 1
		}
		return 0
	}))
}

func defaults(cfg *Config, nodes, claimers, claims, clients, kills int) {
	if cfg.Nodes == 0 {
		cfg.Nodes = nodes
	}
	if cfg.Claimers == 0 {
		cfg.Claimers = claimers
	}
	if cfg.ClaimsEach == 0 {
		cfg.ClaimsEach = claims
	}
	if cfg.Clients == 0 {
		cfg.Clients = clients
	}
	if cfg.Kills < 0 {
		cfg.Kills = kills
	}
}
