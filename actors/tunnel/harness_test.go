package tunnel

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"peerdns/actors/tunnel/tunneltest"
	"peerdns/internal/store"
	"peerdns/internal/testutil"
	"peerdns/internal/view"
	"peerdns/messages"
	"peerdns/transport"
	"peerdns/transport/identity"
)

// testNet is a set of test nodes over one transport kind.
type testNet struct {
	t    testing.TB
	mem  *transport.MemNetwork // nil: QUIC on loopback
	mesh *tunneltest.Network
}

func newTestNet(t testing.TB, quic bool) *testNet {
	n := &testNet{t: t, mesh: tunneltest.NewNetwork()}
	if !quic {
		n.mem = transport.NewMemNetwork()
	}
	return n
}

// testNode is one node's tunnel side: its endpoint, mesh, store, view, a
// fake ledger and the real tunnels supervisor.
type testNode struct {
	t        testing.TB
	id       *identity.Identity
	ep       transport.Endpoint
	mesh     *tunneltest.Mesh
	db       *store.DB
	view     *view.Published
	sys      *actor.ActorSystem
	ledger   *fakeLedger
	pid      *actor.PID
	log      *testutil.LogBuffer
	counters *Counters
	tune     func(*Deps)
}

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// node starts a node; tune adjusts its Deps.
func (n *testNet) node(tune func(*Deps)) *testNode {
	t := n.t
	t.Helper()
	id, err := identity.Generate()
	if err != nil {
		t.Fatal(err)
	}
	var ep transport.Endpoint
	if n.mem != nil {
		ep = n.mem.Listen(id, quiet())
	} else {
		qe, err := transport.Listen(transport.Config{Identity: id, ListenAddr: "127.0.0.1:0", Logger: quiet()})
		if err != nil {
			t.Fatal(err)
		}
		ep = qe
	}
	t.Cleanup(func() { ep.Close() })
	db, err := store.Open(filepath.Join(t.TempDir(), "node.db"), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	tn := &testNode{t: t, id: id, ep: ep, mesh: n.mesh.Add(t, ep), db: db, view: &view.Published{}, tune: tune}
	tn.view.Store(&view.Snapshot{Domains: map[string]*view.Domain{}})
	tn.sys = actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return quiet() }))
	t.Cleanup(tn.sys.Shutdown)
	tn.ledger = newFakeLedger(tn.sys)
	tn.start()
	t.Cleanup(tn.stop)
	return tn
}

// start spawns the tunnels supervisor (again, after stop).
func (n *testNode) start() {
	n.log = &testutil.LogBuffer{}
	n.counters = &Counters{}
	d := Deps{Counters: n.counters,
		Self: n.id.ID(), Mesh: n.mesh, Store: n.db, View: n.view, Ledger: n.ledger.pid,
		Log:           slog.New(slog.NewTextHandler(n.log, nil)),
		LookupBackoff: transport.Backoff{Min: 5 * time.Millisecond, Max: 50 * time.Millisecond},
		Recheck:       50 * time.Millisecond,
	}
	if n.tune != nil {
		n.tune(&d)
	}
	pid, err := n.sys.Root.SpawnNamed(Props(d), "tunnels")
	if err != nil {
		n.t.Fatal(err)
	}
	n.pid = pid
	// Answered after Started, which installs the stream handlers: a test
	// that opens a stream at once would otherwise race the start (a
	// stream arriving before them is reset, and counted nowhere).
	if _, err := n.sys.Root.RequestFuture(pid, &messages.GetTunnelServers{}, 5*time.Second).Result(); err != nil {
		n.t.Fatal(err)
	}
}

// stop stops the supervisor and waits for it (and its children).
func (n *testNode) stop() {
	if n.pid == nil {
		return
	}
	_ = n.sys.Root.StopFuture(n.pid).Wait()
	n.pid = nil
}

// connect links two nodes over their transport.
func connect(t testing.TB, a, b *testNode) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := tunneltest.Connect(ctx, a.mesh, b.mesh); err != nil {
		t.Fatal(err)
	}
}

// own makes domain resolve to this node with a loopback IP.
func (n *testNode) own(domain string) {
	old := n.view.Load()
	ds := map[string]*view.Domain{}
	for k, v := range old.Domains {
		ds[k] = v
	}
	ds[domain] = &view.Domain{Name: domain, Status: "resolved", Claimant: n.id.ID(), IP: netip.MustParseAddr("127.0.0.1")}
	n.view.Store(&view.Snapshot{Version: old.Version + 1, Domains: ds})
}

func ask[R any](t testing.TB, n *testNode, req any) R {
	t.Helper()
	res, err := n.sys.Root.RequestFuture(n.pid, req, 10*time.Second).Result()
	if err != nil {
		t.Fatalf("ask %T: %v", req, err)
	}
	r, ok := res.(R)
	if !ok {
		t.Fatalf("ask %T: reply %T", req, res)
	}
	return r
}

// createServer makes a server for target and waits until it runs.
func (n *testNode) createServer(o messages.TunnelServerOpts) (id, url string) {
	n.t.Helper()
	before := len(n.mesh.Announced())
	r := ask[*messages.CreateTunnelServerReply](n.t, n, &messages.CreateTunnelServer{Opts: o})
	if r.Err != nil {
		n.t.Fatalf("create server: %v", r.Err)
	}
	// Running, and announced to peers (the supervisor shows it running
	// once it announced it).
	var s messages.TunnelServer
	testutil.Eventually(n.t, 5*time.Second, func() error {
		s = n.server(r.ID)
		if s.Info.State != messages.TunnelRunning {
			return fmt.Errorf("server state %q", s.Info.State)
		}
		if got := n.mesh.Announced(); len(got) <= before {
			return fmt.Errorf("announced %v", got)
		}
		return nil
	})
	return r.ID, s.Info.URL
}

func (n *testNode) server(id string) messages.TunnelServer {
	for _, s := range ask[*messages.GetTunnelServersReply](n.t, n, &messages.GetTunnelServers{}).Servers {
		if s.ID == id {
			return s
		}
	}
	n.t.Fatalf("server %s not listed", id)
	return messages.TunnelServer{}
}

func (n *testNode) client(id string) messages.TunnelClient {
	for _, c := range ask[*messages.GetTunnelClientsReply](n.t, n, &messages.GetTunnelClients{}).Clients {
		if c.ID == id {
			return c
		}
	}
	n.t.Fatalf("client %s not listed", id)
	return messages.TunnelClient{}
}

// createClient makes a client for url on domain (which this node must
// own) on a free port and waits until it runs; it returns its address.
func (n *testNode) createClient(domain, url string) (id, addr string) {
	n.t.Helper()
	r := ask[*messages.CreateTunnelClientReply](n.t, n, &messages.CreateTunnelClient{Opts: messages.TunnelClientOpts{
		Domain: domain, Key: url, Port: freePort(n.t),
	}})
	if r.Err != nil {
		n.t.Fatalf("create client: %v", r.Err)
	}
	return r.ID, n.waitClient(r.ID, messages.TunnelRunning)
}

// dialThrough serves target from a new server on n, has c (which may be
// n) own domain and run a client of that server, and dials the client.
// The connection is closed at the end of t.
func dialThrough(t *testing.T, n, c *testNode, domain, target string) net.Conn {
	t.Helper()
	_, url := n.createServer(targetOpts(target))
	c.own(domain)
	_, addr := c.createClient(domain, url)
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return conn
}

func (n *testNode) waitClient(id, state string) (addr string) {
	n.t.Helper()
	testutil.Eventually(n.t, 10*time.Second, func() error {
		c := n.client(id)
		if c.Info.State != state {
			return fmt.Errorf("client state %q (%s), want %q", c.Info.State, c.Info.Error, state)
		}
		addr = c.Info.Address
		return nil
	})
	return addr
}

// freePort is a TCP port on 127.0.0.1 that was free a moment ago.
func freePort(t testing.TB) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// targetOpts is a server for the TCP listener at addr.
func targetOpts(addr string) messages.TunnelServerOpts {
	host, port, _ := net.SplitHostPort(addr)
	p, _ := strconv.Atoi(port)
	return messages.TunnelServerOpts{Host: host, Port: p}
}

// echoServer is a TCP echo service: it copies back until EOF, then
// half-closes. It stops at cleanup.
func echoServer(t testing.TB) string {
	return tcpServer(t, func(c net.Conn) {
		buf := make([]byte, 64<<10)
		_, _ = io.CopyBuffer(c, c, buf)
		_ = c.(*net.TCPConn).CloseWrite()
	})
}

// tcpServer serves every connection with h on 127.0.0.1:0.
func tcpServer(t testing.TB, h func(net.Conn)) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	conns := map[net.Conn]bool{}
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns[c] = true
			mu.Unlock()
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer func() {
					mu.Lock()
					delete(conns, c)
					mu.Unlock()
					c.Close()
				}()
				h(c)
			}()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		for c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	return ln.Addr().String()
}

// fakeLedger answers AddDomain and SetClaimServices and remembers them.
type fakeLedger struct {
	pid      *actor.PID
	mu       sync.Mutex
	claims   map[string]string
	adds     []messages.AddDomain        // every AddDomain, in order
	services []messages.SetClaimServices // every SetClaimServices, in order
	targets  map[string]messages.DomainTarget
}

func newFakeLedger(sys *actor.ActorSystem) *fakeLedger {
	f := &fakeLedger{claims: map[string]string{}}
	f.pid = sys.Root.Spawn(actor.PropsFromFunc(func(c actor.Context) {
		switch m := c.Message().(type) {
		case *messages.AddDomain:
			f.mu.Lock()
			f.claims[m.Domain] = m.Hash
			f.adds = append(f.adds, *m)
			f.mu.Unlock()
			c.Respond(&messages.AddDomainReply{})
		case *messages.GetDomainTargets:
			rep := &messages.GetDomainTargetsReply{Targets: map[string]messages.DomainTarget{}}
			f.mu.Lock()
			for _, d := range m.Domains {
				if t, ok := f.targets[d]; ok {
					rep.Targets[d] = t
				}
			}
			f.mu.Unlock()
			c.Respond(rep)
		case *messages.SetClaimServices:
			f.mu.Lock()
			f.services = append(f.services, *m)
			f.mu.Unlock()
			c.Respond(&messages.SetClaimServicesReply{})
		}
	}))
	return f
}

// setTarget makes t the claim in force of its domain.
func (f *fakeLedger) setTarget(t messages.DomainTarget) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.targets == nil {
		f.targets = map[string]messages.DomainTarget{}
	}
	f.targets[t.Domain] = t
}

// servicesWritten is every SetClaimServices so far.
func (f *fakeLedger) servicesWritten() []messages.SetClaimServices {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]messages.SetClaimServices(nil), f.services...)
}

// added is every AddDomain so far.
func (f *fakeLedger) added() []messages.AddDomain {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]messages.AddDomain(nil), f.adds...)
}

func (f *fakeLedger) claim(domain string) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.claims[domain]
}

// dialEcho dials addr, writes msg and reads it back.
func dialEcho(addr string, msg []byte) error {
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		return err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := c.Write(msg); err != nil {
		return err
	}
	got := make([]byte, len(msg))
	if _, err := io.ReadFull(c, got); err != nil {
		return fmt.Errorf("read echo: %w", err)
	}
	if string(got) != string(msg) {
		return fmt.Errorf("echo %q, want %q", got, msg)
	}
	return nil
}
