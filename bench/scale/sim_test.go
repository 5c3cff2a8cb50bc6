package scale

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"peerdns/actors/ledger"
	"peerdns/actors/peer"
	"peerdns/http/httpx"
	"peerdns/internal/applied"
	"peerdns/internal/store"
	"peerdns/internal/testutil"
	"peerdns/internal/view"
	"peerdns/messages"
	"peerdns/transport"
	"peerdns/transport/identity"
)

// simNode is one node's replication side: its own actor system, the real
// ledger actor over its own ledger.db and node.db, and the real peers
// supervisor over an endpoint of the shared in-memory network.
type simNode struct {
	i        int
	id       *identity.Identity
	sys      *actor.ActorSystem
	ledger   *actor.PID
	peers    *actor.PID
	ep       *linkedEndpoint
	ldb      *store.DB
	ndb      *store.DB
	dir      string // where its stores are
	replicas int
	// log holds what the peers actor logged (runs of up to
	// keptLogNodes nodes), for a failure to show.
	log *testutil.LogBuffer
	// applied is shared by the ledger and the sessions, as in a node
	// (SCALE_NO_APPLIED=1 leaves it out, to measure what it saves).
	applied *applied.Vector
}

// sim is a network of simNodes on one transport.MemNetwork.
type sim struct {
	tb    testing.TB
	net   *transport.MemNetwork
	nodes []*simNode
	links topology
	meter *meter
	// part splits the network in two on request (partition_test.go).
	part *partition
}

// simConfig says how big the network is and which links exist.
type simConfig struct {
	nodes int
	// degree 0 is the full mesh (what the peers supervisor builds on its
	// own through peer exchange); otherwise each node may only reach the
	// degree neighbours of a random regular-ish graph (see sparse).
	degree int
	// tree: the degree is the fan-out of a k-ary tree instead.
	tree bool
	// boot > 0 is the overlay run: every node can reach every other (as
	// on the internet), node i > 0 starts knowing boot random nodes of
	// lower index, and the peers supervisors' bounded active view
	// (peer.Deps.ActiveView) picks the neighbours; degree is ignored.
	boot int
	// timings for the peers supervisor; zero takes the production
	// defaults (1 s tick and ping, 3 s vector exchange, 10 s peer
	// exchange).
	tune func(*peer.Deps)
	// replicas is the ledgers' R (0: the default, 24).
	replicas int
	// wave > 0 starts the overlay's peers supervisors wave at a time,
	// a second of the run's clock apart, as nodes of a growing network
	// arrive; 0 starts them all at once. (At 1,000 writers all at once
	// is a storm no network meets: every node's first heartbeats and
	// greetings at the same instant, which in virtual time is one
	// instant however long it takes this machine.)
	wave int
}

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// keptLogNodes: networks up to this size keep each node's peers log in
// memory, so a failed wait can show what the nodes it names went through.
const keptLogNodes = 50

// ask sends req to pid and waits for a reply of type R.
func ask[R any](tb testing.TB, n *simNode, pid *actor.PID, req any) R {
	tb.Helper()
	r, err := httpx.Ask[R](n.sys.Root, pid, req, time.Minute)
	if err != nil {
		tb.Fatalf("node %d: ask %T: %v", n.i, req, err)
	}
	return r
}

// startSim builds the network: every node is a writer of one network
// from the start (node 0 created it and added the others, and every
// joiner's ledger holds those membership ops before its peers start, as
// after an invite redemption), then the peers supervisors start and dial
// their neighbours. It returns once every node is connected to all of
// its neighbours.
func startSim(tb testing.TB, cfg simConfig) *sim {
	tb.Helper()
	s := &sim{tb: tb, net: transport.NewMemNetwork(), part: &partition{}}
	s.meter = newMeter()
	s.net.SetMeter(s.meter.record)
	ids := make([]*identity.Identity, cfg.nodes)
	for i := range ids {
		id, err := identity.Generate()
		if err != nil {
			tb.Fatal(err)
		}
		ids[i] = id
		s.meter.index[id.ID()] = i
	}
	s.meter.resize(cfg.nodes)
	if cfg.boot > 0 {
		s.links = fullMesh(cfg.nodes)
	} else if cfg.tree {
		s.links = tree(cfg.nodes, cfg.degree)
	} else if cfg.degree > 0 && cfg.degree < cfg.nodes-1 {
		s.links = sparse(cfg.nodes, cfg.degree, 1)
	} else {
		s.links = fullMesh(cfg.nodes)
	}
	s.meter.links = &s.links
	for i, id := range ids {
		s.nodes = append(s.nodes, s.startLedger(i, id, cfg.replicas))
	}
	tb.Cleanup(s.stop)

	// Membership: node 0 adds every other node as a writer, and each
	// joiner starts from a copy of node 0's ledger.
	root := s.nodes[0]
	for _, n := range s.nodes[1:] {
		if r := ask[*messages.AddWriterReply](tb, root, root.ledger, &messages.AddWriter{ID: n.id.ID()}); r.Err != nil {
			tb.Fatal(r.Err)
		}
	}
	netw := ask[*messages.GetNetworkReply](tb, root, root.ledger, &messages.GetNetwork{})
	ops := ask[*messages.GetOpsSinceReply](tb, root, root.ledger, &messages.GetOpsSince{VV: messages.VersionVector{}, Max: cfg.nodes + 8}).Ops
	if len(ops) != cfg.nodes {
		tb.Fatalf("root ledger has %d ops, want genesis + %d writers", len(ops), cfg.nodes-1)
	}
	var wg sync.WaitGroup
	for _, n := range s.nodes[1:] {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if r := ask[*messages.JoinNetworkReply](tb, n, n.ledger, &messages.JoinNetwork{Key: netw.Key, Root: netw.Root}); r.Err != nil {
				tb.Error(r.Err)
				return
			}
			own := make([]*messages.Op, len(ops))
			for k, op := range ops {
				c := *op
				c.SigChecked = false
				own[k] = &c
			}
			if r := ask[*messages.ApplyOpsReply](tb, n, n.ledger, &messages.ApplyOps{From: "sim", Ops: own}); r.Applied != len(own) {
				tb.Errorf("node %d: membership ops %+v", n.i, r)
			}
		}()
	}
	wg.Wait()
	if tb.Failed() {
		tb.FailNow()
	}
	progress("n=%d ledgers hold the membership", cfg.nodes)

	// Peers: each node dials its neighbours of lower index; peer
	// exchange then does what it does (in a full mesh, nothing new; in a
	// sparse graph its dials to non-neighbours fail and are given up).
	pick := rand.New(rand.NewPCG(uint64(cfg.nodes), 11))
	for _, n := range s.nodes {
		if cfg.boot > 0 && cfg.wave > 0 && n.i > 0 && n.i%cfg.wave == 0 {
			progress("n=%d: %d started", cfg.nodes, n.i)
			<-time.After(time.Second) // the next wave arrives (virtual time in the large runs)
		}
		var boot []string
		if cfg.boot > 0 {
			for _, j := range pick.Perm(n.i)[:min(cfg.boot, n.i)] {
				m := s.nodes[j]
				boot = append(boot, m.id.ID()+"@"+m.ep.Addr().String())
			}
		}
		for _, j := range s.links.neighbours(n.i) {
			if j < n.i && cfg.boot == 0 {
				m := s.nodes[j]
				boot = append(boot, m.id.ID()+"@"+m.ep.Addr().String())
			}
		}
		s.startPeers(n, cfg, boot)
	}
	if cfg.boot > 0 {
		// In the overlay every node must at least be in the graph; how
		// fast the views fill is measured by the caller.
		s.waitPeers(3*time.Minute, func(int) int { return 1 })
	} else {
		s.waitPeers(3*time.Minute, func(i int) int { return len(s.links.neighbours(i)) })
	}
	return s
}

// startPeers spawns node n's peers supervisor, bootstrapping from boot.
func (s *sim) startPeers(n *simNode, cfg simConfig, boot []string) {
	deps := peer.Deps{Identity: n.id, Endpoint: n.ep, Ledger: n.ledger, Node: n.ndb, Log: quiet, Bootstrap: boot, Applied: n.applied, Replicas: n.replicas}
	if cfg.nodes <= keptLogNodes {
		if n.log == nil {
			n.log = &testutil.LogBuffer{}
		}
		deps.Log = slog.New(slog.NewTextHandler(n.log, nil))
	}
	// SCALE_LOG_NODES=0,1 logs those nodes' peers actors to stderr
	// (debug level), to follow one node through a run that failed.
	if strings.Contains(","+os.Getenv("SCALE_LOG_NODES")+",", ","+fmt.Sprint(n.i)+",") {
		deps.Log = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug})).With("node", n.i)
		fmt.Fprintf(os.Stderr, "node %d is %s; boot %v\n", n.i, n.id.ID(), boot)
	}
	if cfg.tune != nil {
		cfg.tune(&deps)
	}
	pid, err := n.sys.Root.SpawnNamed(peer.Props(deps), "peers")
	if err != nil {
		s.tb.Fatal(err)
	}
	n.peers = pid
}

func (s *sim) startLedger(i int, id *identity.Identity, replicas int) *simNode {
	return s.openNode(i, id, s.tb.TempDir(), replicas)
}

// openNode starts node i's actor system, ledger and endpoint over the
// stores in dir (a restart finds them as it left them).
func (s *sim) openNode(i int, id *identity.Identity, dir string, replicas int) *simNode {
	tb := s.tb
	// Not durable: commits are fsynced once a second. 200 nodes sharing
	// one disk would measure the disk; each real node has its own.
	ldb, err := store.Open(filepath.Join(dir, "ledger.db"), store.Options{})
	if err != nil {
		tb.Fatal(err)
	}
	ndb, err := store.Open(filepath.Join(dir, "node.db"), store.Options{})
	if err != nil {
		tb.Fatal(err)
	}
	sys := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return quiet }))
	var av *applied.Vector
	if os.Getenv("SCALE_NO_APPLIED") != "1" {
		av = &applied.Vector{}
	}
	lpid, err := sys.Root.SpawnNamed(ledger.Props(ledger.Deps{
		Identity: id, Ledger: ldb, Node: ndb, Published: &view.Published{}, Join: i > 0, Log: quiet, Applied: av, Replicas: replicas,
	}), "ledger")
	if err != nil {
		tb.Fatal(err)
	}
	ep := &linkedEndpoint{MemEndpoint: s.net.Listen(id, quiet), self: i, links: &s.links, index: s.meter.index, part: s.part}
	return &simNode{i: i, id: id, sys: sys, ledger: lpid, ep: ep, ldb: ldb, ndb: ndb, applied: av, dir: dir, replicas: replicas}
}

// waitPeers polls until every node i has sessions with at least want(i)
// peers.
func (s *sim) waitPeers(within time.Duration, want func(i int) int) {
	for _, n := range s.nodes {
		if n.i%25 == 0 {
			progress("waiting for node %d's peers", n.i)
		}
		want := want(n.i)
		testutil.Eventually(s.tb, within, func() error {
			if got := len(s.peersOf(n)); got < want {
				time.Sleep(20 * time.Millisecond) // keep polling cheap on a loaded machine
				return fmt.Errorf("node %d has %d of %d peers", n.i, got, want)
			}
			return nil
		})
	}
}

// peersOf lists the ids node n has a session with.
func (s *sim) peersOf(n *simNode) []string {
	return ask[*messages.GetPeersReply](s.tb, n, n.peers, &messages.GetPeers{}).IDs
}

// sessions is the graph of the sessions the nodes hold now.
func (s *sim) sessions() topology {
	t := topology{n: len(s.nodes), adj: make([][]int, len(s.nodes)), set: make([]map[int]bool, len(s.nodes))}
	for i := range t.set {
		t.set[i] = map[int]bool{}
	}
	for _, n := range s.nodes {
		for _, id := range s.peersOf(n) {
			if j, ok := s.meter.index[id]; ok && !t.set[n.i][j] {
				t.set[n.i][j] = true
				t.adj[n.i] = append(t.adj[n.i], j)
			}
		}
	}
	return t
}

func (s *sim) stop() {
	var wg sync.WaitGroup
	for _, n := range s.nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if n.peers != nil {
				_ = n.sys.Root.StopFuture(n.peers).Wait()
			}
			_ = n.ep.Close()
			_ = n.sys.Root.StopFuture(n.ledger).Wait()
			n.sys.Shutdown()
			n.ldb.Close()
			n.ndb.Close()
		}()
	}
	wg.Wait()
	s.nodes = nil
}

// claim sends count add-domain requests to node w at once, as many
// HTTP clients would, and waits for every acknowledgement. It returns
// the writer's highest seq once all are acknowledged.
func (s *sim) claim(w *simNode, count int, prefix string) uint64 {
	hash := "hs://" + strings.Repeat("ab", 32)
	futs := make([]*actor.Future, count)
	for i := range futs {
		futs[i] = w.sys.Root.RequestFuture(w.ledger, &messages.AddDomain{Domain: fmt.Sprintf("%s%05d.p2p", prefix, i), Hash: hash}, time.Minute)
	}
	for i, f := range futs {
		res, err := f.Result()
		if err != nil {
			s.tb.Fatalf("add-domain %d: %v", i, err)
		}
		if r, ok := res.(*messages.AddDomainReply); !ok || r.Err != nil {
			s.tb.Fatalf("add-domain %d: %#v", i, res)
		}
	}
	return ask[*messages.GetVersionVectorReply](s.tb, w, w.ledger, &messages.GetVersionVector{}).VV[w.id.ID()]
}

// waitApplied polls until every node's ledger holds writer's ops up to
// seq.
func (s *sim) waitApplied(writer string, seq uint64, within time.Duration) {
	for _, n := range s.nodes {
		testutil.Eventually(s.tb, within, func() error {
			if got := ask[*messages.GetVersionVectorReply](s.tb, n, n.ledger, &messages.GetVersionVector{}).VV[writer]; got < seq {
				time.Sleep(5 * time.Millisecond)
				return fmt.Errorf("node %d has seq %d of %d", n.i, got, seq)
			}
			return nil
		})
	}
}

// waitResolved polls until every node lists count domains of prefix as
// resolved.
func (s *sim) waitResolved(prefix string, count int, within time.Duration) {
	for _, n := range s.nodes {
		testutil.Eventually(s.tb, within, func() error {
			res := 0
			for _, d := range ask[*messages.GetDomainsReply](s.tb, n, n.ledger, &messages.GetDomains{}).Domains {
				if d.ConsensusStatus == "resolved" && strings.HasPrefix(d.Domain, prefix) {
					res++
				}
			}
			if res < count {
				time.Sleep(50 * time.Millisecond) // listings are large: poll gently
				return fmt.Errorf("node %d: %d/%d resolved", n.i, res, count)
			}
			return nil
		})
	}
}

// vv is node n's version vector.
func (s *sim) vv(n *simNode) messages.VersionVector {
	return ask[*messages.GetVersionVectorReply](s.tb, n, n.ledger, &messages.GetVersionVector{}).VV
}

// vvBytes is the size of a "vv" frame carrying v, as sessions send it.
func vvBytes(tb testing.TB, v messages.VersionVector) int {
	b, err := transport.EncodeEnvelope(&messages.Envelope{Kind: messages.KindVV, VV: v})
	if err != nil {
		tb.Fatal(err)
	}
	return len(b) + 4
}

// heapInUse is the live heap after a full collection.
func heapInUse() uint64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapInuse
}

// linkedEndpoint is a MemEndpoint that only reaches the node's
// neighbours in the simulated topology: a dial to anyone else fails as an
// unreachable address would, and an inbound connection from anyone else
// is closed. It stands for an underlay where each node can reach only a
// few others; the peer code above it is unchanged.
type linkedEndpoint struct {
	*transport.MemEndpoint
	part  *partition // nil: never split
	self  int
	links *topology
	index map[string]int // peer id → node index (read-only once built)
	// frozen: the node hangs; its connections send nothing (freeze_test.go).
	frozen atomic.Bool
}

func (e *linkedEndpoint) allowed(id string) bool {
	j, ok := e.index[id]
	return ok && e.links.linked(e.self, j) && e.part.joined(e.self, j)
}

func (e *linkedEndpoint) Dial(ctx context.Context, addr, peerID string) (transport.Conn, error) {
	if peerID != "" && !e.allowed(peerID) {
		return nil, fmt.Errorf("dial %s: no route to this peer in the simulated topology", addr)
	}
	c, err := e.MemEndpoint.Dial(ctx, addr, peerID)
	if err != nil {
		return nil, err
	}
	if !e.allowed(c.PeerID()) {
		c.Close("no route")
		return nil, fmt.Errorf("dial %s: no route to this peer in the simulated topology", addr)
	}
	return e.wrap(c), nil
}

func (e *linkedEndpoint) Accept(ctx context.Context) (transport.Conn, error) {
	for {
		c, err := e.MemEndpoint.Accept(ctx)
		if err != nil {
			return nil, err
		}
		if e.allowed(c.PeerID()) {
			return e.wrap(c), nil
		}
		c.Close("no route")
	}
}
