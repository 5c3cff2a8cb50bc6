// Package node wires a peerdns node together: stores, the actor tree, the
// DNS server, the peer network and the admin API. cmd/peerdns parses flags
// and signals and calls Start; tests and benchmarks start whole nodes the
// same way.
package node

import (
	"peerdns/http/metrics"

	"peerdns/actors/stats"

	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/fasthttp/router"

	"peerdns/actors/backups"
	"peerdns/actors/ledger"
	"peerdns/actors/localdns"
	"peerdns/actors/logchan"
	"peerdns/actors/peer"
	"peerdns/actors/plugin"
	"peerdns/actors/settings"
	"peerdns/actors/tunnel"
	"peerdns/http/admin"
	"peerdns/http/doh"
	"peerdns/http/httpx"
	"peerdns/http/pluginweb"
	"peerdns/http/ws"
	"peerdns/internal/applied"
	"peerdns/internal/certs"
	"peerdns/internal/store"
	"peerdns/internal/view"
	"peerdns/internal/vif"
	"peerdns/messages"
	"peerdns/supervisor"
	"peerdns/transport"
	"peerdns/transport/identity"

	nodedns "peerdns/dns"
)

// Node is one running peerdns node: its stores, actor tree and servers.
type Node struct {
	cfg       Config
	id        *identity.Identity
	lock      *dataLock
	ledgerDB  *store.DB
	nodeDB    *store.DB
	root      *supervisor.Root
	ledger    *actor.PID
	hub       *actor.PID
	channels  map[string]*actor.PID
	logs      map[string]*slog.Logger // channel file + stderr
	files     map[string]*slog.Logger // channel file only
	pub       *view.Published
	dns       *nodedns.Server
	localDNS  *actor.PID
	records   *view.LocalPublished // the local records, for the CA's scope
	vif       *vif.Manager         // the virtual interface for domain IPs outside loopback
	endpoint  *transport.MultiEndpoint
	peers     *actor.PID
	mesh      *peer.Mesh      // the peer network as tunnels see it
	applied   *applied.Vector // the ledger's applied ops, read by the peer sessions
	tunnels   *actor.PID
	settings  *actor.PID
	plugins   *actor.PID
	mux       *transport.Mux
	peerCalls *plugin.PeerCalls
	edge      edgeRef                         // the edge proxy once started
	stats     *view.Publisher[stats.Snapshot] // the stats actor's latest sample
	statsWant *stats.Demand                   // who reads the samples
	statsPID  atomic.Pointer[actor.PID]       // the stats actor once it runs, asked for a sample when the latest is stale
	started   time.Time                       // when this incarnation started
	ca        *certs.CA                       // the node's certificate authority
	// pluginTable and pluginWeb serve plugin domains (the edge proxy).
	pluginTable   *plugin.Table
	pluginWeb     *pluginweb.Server
	tokenLifetime atomic.Int64 // time.Duration of new write tokens (TOKEN_LIFETIME)
	backups       *actor.PID
	level         *slog.LevelVar // LOG_LEVEL, changed live by the settings actor
	dialer        *tunnel.Dialer // tunnel connections for in-process users (the edge proxy)
	// answered is the tunnels supervisor once spawned: the DNS server's
	// goroutine tells it which p2p domains were answered.
	answered atomic.Pointer[actor.PID]
	stderr   io.Writer
	admin    *admin.Server
	adminLn  net.Listener
	closers  []func() // run in reverse order on stop
	fatal    chan error

	// What outlives an in-place restart (a backup restore, backups.go):
	// the configuration as given, the data folder lock and the admin
	// socket, closed by Stop after the closers above.
	orig       Config
	lifeMu     sync.Mutex // serialises Stop and restores
	stopped    bool
	shared     *httpx.Handoff
	keepClosed []func()
}

// Start builds and starts a node. On error everything started so far is
// stopped again and the error names the part that failed (e.g. "admin:
// listen 127.0.0.1:7710: address already in use").
func Start(cfg Config, stderr io.Writer) (*Node, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	n := &Node{cfg: cfg, orig: cfg, pub: &view.Published{}, stderr: stderr, fatal: make(chan error, 1)}
	if err := n.start(); err != nil {
		n.Stop()
		return nil, err
	}
	return n, nil
}

func (n *Node) start() (err error) {
	cfg := n.orig
	if err := os.MkdirAll(cfg.Data, 0o700); err != nil {
		return fmt.Errorf("data folder: %w", err)
	}
	if n.lock == nil {
		if n.lock, err = lockData(cfg.Data, "node"); err != nil {
			return err
		}
		n.keepClosed = append(n.keepClosed, n.lock.release)
		// Only at the process's first start (a restore's restart runs
		// while a restore may be staged): what an earlier process left.
		kept, err := backups.RecoverSwap(cfg.Data)
		for _, p := range kept {
			n.storeLog().Warn("a restore interrupted while it swapped the state was undone: the node starts on the state before it", "restored_entries", p)
		}
		if err != nil {
			n.storeLog().Error("an earlier run left a restore's swap that could not be undone", "err", err)
		}
		removed, err := backups.RemoveStaging(cfg.Data)
		for _, p := range removed {
			n.storeLog().Warn("removed what an earlier run left half made (a restore staged, a backup being written)", "path", p)
		}
		if err != nil {
			n.storeLog().Error("an earlier run left a restore unfinished in the data folder", "err", err)
		}
	}
	if n.id, err = identity.LoadOrCreate(filepath.Join(cfg.Data, "identity.key")); err != nil {
		return err
	}
	if n.ledgerDB, err = store.Open(filepath.Join(cfg.Data, "ledger.db"), store.Options{Durable: true, Log: n.storeLog()}); err != nil {
		return err
	}
	n.closers = append(n.closers, func() { n.ledgerDB.Close() })
	if n.nodeDB, err = store.Open(filepath.Join(cfg.Data, "node.db"), store.Options{Durable: true, Log: n.storeLog()}); err != nil {
		return err
	}
	n.closers = append(n.closers, func() { n.nodeDB.Close() })
	var warnings [][]any
	inForce, sources, err := settings.ApplySaved(cfg.settingFields(), cfg.Sources, n.nodeDB, func(msg string, args ...any) { warnings = append(warnings, append([]any{msg}, args...)) })
	if err != nil {
		return err
	}
	if err := cfg.Validate(); err != nil {
		return fmt.Errorf("with the saved settings: %w", err)
	}
	n.cfg = cfg
	n.tokenLifetime.Store(int64(cfg.tokenLifetime()))

	level, _ := ParseLevel(cfg.LogLevel) // checked by Validate
	n.level = newLevel(level)
	stderrLog := slog.NewTextHandler(n.stderr, &slog.HandlerOptions{Level: n.level})
	n.root = supervisor.NewRoot(slog.New(stderrLog))
	// Every actor stops (leaves first) before the stores close.
	n.closers = append(n.closers, n.root.Shutdown)
	if err := n.startLogs(stderrLog, n.level); err != nil {
		return err
	}
	core := n.logs["core"]
	for _, w := range warnings {
		core.Warn(w[0].(string), w[1:]...)
	}
	n.root.LogTo(core)
	core.Info("starting node", "id", n.id.ID(), "data", cfg.Data, "version", cfg.Version)

	if n.shared == nil {
		ln, err := listenTCP("admin", cfg.AdminAddr)
		if err != nil {
			return err
		}
		n.shared = httpx.NewHandoff(ln)
		n.keepClosed = append(n.keepClosed, n.shared.Close)
	}
	adminLn := n.shared.Next()
	n.adminLn = adminLn
	n.closers = append(n.closers, func() { adminLn.Close() })
	// The admin and profile domains are the node's own internal domains;
	// plugin folders add theirs through the plugins supervisor.
	internal := map[string]netip.Addr{
		strings.ToLower(cfg.AdminDomain):   answerAddr(adminLn.Addr()),
		strings.ToLower(cfg.ProfileDomain): n.edgeAnswer(),
	}

	n.applied = &applied.Vector{} // one per ledger incarnation (a restore starts a new one)
	n.ledger, err = n.root.Spawn("ledger", ledger.Props(ledger.Deps{
		Identity: n.id, Ledger: n.ledgerDB, Node: n.nodeDB, Published: n.pub,
		Internal: internal, Join: cfg.Join != "",
		SubnetBase: cfg.SubnetBase, InitialIPIndex: cfg.InitialIPIndex, Log: core,
		DomainMiddleware: cfg.domainMiddleware, Applied: n.applied, Replicas: cfg.ReplicaSetSize, Now: ledgerClock(),
	}))
	if err != nil {
		return fmt.Errorf("spawn ledger: %w", err)
	}
	n.statsWant = &stats.Demand{} // the hub tells it of update-stats subscribers
	if n.hub, err = n.root.Spawn("ws-hub", ws.Props(core, n.statsWant.Watching)); err != nil {
		return fmt.Errorf("spawn ws hub: %w", err)
	}
	if err := n.startDNS(); err != nil {
		return err
	}
	if err := n.startSettings(inForce, sources); err != nil {
		return err
	}
	// The mesh is filled by the peers supervisor; tunnels and plugin peer
	// calls share its streams by kind.
	n.mesh = peer.NewMesh()
	n.mux = transport.NewMux(n.mesh)
	if err := n.startPlugins(); err != nil {
		return fmt.Errorf("spawn plugins: %w", err)
	}
	if err := n.startBackups(inForce); err != nil {
		return err
	}
	if err := n.startPeers(); err != nil {
		return err
	}
	// Tunnels stop first (last spawned): their listeners and streams close
	// while the peer connections they ride on are still up.
	n.startVIF()
	n.dialer = &tunnel.Dialer{}
	if n.tunnels, err = n.root.Spawn("tunnels", tunnel.Props(tunnel.Deps{
		Self: n.id.ID(), Mesh: n.mux.For(transport.StreamTunnel), Store: n.nodeDB, View: n.pub, Ledger: n.ledger, Log: n.logs["tunnel"],
		Dialer: n.dialer, LocalAddr: n.vif.Explain,
	})); err != nil {
		return fmt.Errorf("spawn tunnels: %w", err)
	}
	n.answered.Store(n.tunnels)
	n.closers = append(n.closers, func() { _ = n.root.System.Root.StopFuture(n.tunnels).Wait() })
	if err := n.openCA(); err != nil {
		return err
	}
	if err := n.startDoT(); err != nil {
		return err
	}
	n.newStats()
	n.startAdmin(adminLn)
	if err := n.startEdge(); err != nil {
		return err
	}
	if err := n.startStats(); err != nil {
		return fmt.Errorf("spawn stats: %w", err)
	}
	return nil
}

// startAdmin serves the admin API, its WebSocket and the panel on ln.
func (n *Node) startAdmin(ln net.Listener) {
	core := n.logs["core"]
	rootCtx := n.root.System.Root
	n.admin = admin.New(admin.Deps{
		Root: rootCtx, Ledger: n.ledger, Channels: n.channels, Self: n.id.ID(),
		Started: time.Now(), Peers: admin.PeersSource(rootCtx, n.peers), Log: core,
		AdminDomain: n.cfg.AdminDomain, AllowedHosts: n.cfg.AdminAllowedHosts, Addr: ln.Addr().String(),
		Health: admin.HealthSources{DNS: func() (bool, bool, bool) {
			h := n.dns.Health()
			return h.Enabled, h.Healthy, h.Initialized
		}, Proxy: n.edgeHealth},
		Register: []func(*router.Router){
			func(r *router.Router) {
				admin.RegisterDNS(r, core, admin.DNSDeps{Root: rootCtx, LocalDNS: n.localDNS, Server: n.dns})
			},
			func(r *router.Router) { admin.RegisterPeers(r, core, rootCtx, n.peers) },
			func(r *router.Router) { admin.RegisterTunnels(r, core, rootCtx, n.tunnels) },
			func(r *router.Router) { admin.RegisterServices(r, core, rootCtx, n.tunnels, n.ledger) },
			n.settingsRoutes,
			n.pluginRoutes,
			n.certRoutes,
			n.sysDNSRoutes,
			n.statsRoutes,
			func(r *router.Router) {
				metrics.Register(r, metrics.Deps{Version: n.cfg.Version, View: n.pub, DNS: n.dns, Edge: n.edge.Load,
					AdminRequests: func() admin.RequestCounters { return n.admin.Requests() },
					Root:          rootCtx, Tunnels: n.tunnels, Peers: n.peers, Ledger: n.ledger, Log: core})
			},
			func(r *router.Router) { admin.RegisterDiagnostics(r, core, n.dns) },
			func(r *router.Router) { admin.RegisterDNSClients(r, core, n.dns) },
			func(r *router.Router) { admin.RegisterBackups(r, core, n.backupClient()) },
		},
		DoH: doh.Handler(n.dns),
		WS:  ws.Handler(ws.Deps{Root: rootCtx, Hub: n.hub, Ledger: n.ledger, Channels: n.channels, Log: core, Stats: n.statsSnapshot, MaxClients: n.cfg.WSMaxClients}),
	})
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := n.admin.Serve(ln); err != nil {
			core.Error("admin server stopped", "err", err)
		}
	}()
	n.closers = append(n.closers, func() {
		_ = n.admin.Shutdown()
		// Shutdown is a no-op when it wins the race with Serve; closing the
		// listener ends Serve either way.
		_ = ln.Close()
		<-done
	})
	n.announce("admin", ln.Addr())
}

// startDNS starts the DNS server and the actor owning local records.
func (n *Node) startDNS() error {
	dnsLog := n.logs["dns"]
	recs := &view.LocalPublished{}
	n.records = recs
	srv, err := nodedns.New(nodedns.Config{
		Addr: n.cfg.DNSAddr, Upstreams: n.cfg.Upstream, RecursionAllow: n.cfg.DNSRecursionAllow,
		OnP2PAnswer: n.domainAnswered, CacheSize: n.cfg.DNSCacheSize, QueryLog: n.cfg.DNSQueryLog,
		MaxStreamConns: n.cfg.DNSTCPMaxConns, MaxStreamConnsPerAddr: n.cfg.DNSTCPConnsPerAddr,
	}, n.pub, recs, dnsLog)
	if err != nil {
		return fmt.Errorf("dns: %w", err)
	}
	if err := srv.Start(); err != nil {
		return fmt.Errorf("dns: %w", err)
	}
	n.dns = srv
	n.closers = append(n.closers, func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
	})
	n.localDNS, err = n.root.Spawn("localdns", localdns.Props(localdns.Deps{
		Store: n.nodeDB, Published: recs, View: n.pub, PublicLookup: srv.PublicLookup, Log: dnsLog,
	}))
	if err != nil {
		return fmt.Errorf("spawn localdns: %w", err)
	}
	n.announce("dns", udpAddr(srv.Addr()))
	return nil
}

// domainAnswered passes a p2p domain the DNS server answered to the
// tunnels supervisor (DNS-triggered clients, actors/tunnel/answered.go).
func (n *Node) domainAnswered(domain string) {
	if pid := n.answered.Load(); pid != nil {
		n.root.System.Root.Send(pid, &messages.DomainAnswered{Domain: domain})
	}
}

// startPeers opens the QUIC endpoint and spawns the peers supervisor.
func (n *Node) startPeers() error {
	ep, err := transport.ListenMulti(transport.Config{Identity: n.id, ListenAddr: n.cfg.P2PAddr, Logger: n.logs["core"]}, n.pathOptions())
	if err != nil {
		return fmt.Errorf("p2p: %w", listenErr(n.cfg.P2PAddr, err))
	}
	n.endpoint = ep
	n.wireRelay(ep)
	// Closers run in reverse: the endpoint closes after the actors stop.
	n.closers = append(n.closers, func() { _ = ep.Close() })
	pm := n.startPortMap(ep)
	n.closers = append(n.closers, pm.Close)
	n.peers, err = n.root.Spawn("peers", peer.Props(peer.Deps{
		Identity: n.id, Endpoint: ep, Ledger: n.ledger, Node: n.nodeDB, Log: n.logs["core"],
		Bootstrap: n.cfg.Bootstrap, Join: n.cfg.Join, System: n.root.System, Advertise: n.cfg.Advertise,
		Fatal: n.fail, Mesh: n.mesh, Applied: n.applied, PortMap: pm.Status, Replicas: n.cfg.ReplicaSetSize,
	}))
	if err != nil {
		return fmt.Errorf("spawn peers: %w", err)
	}
	n.closers = append(n.closers, func() { _ = n.root.System.Root.StopFuture(n.peers).Wait() })
	n.announce("p2p", ep.Addr())
	return nil
}

// udpAddr turns a host:port string into a net.Addr for announce.
func udpAddr(s string) net.Addr {
	a, err := net.ResolveUDPAddr("udp", s)
	if err != nil {
		return &net.UDPAddr{}
	}
	return a
}

// startLogs spawns one actor per log channel; every channel logger also
// writes to stderr so an operator running the node in a terminal sees it.
func (n *Node) startLogs(stderrLog slog.Handler, level slog.Leveler) error {
	n.channels = map[string]*actor.PID{}
	n.logs = map[string]*slog.Logger{}
	n.files = map[string]*slog.Logger{}
	dir := filepath.Join(n.cfg.Data, "logs")
	for _, ch := range messages.LogChannels {
		pid, err := n.root.Spawn("log-"+ch.ID, logchan.Props(ch.ID, dir))
		if err != nil {
			return fmt.Errorf("spawn log channel %s: %w", ch.ID, err)
		}
		n.channels[ch.ID] = pid
		h := logchan.NewHandler(n.root.System.Root, pid, ch.ID, level)
		n.files[ch.ID] = slog.New(h)
		n.logs[ch.ID] = slog.New(tee{h, stderrLog.WithAttrs([]slog.Attr{slog.String("channel", ch.ID)})})
	}
	return nil
}

// Stop shuts the node down: servers first, then the actor tree from the
// leaves up, then the stores, then the data folder lock. It returns once
// everything has stopped.
func (n *Node) Stop() {
	n.lifeMu.Lock()
	defer n.lifeMu.Unlock()
	n.stopped = true
	n.stopParts()
	for i := len(n.keepClosed) - 1; i >= 0; i-- {
		n.keepClosed[i]()
	}
	n.keepClosed = nil
}

// stopParts stops everything start started (not the lock and the admin
// socket).
func (n *Node) stopParts() {
	for i := len(n.closers) - 1; i >= 0; i-- {
		n.closers[i]()
	}
	n.closers = nil
}

// Fatal delivers an error the node cannot heal from while running (an
// invite that was refused for good); the caller should Stop and exit.
func (n *Node) Fatal() <-chan error { return n.fatal }

// fail reports a fatal error once; later ones are dropped.
func (n *Node) fail(err error) {
	select {
	case n.fatal <- err:
	default:
	}
}

// AdminAddr is where the admin API listens.
func (n *Node) AdminAddr() string { return n.shared.Addr().String() }

// ID is the node's peer id.
func (n *Node) ID() string { return n.id.ID() }

// Core is the core channel logger.
func (n *Node) Core() *slog.Logger { return n.logs["core"] }

// DNSQueries is how many DNS queries the node has read so far, over
// every transport.
func (n *Node) DNSQueries() int64 { return n.dns.Stats().Queries }

// EdgeLocalExchanges is how many HTTP/1.1 requests the edge proxy has
// sent to a server on this node (a TCP socket, not a tunnel stream) so
// far; 0 while it is not running.
func (n *Node) EdgeLocalExchanges() int64 {
	p := n.edge.Load()
	if p == nil {
		return 0
	}
	return p.LocalExchanges()
}

// DNSAddr is where the DNS server listens (UDP and TCP).
func (n *Node) DNSAddr() string { return n.dns.Addr() }

// announce prints the line scripts wait for, "<service> listening on
// <addr>", once on stderr, and logs it to the core channel's file only
// (through the stderr tee it would be printed twice).
func (n *Node) announce(service string, addr net.Addr) {
	fmt.Fprintf(n.stderr, "%s listening on %s\n", service, addr)
	n.files["core"].Info(service+" listening", "addr", addr.String())
}

// listenTCP listens on addr; its error names the service and the address
// and nothing else (e.g. "admin: listen 127.0.0.1:7710: address already in
// use").
func listenTCP(service, addr string) (net.Listener, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", service, listenErr(addr, err))
	}
	return ln, nil
}

// listenErr turns a listen error into "listen ADDR: REASON", dropping the
// net package's operation and syscall names.
func listenErr(addr string, err error) error {
	var se *os.SyscallError
	if errors.As(err, &se) {
		return fmt.Errorf("listen %s: %w", addr, se.Err)
	}
	var ae *net.AddrError
	if errors.As(err, &ae) {
		return fmt.Errorf("listen %s: %s", addr, ae.Err)
	}
	return fmt.Errorf("listen %s: %w", addr, err)
}

// answerAddr is the address DNS gives for an internal domain served on a
// listener: the listener's own IP, or loopback when it binds all addresses.
func answerAddr(a net.Addr) netip.Addr {
	ap, err := netip.ParseAddrPort(a.String())
	if err != nil || ap.Addr().IsUnspecified() {
		return netip.MustParseAddr("127.0.0.1")
	}
	return ap.Addr().Unmap()
}

// tee sends each record to two handlers.
type tee struct{ a, b slog.Handler }

func (t tee) Enabled(ctx context.Context, l slog.Level) bool {
	return t.a.Enabled(ctx, l) || t.b.Enabled(ctx, l)
}

func (t tee) Handle(ctx context.Context, r slog.Record) error {
	if t.a.Enabled(ctx, r.Level) {
		_ = t.a.Handle(ctx, r.Clone())
	}
	if t.b.Enabled(ctx, r.Level) {
		return t.b.Handle(ctx, r)
	}
	return nil
}

func (t tee) WithAttrs(as []slog.Attr) slog.Handler { return tee{t.a.WithAttrs(as), t.b.WithAttrs(as)} }
func (t tee) WithGroup(g string) slog.Handler       { return tee{t.a.WithGroup(g), t.b.WithGroup(g)} }

// Ledger returns the root context and the ledger actor, for in-process
// tools (benchmarks, multi-node tests) that speak to it directly.
func (n *Node) Ledger() (*actor.RootContext, *actor.PID) { return n.root.System.Root, n.ledger }
