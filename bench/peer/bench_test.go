package peerbench

import (
	"bufio"
	"context"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"peerdns/bench/procstat"
	"peerdns/messages"
	"peerdns/transport"
	"peerdns/transport/identity"
)

// BenchmarkWireOps measures the transport alone: signed claim ops in
// 512-op frames over one QUIC control stream, encoded, sent, received and
// decoded (strict CBOR + validation). b.N is the number of ops.
func BenchmarkWireOps(b *testing.B) {
	idA, _ := identity.Generate()
	idB, _ := identity.Generate()
	a, err := transport.Listen(transport.Config{Identity: idA, ListenAddr: "127.0.0.1:0"})
	if err != nil {
		b.Fatal(err)
	}
	defer a.Close()
	c, err := transport.Listen(transport.Config{Identity: idB, ListenAddr: "127.0.0.1:0"})
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out, err := c.Dial(ctx, a.Addr().String(), idA.ID())
	if err != nil {
		b.Fatal(err)
	}
	in, err := a.Accept(ctx)
	if err != nil {
		b.Fatal(err)
	}
	ops := claimOps(idB, 0, 512, "w")
	env := &messages.Envelope{Kind: messages.KindOps, Ops: ops}
	frame, _ := transport.EncodeEnvelope(env)
	b.SetBytes(int64(len(frame) / len(ops)))
	b.ReportAllocs()
	b.ResetTimer()
	done := make(chan error, 1)
	go func() {
		got := 0
		for got < b.N {
			m, err := in.Recv()
			if err != nil {
				done <- err
				return
			}
			got += len(m.Ops)
		}
		done <- nil
	}()
	for sent := 0; sent < b.N; sent += len(ops) {
		batch := env
		if left := b.N - sent; left < len(ops) {
			batch = &messages.Envelope{Kind: messages.KindOps, Ops: ops[:left]}
		}
		if err := out.Send(batch); err != nil {
			b.Fatal(err)
		}
	}
	if err := <-done; err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "ops/s")
}

// BenchmarkCatchUp: node A holds opsCount claims (plus its own votes);
// a fresh node joins with an invite and syncs everything: version-vector
// exchange, GetOpsSince batches, QUIC, verification and durable commit
// on the joiner. Reported: ops/s until the joiner holds all of A's ops.
func BenchmarkCatchUp(b *testing.B) {
	opsCount := 5000 // CATCHUP_OPS=100000 for the figure
	if v, err := strconv.Atoi(os.Getenv("CATCHUP_OPS")); err == nil && v > 0 {
		opsCount = v
	}
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		a := startNode(b, "")
		a.inject(b, opsCount, "c")
		target := settledVV(b, a)
		total := uint64(0)
		for _, n := range target {
			total += n
		}
		b.StartTimer()
		start := time.Now()
		j := startNode(b, a.invite(b))
		waitFor(b, 5*time.Minute, func() error {
			have := j.vv(b)
			for w, n := range target {
				if have[w] < n {
					return fmt.Errorf("joiner has %d/%d of %.8s", have[w], n, w)
				}
			}
			return nil
		})
		el := time.Since(start)
		b.StopTimer()
		b.ReportMetric(float64(total)/el.Seconds(), "ops/s")
		b.ReportMetric(float64(total), "ops")
		j.stop()
		a.stop()
	}
}

// settledVV waits until n's version vector stops moving (its auto-votes
// are cast) and returns it.
func settledVV(tb testing.TB, n *node) messages.VersionVector {
	prev := fmt.Sprint(n.vv(tb))
	for {
		time.Sleep(300 * time.Millisecond) // sampling until quiet
		vv := n.vv(tb)
		if s := fmt.Sprint(vv); s == prev {
			return vv
		} else {
			prev = s
		}
	}
}

// BenchmarkLivePush: A and B connected; each iteration A commits 1000
// claim ops and the benchmark waits until B has applied all of them
// (live push of OpsApplied, QUIC, verify, durable commit on B).
func BenchmarkLivePush(b *testing.B) {
	const batch = 1000
	a := startNode(b, "")
	j := join(b, a)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		want := a.inject(b, batch, fmt.Sprintf("l%d-", i))
		waitFor(b, time.Minute, func() error {
			if got := j.vv(b)[a.id.ID()]; got < want {
				return fmt.Errorf("B has %d/%d", got, want)
			}
			return nil
		})
	}
	b.ReportMetric(float64(b.N*batch)/b.Elapsed().Seconds(), "ops/s")
}

// Benchmark1000ClaimsFiveNodes: 5 connected nodes; 1,000 add-domain
// requests are sent to node A at once; time until every node shows all
// 1,000 domains resolved (minVotes 3 of 5).
func Benchmark1000ClaimsFiveNodes(b *testing.B) {
	const claims = 1000
	for it := 0; it < b.N; it++ {
		b.StopTimer()
		nodes := []*node{startNode(b, "")}
		for len(nodes) < 5 {
			nodes = append(nodes, startNode(b, nodes[0].invite(b)))
		}
		waitFor(b, time.Minute, func() error {
			for i, n := range nodes {
				if ids := ask[*messages.GetPeersReply](b, n, n.peers, &messages.GetPeers{}).IDs; len(ids) != 4 {
					return fmt.Errorf("node %d has %d peers", i, len(ids))
				}
			}
			return nil
		})
		a := nodes[0]
		b.StartTimer()
		start := time.Now()
		cpu0, _ := procstat.CPUSeconds(os.Getpid())
		hash := "hs://" + strings.Repeat("ab", 32)
		if workers := benchWorkers(); workers > 0 {
			// As HTTP clients do: each waits for its answer.
			jobs := make(chan int)
			var wg sync.WaitGroup
			for w := 0; w < workers; w++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for i := range jobs {
						_, _ = a.sys.Root.RequestFuture(a.ledger, &messages.AddDomain{Domain: fmt.Sprintf("bulk%04d.p2p", i), Hash: hash}, time.Minute).Result()
					}
				}()
			}
			for i := 0; i < claims; i++ {
				jobs <- i
			}
			close(jobs)
			wg.Wait()
			b.ReportMetric(time.Since(start).Seconds(), "s/acked")
		} else {
			for i := 0; i < claims; i++ {
				a.sys.Root.Request(a.ledger, &messages.AddDomain{Domain: fmt.Sprintf("bulk%04d.p2p", i), Hash: hash})
			}
		}
		for i, n := range nodes {
			waitFor(b, 5*time.Minute, func() error {
				res := 0
				for _, d := range ask[*messages.GetDomainsReply](b, n, n.ledger, &messages.GetDomains{}).Domains {
					if d.ConsensusStatus == "resolved" && strings.HasPrefix(d.Domain, "bulk") {
						res++
					}
				}
				if res < claims {
					time.Sleep(50 * time.Millisecond) // keep polling cheap: 1,000-entry listings
					return fmt.Errorf("node %d: %d/%d resolved", i, res, claims)
				}
				return nil
			})
		}
		el := time.Since(start)
		b.StopTimer()
		b.ReportMetric(el.Seconds(), "s/1000claims")
		// The five nodes' CPU (one process), a steadier figure than the
		// wall time on a shared machine.
		if cpu1, err := procstat.CPUSeconds(os.Getpid()); err == nil {
			b.ReportMetric(cpu1-cpu0, "cpu-s")
		}
		var received, dups, wants int64
		for _, n := range nodes {
			sum := ask[*messages.PeerDiagnosticsReply](b, n, n.peers, &messages.GetPeerDiagnostics{}).Summary
			received += sum.OpsReceived
			dups += sum.OpsDuplicate
			wants += sum.GapRepairs
		}
		b.ReportMetric(float64(dups), "dups")
		b.ReportMetric(float64(wants), "gapRepairs")
		total := uint64(0)
		for _, v := range a.vv(b) {
			total += v
		}
		// Each node needs every op but its own: about 4 * total in all.
		b.ReportMetric(float64(received)/float64(4*total), "deliveries/op")
		b.ReportMetric(float64(total), "ops")
		for _, n := range nodes {
			n.stop()
		}
	}
}

// benchWorkers is PEERDNS_BENCH_WORKERS: with n > 0, the 1,000 claims
// come from n clients that each wait for their answer (as HTTP clients
// do) instead of all at once.
func benchWorkers() int {
	n, _ := strconv.Atoi(os.Getenv("PEERDNS_BENCH_WORKERS"))
	return n
}

// BenchmarkMemoryPerPeer: one node accepts peersCount writer sessions
// from a helper process (so the client side is not in our heap) and
// reports the memory and goroutines each connected peer costs it.
//
// The whole-heap difference is drowned by the ledger's own background
// work, so the figure counts, with the memory profiler sampling every
// allocation, the bytes still in use that were allocated on a stack going
// through quic-go, transport/ or actors/peer (connections, sessions,
// their mailboxes and buffers), minus the same count before connecting.
func BenchmarkMemoryPerPeer(b *testing.B) {
	peersCount := 100
	if s := os.Getenv("PEERBENCH_PEERS"); s != "" {
		peersCount, _ = strconv.Atoi(s)
	}
	for it := 0; it < b.N; it++ {
		a := startNode(b, "")
		net := ask[*messages.GetNetworkReply](b, a, a.ledger, &messages.GetNetwork{})
		seeds := make([]string, peersCount)
		for i := range seeds {
			id, _ := identity.Generate()
			seeds[i] = hex.EncodeToString(id.Private().Seed())
			if r := ask[*messages.AddWriterReply](b, a, a.ledger, &messages.AddWriter{ID: id.ID()}); r.Err != nil {
				b.Fatal(r.Err)
			}
		}
		settledVV(b, a)
		old := runtime.MemProfileRate
		runtime.MemProfileRate = 1
		peerBytes0 := peerInUse()
		gr0 := runtime.NumGoroutine()
		cmd := exec.Command(os.Args[0], "-test.run=^TestPeerClientsHelper$")
		cmd.Env = append(os.Environ(), "PEERBENCH_CLIENTS=1", "PEERBENCH_ADDR="+a.ep.Addr().String(),
			"PEERBENCH_SERVER="+a.id.ID(), "PEERBENCH_NETWORK="+net.Key, "PEERBENCH_ROOT="+net.Root,
			"PEERBENCH_SEEDS="+strings.Join(seeds, ","))
		stdin, _ := cmd.StdinPipe()
		stdout, _ := cmd.StdoutPipe()
		cmd.Stderr = os.Stderr
		if err := cmd.Start(); err != nil {
			b.Fatal(err)
		}
		waitFor(b, 2*time.Minute, func() error {
			if n := len(ask[*messages.GetPeersReply](b, a, a.peers, &messages.GetPeers{}).IDs); n < peersCount {
				return fmt.Errorf("%d/%d peers connected", n, peersCount)
			}
			return nil
		})
		// Let the first sync rounds and pings pass before measuring.
		time.Sleep(time.Second) // steady state, not synchronisation
		peerBytes1 := peerInUse()
		gr1 := runtime.NumGoroutine()
		runtime.MemProfileRate = old
		b.ReportMetric(float64(peerBytes1-peerBytes0)/float64(peersCount), "B/peer")
		b.ReportMetric(float64(gr1-gr0)/float64(peersCount), "goroutines/peer")
		b.ReportMetric(float64(peersCount), "peers")
		stdin.Close()
		go bufio.NewReader(stdout).ReadString(0)
		_ = cmd.Wait()
		a.stop()
	}
}

// peerInUse sums the in-use bytes the memory profile attributes to
// stacks through quic-go, transport/ or actors/peer.
func peerInUse() int64 {
	// The profile is as of the last completed GC cycle.
	runtime.GC()
	runtime.GC()
	n, _ := runtime.MemProfile(nil, false)
	recs := make([]runtime.MemProfileRecord, n+1024)
	n, ok := runtime.MemProfile(recs, false)
	if !ok {
		return -1
	}
	var total int64
	for _, r := range recs[:n] {
		frames := runtime.CallersFrames(r.Stack())
		for {
			f, more := frames.Next()
			if strings.Contains(f.Function, "quic-go/quic-go") || strings.Contains(f.Function, "peerdns/transport") || strings.Contains(f.Function, "peerdns/actors/peer") {
				total += r.InUseBytes()
				break
			}
			if !more {
				break
			}
		}
	}
	return total
}

// TestPeerClientsHelper is the client side of BenchmarkMemoryPerPeer, run
// in a child process; it does nothing in a normal test run.
func TestPeerClientsHelper(t *testing.T) {
	if os.Getenv("PEERBENCH_CLIENTS") == "" {
		t.Skip("helper process for BenchmarkMemoryPerPeer")
	}
	addr, server := os.Getenv("PEERBENCH_ADDR"), os.Getenv("PEERBENCH_SERVER")
	network, root := os.Getenv("PEERBENCH_NETWORK"), os.Getenv("PEERBENCH_ROOT")
	for _, s := range strings.Split(os.Getenv("PEERBENCH_SEEDS"), ",") {
		seed, _ := hex.DecodeString(s)
		id, err := identity.FromSeed(seed)
		if err != nil {
			t.Fatal(err)
		}
		ep, err := transport.Listen(transport.Config{Identity: id, ListenAddr: "127.0.0.1:0"})
		if err != nil {
			t.Fatal(err)
		}
		defer ep.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		c, err := ep.Dial(ctx, addr, server)
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		c.Send(&messages.Envelope{Kind: messages.KindHello, Hello: &messages.Hello{ID: id.ID(), Network: network, Root: root}})
		c.Send(&messages.Envelope{Kind: messages.KindAccept, Accept: &messages.Accept{}})
		go func() {
			for {
				m, err := c.Recv()
				if err != nil {
					return
				}
				if m.Kind == messages.KindPing {
					c.Send(&messages.Envelope{Kind: messages.KindPong, Ping: m.Ping})
				}
			}
		}()
	}
	fmt.Println("ready")
	bufio.NewReader(os.Stdin).ReadString(0) // until the benchmark closes stdin
}
