package scale

import (
	"cmp"
	"fmt"
	"math"
	"os"
	"runtime"
	"runtime/pprof"
	"strconv"
	"testing"
	"time"

	"peerdns/actors/consensus"
	"peerdns/internal/testutil"
	"peerdns/messages"
)

// burstClaims is the size of the claim burst ($SCALE_CLAIMS, default 10:
// every node votes on every claim, so a burst costs about n times its
// size in vote writes on every node, and 10 keeps the 200-node runs
// under 3 minutes on a shared 2-core machine).
func burstClaims() int {
	if n, err := strconv.Atoi(os.Getenv("SCALE_CLAIMS")); err == nil && n > 0 {
		return n
	}
	return 10
}

// idleWindow is how long idle traffic and session churn are measured
// ($SCALE_IDLE, a duration, default 6s; in the virtual-time runs a
// longer window costs real time in proportion).
func idleWindow() time.Duration {
	if d, err := time.ParseDuration(os.Getenv("SCALE_IDLE")); err == nil && d > 0 {
		return d
	}
	return 6 * time.Second
}

// fullMeshSizes are the full-mesh sizes run: 25 and 50, plus 100 with
// SCALE_BIG=1 (it did not finish within 290 s on the shared machine).
func fullMeshSizes() []int {
	if os.Getenv("SCALE_BIG") == "1" {
		return []int{25, 50, 100}
	}
	return []int{25, 50}
}

// BenchmarkFullMesh: n nodes, each connected to every other one (what
// the peers supervisor builds through peer exchange), production timings.
// A burst of add-domain requests on node 0; measured: until every node
// has applied the claims, and until every node shows them all resolved.
func BenchmarkFullMesh(b *testing.B) {
	for _, n := range fullMeshSizes() {
		b.Run(fmt.Sprintf("n=%d", n), func(b *testing.B) {
			for range b.N {
				report(b, measure(b, simConfig{nodes: n}, burstClaims()))
			}
		})
	}
}

// BenchmarkSparse: n nodes that can each reach only about k others (see
// linkedEndpoint): ops travel by the sessions' relay of ops the peer
// lacks, over the graph's diameter. Quorum is then computed by each node
// over its own neighbours, the known limit this run shows (docs/scale.md).
func BenchmarkSparse(b *testing.B) {
	for _, c := range []struct{ n, k int }{{50, 4}, {200, 8}} {
		b.Run(fmt.Sprintf("n=%d/k=%d", c.n, c.k), func(b *testing.B) {
			for range b.N {
				report(b, measure(b, simConfig{nodes: c.n, degree: c.k}, burstClaims()))
			}
		})
	}
}

// BenchmarkTree: n nodes on a k-ary tree (each node linked to its
// parent and k children): ops are relayed hop by hop along the only
// path, so they arrive in order.
func BenchmarkTree(b *testing.B) {
	for _, c := range []struct{ n, k int }{{200, 8}} {
		b.Run(fmt.Sprintf("n=%d/k=%d", c.n, c.k), func(b *testing.B) {
			for range b.N {
				report(b, measure(b, simConfig{nodes: c.n, degree: c.k, tree: true}, burstClaims()))
			}
		})
	}
}

// progress prints a step of a run to stderr when SCALE_PROGRESS=1
// (benchmark logs only appear once a run ends, and a run that hits its
// bound is killed before then).
func progress(format string, args ...any) {
	if os.Getenv("SCALE_PROGRESS") == "1" {
		fmt.Fprintf(os.Stderr, time.Now().Format("15:04:05.000 ")+format+"\n", args...)
	}
}

// settle waits d, in tenths, each told as progress: a settle of hours
// of virtual time takes long enough of this machine's that its pace is
// worth seeing.
func settle(d time.Duration) {
	start := time.Now()
	for k := 1; k <= 10; k++ {
		<-time.After(d / 10)
		progress("settling: %v of %v", time.Duration(k)*(d/10), d)
	}
	if rest := d - time.Since(start); rest > 0 {
		<-time.After(rest)
	}
}

// result is what one run measured.
type result struct {
	cfg        simConfig
	frozenOut  time.Duration // overlay: a frozen voter out of every other node's quorum after
	frozenLeft int           // on that many nodes
	frozenSusB float64       // suspicion bytes each other node received for that failure
	claims     int
	connsNode  float64       // connections per node
	maxConns   int           // the most connections one node has
	viewFill   time.Duration // overlay: until every node's active view was full
	viewsFull  int           // overlay: nodes whose view was full by then
	diameter   int
	setup      time.Duration
	heapNode   float64 // live heap per node after setup (ledger, actors, sessions)
	gorConn    float64 // goroutines per connection end
	vvEntries  int
	vvBytes    int
	idleBps    float64 // bytes per second per node, idle
	idleKinds  map[string]int64
	// idleFrames: frames per node per second in the idle window, by kind
	idleFrames map[string]float64
	// churn in the idle window, per minute across the network: sessions
	// opened and ended (each counted once, not at both ends) and leaves
	// sent.
	opensMin, endsMin, leavesMin float64
	signedOps                    uint64 // signed ops the burst's claims took on the writer
	acked                        time.Duration
	applied                      time.Duration // until every node applied every claim
	resolved                     time.Duration // until every node lists every claim resolved
	cpu                          time.Duration // CPU the whole process spent from the burst to resolved
	load                         float64       // 1-minute load average at the end of the burst
	writes                       float64       // key writes the burst caused (claims + votes)
	claimB                       float64       // ops bytes received per node per claim, until applied
	claimOpsB, claimAllB         float64       // ops bytes and bytes of every kind received per node per claim, until resolved
	opsB                         float64       // ops bytes received per node per write, until resolved
	allB                         float64       // bytes of every kind per node per write, until resolved
	maxSentB                     float64       // the busiest sender's ops bytes per write
	kinds                        map[string]int64
	burstFrames                  map[string]float64 // frames per node in the burst, by kind
	// ops: the burst's op counters of all sessions (received, of them
	// duplicates the ledger had already, gap repairs; sent, repaired,
	// grafted).
	ops opCounts
	// lazyLinks, links: session ends announcing ids instead of pushing
	// ops when the burst began, of all session ends.
	lazyLinks, links int64
	offLink          int64 // frames between nodes the topology does not link (must be 0)

	// short: the overlay's nodes whose view was not full, described
	// (shortViews).
	short string
}

// measure starts the network, measures its idle traffic, then one burst
// of claims on node 0.
func measure(tb testing.TB, cfg simConfig, claims int) result {
	b, _ := tb.(*testing.B)
	if b != nil {
		b.StopTimer()
	}
	r := result{cfg: cfg, claims: claims}
	heap0, g0 := heapInUse(), runtime.NumGoroutine()
	start := time.Now()
	s := startSim(tb, cfg)
	r.setup = time.Since(start)
	progress("n=%d connected after %v", cfg.nodes, r.setup)
	if cfg.boot > 0 {
		r.viewFill, r.viewsFull = s.waitViews(viewTarget(cfg.nodes), time.Minute)
		progress("n=%d: %d views full after %v", cfg.nodes, r.viewsFull, r.viewFill)
		if r.viewsFull < cfg.nodes && cfg.nodes <= keptLogNodes {
			r.short = s.shortViews(viewTarget(cfg.nodes))
		}
	}
	nodes := float64(cfg.nodes)
	heap1, g1 := heapInUse(), runtime.NumGoroutine()
	r.heapNode = float64(heap1-heap0) / nodes
	if err := writeHeapProfile(os.Getenv("SCALE_HEAPPROFILE")); err != nil {
		tb.Fatal(err)
	}

	// Idle traffic over a fixed window: a rate is measured, no condition
	// is waited for.
	idle := idleWindow()
	if d, err := time.ParseDuration(os.Getenv("SCALE_SETTLE")); err == nil && d > 0 {
		settle(d) // past the first seconds' view trimming and heartbeats
	}
	m0, d0 := s.meter.snapshot(), s.diagnostics()
	<-time.After(idle)
	idleB := s.meter.snapshot().since(m0)
	churn := s.diagnostics().since(d0)
	perMin := time.Minute.Seconds() / idle.Seconds()
	r.opensMin = float64(churn.ups) / 2 * perMin
	r.endsMin = float64(churn.ends) / 2 * perMin
	r.leavesMin = float64(churn.leaves) * perMin
	r.idleBps = float64(idleB.total()) / nodes / idle.Seconds()
	r.idleKinds = bytesPerNode(idleB, nodes, idle.Seconds())
	r.idleFrames = framesPerNode(idleB, nodes, idle.Seconds())

	// The graph: the topology's, or in the overlay the sessions held at
	// the end of the idle window (sessions younger than a sync interval
	// are spared when a view is trimmed, so right after the views filled
	// a node may hold a few more).
	graph := s.links
	if cfg.boot > 0 {
		graph = s.sessions()
	}
	conns := 0
	for _, n := range s.nodes {
		k := len(graph.neighbours(n.i))
		conns += k
		r.maxConns = max(r.maxConns, k)
	}
	r.connsNode = float64(conns) / nodes
	r.diameter = graph.diameter()
	r.gorConn = float64(g1-g0) / float64(conns)

	w := s.nodes[0]
	seq0 := s.vv(w)[w.id.ID()]
	before := s.meter.snapshot()
	diag0 := s.diagnostics()
	r.lazyLinks, r.links = diag0.lazy, int64(conns)
	cpu0 := cpuTime()
	if b != nil {
		b.StartTimer()
	}
	t0 := time.Now()
	seq := s.claim(w, claims, "burst")
	r.acked = time.Since(t0)
	progress("burst acknowledged after %v", r.acked)
	s.waitApplied(w.id.ID(), seq, 2*time.Minute)
	r.applied = time.Since(t0)
	progress("burst applied on all after %v", r.applied)
	atApplied := s.meter.snapshot().since(before)
	s.waitResolved("burst", claims, 2*time.Minute)
	r.resolved = time.Since(t0)
	if b != nil {
		b.StopTimer()
	}
	r.cpu = cpuTime() - cpu0
	r.load = loadAvg()
	burst := s.meter.snapshot().since(before)
	// Sessions report their counters to the overlay on their tick, so
	// right after the burst resolved some are not counted yet: read them
	// once every other node counts at least the claimer's ops.
	var diag opCounts
	testutil.Eventually(tb, time.Minute, func() error {
		diag = s.diagnostics().since(diag0)
		if want := int64(cfg.nodes-1) * int64(seq-seq0); diag.received < want {
			time.Sleep(100 * time.Millisecond)
			return fmt.Errorf("the sessions count %d ops received in the burst, at least %d were", diag.received, want)
		}
		return nil
	})

	// Up to R writers every node votes, so the last node's vector ends up
	// naming every node; resolution needs only a quorum, so some votes may
	// still be on their way when it is reached. (Beyond R only the
	// claims' replica sets vote.)
	last := s.nodes[cfg.nodes-1]
	if cfg.nodes <= consensus.DefaultReplicas {
		testutil.Eventually(tb, time.Minute, func() error {
			if got := len(s.vv(last)); got < cfg.nodes {
				time.Sleep(20 * time.Millisecond)
				return fmt.Errorf("node %d's vector names %d of %d writers", last.i, got, cfg.nodes)
			}
			return nil
		})
	}
	vv := s.vv(last)
	r.vvEntries, r.vvBytes = len(vv), vvBytes(tb, vv)
	r.signedOps = seq - seq0
	// Every voter auto-votes for the only claimant of each claim: up to
	// R writers every node, beyond R the claim's replica set.
	voters := nodes
	if replicas := cmp.Or(cfg.replicas, consensus.DefaultReplicas); cfg.nodes > replicas {
		voters = float64(replicas)
	}
	r.writes = float64(claims) * (voters + 1)
	r.claimB = float64(atApplied.bytes["ops"]) / nodes / float64(claims)
	r.opsB = float64(burst.bytes["ops"]) / nodes / r.writes
	r.allB = float64(burst.total()) / nodes / r.writes
	r.claimOpsB = float64(burst.bytes["ops"]) / nodes / float64(claims)
	r.claimAllB = float64(burst.total()) / nodes / float64(claims)
	r.maxSentB = float64(burst.maxSent("ops")) / r.writes
	r.kinds = bytesPerNode(burst, nodes, 1)
	r.burstFrames = framesPerNode(burst, nodes, 1)
	r.ops = diag
	r.offLink = s.meter.offLink.Load()
	if cfg.boot > 0 {
		// The overlay: how long a frozen voter of the first claim takes
		// to leave every other node's quorum.
		r.frozenOut, r.frozenLeft, r.frozenSusB = s.freezeOut(fmt.Sprintf("burst%05d.p2p", 0), time.Minute)
		progress("frozen writer out of every quorum after %v", r.frozenOut)
	}
	return r
}

// report puts a result in the benchmark's metrics and log.
func report(b *testing.B, r result) {
	b.ReportMetric(float64(r.cfg.nodes), "nodes")
	b.ReportMetric(r.connsNode, "conns/node")
	b.ReportMetric(r.setup.Seconds(), "s/setup")
	b.ReportMetric(r.heapNode/1e6, "heapMB/node")
	b.ReportMetric(float64(r.vvEntries), "vv-entries")
	b.ReportMetric(float64(r.vvBytes), "vv-B")
	b.ReportMetric(r.idleBps, "idle-B/s/node")
	b.ReportMetric(r.acked.Seconds(), "s/acked")
	b.ReportMetric(r.applied.Seconds(), "s/applied")
	b.ReportMetric(r.resolved.Seconds(), "s/resolved")
	b.ReportMetric(r.cpu.Seconds(), "cpu-s/burst")
	b.ReportMetric(r.cpu.Seconds()/float64(r.cfg.nodes), "cpu-s/burst/node")
	b.ReportMetric(r.claimB, "claimB/claim/node")
	b.ReportMetric(r.opsB, "opsB/write/node")
	b.ReportMetric(r.allB, "allB/write/node")
	b.ReportMetric(r.maxSentB, "maxSentB/write")
	if r.ops.received > 0 {
		b.ReportMetric(float64(r.ops.duplicates)/float64(r.ops.received), "dup-fraction")
	}
	b.ReportMetric(float64(r.ops.gaps), "gapRepairs")
	b.ReportMetric(r.load, "loadavg")
	b.Logf("n=%d, %.1f connections per node, diameter %d: setup %v, %.1f MB heap per node, %.1f goroutines per connection end; idle %.0f B/s per node %v; vv %d entries, %d B",
		r.cfg.nodes, r.connsNode, r.diameter, r.setup.Round(time.Millisecond), r.heapNode/1e6, r.gorConn, r.idleBps, r.idleKinds, r.vvEntries, r.vvBytes)
	b.Logf("burst of %d claims in %d signed ops (%.0f key writes with the votes): acked %v, applied everywhere %v, resolved everywhere %v; %.1f CPU-s in all (%.3f per node), load %.1f; per node %.0f B of ops per claim until applied, %.1f B of ops and %.1f B in all per write until resolved, busiest sender %.0f B per write; bytes per node by kind %v; ops received %d (%d duplicates, %d gap repairs)",
		r.claims, r.signedOps, r.writes, r.acked.Round(time.Millisecond), r.applied.Round(time.Millisecond), r.resolved.Round(time.Millisecond),
		r.cpu.Seconds(), r.cpu.Seconds()/float64(r.cfg.nodes), r.load, r.claimB, r.opsB, r.allB, r.maxSentB, r.kinds, r.ops.received, r.ops.duplicates, r.ops.gaps)
}

// perNode is each kind's count per node and per second of secs (1: per
// node alone), as conv rounds it; kinds never seen are left out.
func perNode[V int64 | float64](counts map[string]int64, nodes, secs float64, conv func(float64) V) map[string]V {
	out := map[string]V{}
	for k, v := range counts {
		if v > 0 {
			out[k] = conv(float64(v) / nodes / secs)
		}
	}
	return out
}

// bytesPerNode is bytes of each kind per node (and second), whole.
func bytesPerNode(s snapshot, nodes, secs float64) map[string]int64 {
	return perNode(s.bytes, nodes, secs, func(x float64) int64 { return int64(x) })
}

// framesPerNode is frames of each kind per node (and second), to a
// tenth.
func framesPerNode(s snapshot, nodes, secs float64) map[string]float64 {
	return perNode(s.frames, nodes, secs, func(x float64) float64 { return math.Round(x*10) / 10 })
}

// opCounts sums the sessions' replication counters and the overlay's
// session counters over every node.
type opCounts struct {
	received, duplicates, gaps int64
	// sent: ops sessions sent, repaired of them to fill what a peer's
	// vector, want or graft showed it lacked, grafted of those asked
	// for by a graft.
	sent, repaired, grafted int64
	// ups, ends: sessions established and ended, counted at both ends
	// (one session is two); leaves: neighbours dropped to make room.
	ups, ends, leaves int64
	// Plumtree: ids grafted, links pruned; lazy: links each end announces
	// ids on instead of pushing ops (a level at the time of reading, not
	// a count).
	grafts, prunes, lazy int64
}

func (c opCounts) since(o opCounts) opCounts {
	return opCounts{c.received - o.received, c.duplicates - o.duplicates, c.gaps - o.gaps,
		c.sent - o.sent, c.repaired - o.repaired, c.grafted - o.grafted,
		c.ups - o.ups, c.ends - o.ends, c.leaves - o.leaves,
		c.grafts - o.grafts, c.prunes - o.prunes, c.lazy}
}

func (s *sim) diagnostics() opCounts {
	var c opCounts
	for _, n := range s.nodes {
		sum := ask[*messages.PeerDiagnosticsReply](s.tb, n, n.peers, &messages.GetPeerDiagnostics{}).Summary
		c.received += sum.OpsReceived
		c.duplicates += sum.OpsDuplicate
		c.gaps += sum.GapRepairs
		c.sent += sum.OpsSent
		c.repaired += sum.OpsRepaired
		c.grafted += sum.OpsGrafted
		if o := sum.Overlay; o != nil {
			c.ups += o.SessionsUp
			c.ends += o.SessionsEnded
			c.leaves += o.LeavesSent
			c.grafts += o.Grafts
			c.prunes += o.Prunes
			c.lazy += int64(o.LazyLinks)
		}
	}
	return c
}

// writeHeapProfile writes the live heap's profile to path when it is not
// empty ($SCALE_HEAPPROFILE: where a node's memory goes, read with
// go tool pprof -sample_index=inuse_space).
func writeHeapProfile(path string) error {
	if path == "" {
		return nil
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := pprof.WriteHeapProfile(f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
