// Package node wires a peerdns node together: stores, the actor tree, the
// DNS server, the peer network and the admin API. cmd/peerdns parses flags
// and signals and calls Start; tests and benchmarks start whole nodes the
// same way.
package node

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/fasthttp/router"

	"peerdns/actors/ledger"
	"peerdns/actors/localdns"
	"peerdns/actors/logchan"
	"peerdns/actors/peer"
	"peerdns/http/admin"
	"peerdns/http/ws"
	"peerdns/internal/identity"
	"peerdns/internal/store"
	"peerdns/internal/view"
	"peerdns/supervisor"
	"peerdns/transport"

	nodedns "peerdns/dns"
	"peerdns/dns/records"
)

// Node is one running peerdns node: its stores, actor tree and servers.
type Node struct {
	cfg      Config
	id       *identity.Identity
	ledgerDB *store.DB
	nodeDB   *store.DB
	root     *supervisor.Root
	ledger   *actor.PID
	hub      *actor.PID
	channels map[string]*actor.PID
	logs     map[string]*slog.Logger
	pub      *view.Published
	dns      *nodedns.Server
	localDNS *actor.PID
	endpoint *transport.QUICEndpoint
	peers    *actor.PID
	stderr   io.Writer
	admin    *admin.Server
	adminLn  net.Listener
	closers  []func() // run in reverse order on stop
}

// Start builds and starts a node. On error everything started so far is
// stopped again.
func Start(cfg Config, stderr io.Writer) (n *Node, err error) {
	n = &Node{cfg: cfg, pub: &view.Published{}, stderr: stderr}
	defer func() {
		if err != nil {
			n.Stop()
		}
	}()
	if err := os.MkdirAll(cfg.Data, 0o700); err != nil {
		return nil, fmt.Errorf("data dir: %w", err)
	}
	if n.id, err = identity.LoadOrCreate(filepath.Join(cfg.Data, "identity.key")); err != nil {
		return nil, err
	}
	if n.ledgerDB, err = store.Open(filepath.Join(cfg.Data, "ledger.db"), store.Options{Durable: true}); err != nil {
		return nil, err
	}
	n.closers = append(n.closers, func() { n.ledgerDB.Close() })
	if n.nodeDB, err = store.Open(filepath.Join(cfg.Data, "node.db"), store.Options{Durable: true}); err != nil {
		return nil, err
	}
	n.closers = append(n.closers, func() { n.nodeDB.Close() })

	level := ParseLevel(cfg.LogLevel)
	stderrLog := slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level})
	n.root = supervisor.NewRoot(slog.New(stderrLog))
	n.closers = append(n.closers, n.root.Shutdown)
	if err := n.startLogs(stderrLog, level); err != nil {
		return nil, err
	}
	core := n.logs["core"]
	n.root.LogTo(core)
	core.Info("starting node", "id", n.id.ID(), "data", cfg.Data, "version", cfg.Version)

	adminLn, err := net.Listen("tcp", cfg.AdminAddr)
	if err != nil {
		return nil, fmt.Errorf("admin listen: %w", err)
	}
	n.adminLn = adminLn
	internal := map[string]netip.Addr{strings.ToLower(cfg.AdminDomain): answerAddr(adminLn.Addr())}

	n.ledger, err = n.root.Spawn("ledger", ledger.Props(ledger.Deps{
		Identity: n.id, Ledger: n.ledgerDB, Node: n.nodeDB, Published: n.pub,
		Internal: internal, Join: cfg.Join != "",
		SubnetBase: cfg.SubnetBase, InitialIPIndex: cfg.InitialIPIndex, Log: core,
	}))
	if err != nil {
		adminLn.Close()
		return nil, fmt.Errorf("spawn ledger: %w", err)
	}
	hub, err := n.root.Spawn("ws-hub", ws.Props(core))
	n.hub = hub
	if err != nil {
		adminLn.Close()
		return nil, fmt.Errorf("spawn ws hub: %w", err)
	}

	if err := n.startDNS(); err != nil {
		adminLn.Close()
		return nil, err
	}
	if err := n.startPeers(); err != nil {
		adminLn.Close()
		return nil, err
	}

	rootCtx := n.root.System.Root
	n.admin = admin.New(admin.Deps{
		Root: rootCtx, Ledger: n.ledger, Channels: n.channels, Self: n.id.ID(),
		Started: time.Now(), Peers: admin.PeersSource(rootCtx, n.peers), Log: core,
		Health: admin.HealthSources{DNS: func() (bool, bool, bool) {
			h := n.dns.Health()
			return h.Enabled, h.Healthy, h.Initialized
		}},
		Register: []func(*router.Router){
			func(r *router.Router) {
				admin.RegisterDNS(r, core, admin.DNSDeps{Root: rootCtx, LocalDNS: n.localDNS, Server: n.dns})
			},
			func(r *router.Router) { admin.RegisterPeers(r, core, rootCtx, n.peers) },
		},
		WS: ws.Handler(ws.Deps{Root: rootCtx, Hub: hub, Ledger: n.ledger, Channels: n.channels, Log: core}),
	})
	go func() {
		if err := n.admin.Serve(adminLn); err != nil {
			core.Error("admin server stopped", "err", err)
		}
	}()
	n.closers = append(n.closers, func() { _ = n.admin.Shutdown() })
	announce(core, n.stderr, "admin", adminLn.Addr())
	return n, nil
}

// startDNS starts the DNS server and the actor owning local records.
func (n *Node) startDNS() error {
	dnsLog := n.logs["dns"]
	recs := &records.Published{}
	srv, err := nodedns.New(nodedns.Config{Addr: n.cfg.DNSAddr, Upstreams: n.cfg.Upstream}, n.pub, recs, dnsLog)
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
	announce(n.logs["core"], n.stderr, "dns", udpAddr(srv.Addr()))
	return nil
}

// startPeers opens the QUIC endpoint and spawns the peers supervisor.
func (n *Node) startPeers() error {
	ep, err := transport.Listen(transport.Config{Identity: n.id, ListenAddr: n.cfg.P2PAddr, Logger: n.logs["core"]})
	if err != nil {
		return fmt.Errorf("p2p listen: %w", err)
	}
	n.endpoint = ep
	// Closers run in reverse: the endpoint closes after the actors stop.
	n.closers = append(n.closers, func() { _ = ep.Close() })
	n.peers, err = n.root.Spawn("peers", peer.Props(peer.Deps{
		Identity: n.id, Endpoint: ep, Ledger: n.ledger, Node: n.nodeDB, Log: n.logs["core"],
		Bootstrap: n.cfg.Bootstrap, Join: n.cfg.Join, System: n.root.System,
	}))
	if err != nil {
		return fmt.Errorf("spawn peers: %w", err)
	}
	n.closers = append(n.closers, func() { _ = n.root.System.Root.StopFuture(n.peers).Wait() })
	announce(n.logs["core"], n.stderr, "p2p", ep.Addr())
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
func (n *Node) startLogs(stderrLog slog.Handler, level slog.Level) error {
	n.channels = map[string]*actor.PID{}
	n.logs = map[string]*slog.Logger{}
	dir := filepath.Join(n.cfg.Data, "logs")
	for _, ch := range logchan.Channels {
		pid, err := n.root.Spawn("log-"+ch.ID, logchan.Props(ch.ID, dir))
		if err != nil {
			return fmt.Errorf("spawn log channel %s: %w", ch.ID, err)
		}
		n.channels[ch.ID] = pid
		h := logchan.NewHandler(n.root.System.Root, pid, ch.ID, level)
		n.logs[ch.ID] = slog.New(tee{h, stderrLog.WithAttrs([]slog.Attr{slog.String("channel", ch.ID)})})
	}
	return nil
}

// Stop shuts the node down: servers first, then actors, then stores.
func (n *Node) Stop() {
	for i := len(n.closers) - 1; i >= 0; i-- {
		n.closers[i]()
	}
	n.closers = nil
}

// AdminAddr is where the admin API listens.
func (n *Node) AdminAddr() string { return n.adminLn.Addr().String() }

// ID is the node's peer id.
func (n *Node) ID() string { return n.id.ID() }

// Core is the core channel logger.
func (n *Node) Core() *slog.Logger { return n.logs["core"] }

// announce logs the line scripts wait for: "<service> listening on <addr>".
func announce(log *slog.Logger, stderr io.Writer, service string, addr net.Addr) {
	fmt.Fprintf(stderr, "%s listening on %s\n", service, addr)
	log.Info(service+" listening", "addr", addr.String())
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

// ParseLevel reads a LOG_LEVEL value (debug, info, warn, error); anything
// else is info.
func ParseLevel(s string) slog.Level {
	var l slog.Level
	if err := l.UnmarshalText([]byte(strings.ToUpper(s))); err != nil {
		return slog.LevelInfo
	}
	return l
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
