package peer

import (
	"cmp"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"go.uber.org/goleak"

	"peerdns/actors/ledger"
	"peerdns/http/httpx"
	"peerdns/internal/applied"
	"peerdns/internal/store"
	"peerdns/internal/testutil"
	"peerdns/internal/view"
	"peerdns/messages"
	"peerdns/transport"
	"peerdns/transport/identity"
)

// testNode is one in-process node: real ledger actor, real QUIC
// endpoint on loopback, real peers supervisor, each in its own actor
// system as separate processes would be.
type testNode struct {
	t      *testing.T
	name   string
	dir    string
	id     *identity.Identity
	sys    *actor.ActorSystem
	ldb    *store.DB
	ndb    *store.DB
	ep     transport.Endpoint
	ledger *actor.PID
	peers  *actor.PID
	mesh   *Mesh // made fresh on every start, as a process would
	logs   *testutil.LogBuffer
	fatals fatalLog
	addr   string // p2p address, kept across restarts
	opts   nodeOpts
	up     bool
}

type nodeOpts struct {
	mem  *transport.MemNetwork // nil: real QUIC on loopback
	join string
	// joined: the ledger is told it joined this network before the peers
	// supervisor starts (a joiner whose join session ended before its
	// first sync).
	joined     *messages.JoinNetwork
	bootstrap  []string
	now        func() time.Time
	maxPending int // transport.Config.MaxPendingInbound (0: the default)
	// handshake: transport.Config.HandshakeTimeout (0: 2 s, against the
	// transport's default of 10 s)
	handshake  time.Duration
	advertise  []string
	activeView int // Deps.ActiveView (0: the default)
	eagerLinks int // Deps.EagerLinks (0: the default)
	// lazyTimeout: Deps.LazyTimeout (0: 100 ms)
	lazyTimeout time.Duration
	// heartbeat, heartbeatTimeout: Deps.HeartbeatInterval and
	// HeartbeatTimeout (0: the defaults).
	heartbeat, heartbeatTimeout time.Duration
	withhold                    bool                         // Deps.withhold: relay no op of others
	closeSilentAfter            time.Duration                // Deps.CloseSilentAfter (0: the default)
	dir                         string                       // the data dir ("": a fresh one), e.g. with an identity made beforehand
	portMap                     func() *messages.PortMapping // Deps.PortMap
}

// fatalLog records the supervisor's Deps.Fatal calls.
type fatalLog struct {
	mu   sync.Mutex
	errs []error
}

func (f *fatalLog) add(err error) {
	f.mu.Lock()
	f.errs = append(f.errs, err)
	f.mu.Unlock()
}

func (f *fatalLog) all() []error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]error(nil), f.errs...)
}

// leakChecked holds the tests that already registered testutil.NoLeaks.
var leakChecked sync.Map

// checkLeaks registers testutil.NoLeaks once per test, before the first
// node (and so after every node's cleanup): goroutines started by a node
// of the test must be gone once all its nodes stopped.
func checkLeaks(t *testing.T) {
	if _, seen := leakChecked.LoadOrStore(t, true); seen {
		return
	}
	// buntdb's background goroutine notices a Close only at its next
	// one-second poll; waiting for it would add a second to every test,
	// and closing the stores is internal/store's to test.
	testutil.NoLeaks(t, goleak.IgnoreTopFunction("github.com/tidwall/buntdb.(*DB).backgroundManager"))
	t.Cleanup(func() { leakChecked.Delete(t) })
}

func newTestNode(t *testing.T, name string, o nodeOpts) *testNode {
	t.Helper()
	checkLeaks(t)
	n := &testNode{t: t, name: name, dir: cmp.Or(o.dir, t.TempDir()), logs: &testutil.LogBuffer{}, addr: "127.0.0.1:0", opts: o}
	n.start()
	t.Cleanup(func() {
		n.stop()
		if t.Failed() || testing.Verbose() {
			t.Logf("--- logs of %s (%.8s) ---\n%s", n.name, n.id.ID(), n.logs.String())
		}
	})
	return n
}

func quietSystem() *actor.ActorSystem {
	return actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger {
		return slog.New(slog.NewTextHandler(io.Discard, nil))
	}))
}

func (n *testNode) start() {
	t := n.t
	t.Helper()
	var err error
	n.id, err = identity.LoadOrCreate(filepath.Join(n.dir, "identity.key"))
	if err != nil {
		t.Fatal(err)
	}
	if n.ldb, err = store.Open(filepath.Join(n.dir, "ledger.db"), store.Options{Durable: true}); err != nil {
		t.Fatal(err)
	}
	if n.ndb, err = store.Open(filepath.Join(n.dir, "node.db"), store.Options{Durable: true}); err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.NewTextHandler(n.logs, &slog.HandlerOptions{Level: slog.LevelInfo})).With("node", n.name)
	n.sys = quietSystem()
	vec := &applied.Vector{}
	n.ledger, err = n.sys.Root.SpawnNamed(ledger.Props(ledger.Deps{
		Identity: n.id, Ledger: n.ldb, Node: n.ndb, Published: &view.Published{}, Applied: vec,
		Join: n.opts.join != "" || n.opts.joined != nil, Log: log,
	}), "ledger")
	if err != nil {
		t.Fatal(err)
	}
	if n.opts.joined != nil {
		if r := ask[*messages.JoinNetworkReply](t, n.sys, n.ledger, n.opts.joined); r.Err != nil {
			t.Fatal(r.Err)
		}
	}
	if n.opts.mem != nil {
		n.ep = n.opts.mem.Listen(n.id, log)
	} else {
		n.ep, err = transport.Listen(transport.Config{Identity: n.id, ListenAddr: n.addr, Logger: log,
			KeepAlive: 200 * time.Millisecond, IdleTimeout: 2 * time.Second, HandshakeTimeout: cmp.Or(n.opts.handshake, 2*time.Second),
			MaxPendingInbound: n.opts.maxPending})
		if err != nil {
			t.Fatal(err)
		}
	}
	n.addr = n.ep.Addr().String()
	n.mesh = NewMesh()
	n.peers, err = n.sys.Root.SpawnNamed(Props(Deps{
		Identity: n.id, Endpoint: n.ep, Ledger: n.ledger, Node: n.ndb, Log: log,
		Bootstrap: n.opts.bootstrap, Join: n.opts.join, Now: n.opts.now, Fatal: n.fatals.add, Mesh: n.mesh, Advertise: n.opts.advertise,
		PortMap:      n.opts.portMap,
		TickInterval: 20 * time.Millisecond, SyncInterval: 200 * time.Millisecond,
		PingInterval: 300 * time.Millisecond, ExchangeInterval: 100 * time.Millisecond,
		HandshakeTimeout: 3 * time.Second, Batch: 8, // small batches exercise multi-batch sync
		Backoff:    transport.Backoff{Min: 20 * time.Millisecond, Max: 200 * time.Millisecond},
		ActiveView: n.opts.activeView, EagerLinks: n.opts.eagerLinks, Applied: vec, LazyTimeout: cmp.Or(n.opts.lazyTimeout, 100*time.Millisecond),
		withhold:          n.opts.withhold,
		HeartbeatInterval: n.opts.heartbeat, HeartbeatTimeout: n.opts.heartbeatTimeout,
		CloseSilentAfter: n.opts.closeSilentAfter,
	}), "peers")
	if err != nil {
		t.Fatal(err)
	}
	n.up = true
}

// stop shuts the node down like a process exit: actors, endpoint, stores.
func (n *testNode) stop() {
	if !n.up {
		return
	}
	n.up = false
	_ = n.sys.Root.StopFuture(n.peers).Wait()
	_ = n.ep.Close()
	_ = n.sys.Root.StopFuture(n.ledger).Wait()
	n.sys.Shutdown()
	n.ldb.Close()
	n.ndb.Close()
}

// restart stops and starts the node on the same data dir and address,
// with no flags (known peers must suffice).
func (n *testNode) restart() {
	n.stop()
	n.opts.join, n.opts.bootstrap = "", nil
	n.start()
}

func ask[R any](t testing.TB, sys *actor.ActorSystem, pid *actor.PID, req any) R {
	t.Helper()
	r, err := httpx.Ask[R](sys.Root, pid, req, 5*time.Second)
	if err != nil {
		t.Fatalf("ask %T: %v", req, err)
	}
	return r
}

// waitReady waits until the peers supervisor knows its network.
func (n *testNode) waitReady() {
	n.t.Helper()
	testutil.Eventually(n.t, 10*time.Second, func() error {
		if !ask[*messages.GetPeerStatusReply](n.t, n.sys, n.peers, &messages.GetPeerStatus{}).Ready {
			return fmt.Errorf("%s not ready", n.name)
		}
		return nil
	})
}

func (n *testNode) peerIDs() []string {
	return ask[*messages.GetPeersReply](n.t, n.sys, n.peers, &messages.GetPeers{}).IDs
}

func (n *testNode) invite(ttl time.Duration) string {
	n.t.Helper()
	var r *messages.CreateInviteReply
	testutil.Eventually(n.t, 10*time.Second, func() error {
		r = ask[*messages.CreateInviteReply](n.t, n.sys, n.peers, &messages.CreateInvite{TTL: ttl})
		return r.Err
	})
	return r.Invite
}

func (n *testNode) isWriter(id string) bool {
	return ask[*messages.IsWriterReply](n.t, n.sys, n.ledger, &messages.IsWriter{ID: id}).OK
}

func (n *testNode) addDomain(name, hash string) {
	n.t.Helper()
	if r := ask[*messages.AddDomainReply](n.t, n.sys, n.ledger, &messages.AddDomain{Domain: name, Hash: hash}); r.Err != nil {
		n.t.Fatalf("%s AddDomain(%s): %v", n.name, name, r.Err)
	}
}

func (n *testNode) domains() map[string]messages.DomainEntry {
	out := map[string]messages.DomainEntry{}
	for _, d := range ask[*messages.GetDomainsReply](n.t, n.sys, n.ledger, &messages.GetDomains{}).Domains {
		out[d.Domain] = d
	}
	return out
}

func (n *testNode) vv() messages.VersionVector {
	return ask[*messages.GetVersionVectorReply](n.t, n.sys, n.ledger, &messages.GetVersionVector{}).VV
}

// waitPeers waits until every node sees exactly the others as peers.
func waitMesh(t *testing.T, within time.Duration, nodes ...*testNode) {
	t.Helper()
	testutil.Eventually(t, within, func() error {
		for _, n := range nodes {
			var want []string
			for _, o := range nodes {
				if o != n {
					want = append(want, o.id.ID())
				}
			}
			sort.Strings(want)
			if got := n.peerIDs(); strings.Join(got, ",") != strings.Join(want, ",") {
				return fmt.Errorf("%s peers = %d %v, want %d", n.name, len(got), shortAll(got), len(want))
			}
		}
		return nil
	})
}

// waitConverged waits until all nodes hold the same version vector.
func waitConverged(t *testing.T, within time.Duration, nodes ...*testNode) {
	t.Helper()
	testutil.Eventually(t, within, func() error {
		first := fmt.Sprint(nodes[0].vv())
		for _, n := range nodes[1:] {
			if got := fmt.Sprint(n.vv()); got != first {
				return fmt.Errorf("%s vv %s != %s vv %s", n.name, got, nodes[0].name, first)
			}
		}
		return nil
	})
}

func shortAll(ids []string) []string {
	out := make([]string, len(ids))
	for i, id := range ids {
		out[i] = short(id)[:8]
	}
	return out
}

// joinNode starts a node that joins the network with an invite from inviter.
func joinNode(t *testing.T, name string, inviter *testNode) *testNode {
	t.Helper()
	n := newTestNode(t, name, nodeOpts{join: inviter.invite(0)})
	testutil.Eventually(t, 15*time.Second, func() error {
		if !inviter.isWriter(n.id.ID()) || !n.isWriter(n.id.ID()) {
			return fmt.Errorf("%s not a writer yet on both sides", name)
		}
		return nil
	})
	return n
}

// memMesh starts nodes on one in-memory network, the first the network's
// root and the others joined by its invites, and waits until they form
// a full mesh.
func memMesh(t *testing.T, names ...string) []*testNode {
	t.Helper()
	mem := transport.NewMemNetwork()
	root := newTestNode(t, names[0], nodeOpts{mem: mem})
	nodes := []*testNode{root}
	for _, name := range names[1:] {
		nodes = append(nodes, newTestNode(t, name, nodeOpts{mem: mem, join: root.invite(0)}))
	}
	waitMesh(t, 15*time.Second, nodes...)
	return nodes
}
