// Package dns is the node's DNS server: UDP and TCP on one address,
// answers for internal domains, local records and resolved p2p domains
// from a compiled zone.Table, and everything else forwarded upstream
// through a TTL cache (dns/upstream).
//
// Two paths answer a query. The fast path runs in one reader goroutine
// per UDP socket (several sockets share the address with SO_REUSEPORT):
// it reads the question straight from the packet and copies a pre-packed
// answer from the table — no actor call, no lock, no allocation. Every
// other query (TCP, odd flags, EDNS options, names that go upstream,
// answers that need truncation) takes the slow path through miekg/dns.
//
// The package never mutates state it does not own: it reads the view the
// consensus side publishes and the snapshot the localdns actor publishes,
// and derives its table from them. The table is compiled off the
// publishers' goroutines (a view.Publisher subscription), and every query
// first checks that the table was built from the snapshots published now;
// when a publisher has just stored a newer one, that query takes the slow
// path, which compiles the table itself if the subscriber has not yet.
// So a write is answered as soon as Store returns, and Store never waits
// for a compile.
//
// Recursion (forwarding upstream, and answers from the upstream cache) is
// only for clients in Config.RecursionAllow (default: loopback and private
// ranges); others get the node's own data and REFUSED for everything
// else, and their UDP responses are rate-limited (see ratelimit.go and
// README.md, "Who gets recursion").
//
// The Server's methods are safe for concurrent use. They are the one
// non-actor API that HTTP handlers may call directly (PublicLookup,
// Lookup, ClearCache, Health, Stats, Upstreams): the server owns no state
// an actor owns, so there is nothing to ask an actor for.
package dns

import (
	"peerdns/messages"

	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"peerdns/dns/cookie"
	"peerdns/dns/upstream"
	"peerdns/dns/zone"
	"peerdns/internal/view"
)

// Server is the node's DNS server.
type Server struct {
	cfg   Config
	log   *slog.Logger
	up    *upstream.Resolver
	view  *view.Published      // never nil (an empty publisher when New got nil)
	local *view.LocalPublished // never nil, as view

	table   atomic.Pointer[zone.Table]
	buildMu sync.Mutex // serialises Build so the newest inputs win
	unsub   []func()   // the two subscriptions (Start), cancelled by Shutdown; guarded by mu

	acl *acl     // who gets recursion
	rrl *limiter // response-rate limit of the others; nil: none
	// checkClients is false when no client can be outside the ACL (it
	// allows everyone, or the server listens on loopback and the ACL
	// holds all of loopback): the answer paths then skip the ACL and the
	// limiter altogether. Set by listen, before any reader starts.
	checkClients bool
	// pktinfo is true when the UDP sockets are bound to an unspecified
	// address and report each datagram's destination, so replies leave
	// from it (pktinfo_linux.go). Set by serveOn, before any reader starts.
	pktinfo bool

	mu          sync.Mutex // guards the listeners below and the state changes
	udp         []*net.UDPConn
	tcp         *streamServer
	addr        string
	dot         *streamServer   // DNS over TLS (ServeTLS); nil: none
	tcpListener *streamListener // under tcp
	dotListener *streamListener // under dot's TLS; nil: none
	dotAddr     string
	started     atomic.Bool
	stopped     atomic.Bool
	alive       atomic.Int32 // UDP reader goroutines running
	tcpUp       atomic.Bool  // the TCP server goroutine runs
	wg          sync.WaitGroup
	slow        chan struct{} // semaphore of slow-path UDP goroutines
	baseCtx     context.Context
	cancel      context.CancelFunc

	shards []*shard // one per UDP reader
	// singleReads makes the readers use one read and one write system
	// call per datagram (the path of platforms without batched I/O), so
	// tests cover both.
	singleReads bool
	slowCnt     shard // counters of the slow path
	lastLog     atomic.Int64
	touches     *zone.Touches // nil without Config.OnP2PAnswer
	qlog        *queryLog     // query log and per-client counters (querylog.go)
	nsAddrs     []netip.Addr  // the address of zone.NSName: the listen address when specific (authority.go)
	cookies     *cookie.Jar   // DNS cookies (cookies.go)
}

// shard is one reader's counters, padded so readers never share a line.
type shard struct {
	queries, fast, slow, dropped                 atomic.Int64
	nxdomain, servfail, formerr, refused, notimp atomic.Int64
	upstream, batches                            atomic.Int64
	recursionRefused, rateLimited, slipped       atomic.Int64
	answers                                      answers // by source and rcode (metrics.go)
	// now is the reader's clock for the datagrams of one batch (set when
	// nowOK is false, cleared at each read): cookies need the time in
	// seconds, and time.Now was a third of a cookie answer's cost.
	// Only the shard's own reader touches it.
	now   time.Time
	nowOK bool
	_     [64]byte
}

// New builds a server over the published p2p view and local records;
// either may be nil. The answer table follows every change published to
// either (see the package doc). Start opens the sockets.
func New(cfg Config, pub *view.Published, local *view.LocalPublished, log *slog.Logger) (*Server, error) {
	cfg.defaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if pub == nil {
		pub = &view.Published{}
	}
	if local == nil {
		local = &view.LocalPublished{}
	}
	servers := cfg.Upstreams
	if len(servers) == 0 {
		sys, err := upstream.SystemServers(cfg.ResolvConf, []string{cfg.Addr})
		if err != nil {
			log.Warn("no system nameservers; names outside the node's data will get SERVFAIL", "err", err)
		}
		servers = sys
	}
	var kept []string
	for _, u := range servers {
		if upstream.IsSelf(u, []string{cfg.Addr}) {
			log.Warn("upstream is this server itself; skipped", "upstream", u)
			continue
		}
		kept = append(kept, u)
	}
	s := &Server{
		cfg:   cfg,
		log:   log,
		view:  pub,
		local: local,
		up: upstream.New(upstream.Config{
			Servers: kept, Timeout: cfg.UpstreamTimeout, CacheSize: cfg.CacheSize,
			FailureTTL: cfg.FailureTTL, UDPSize: cfg.UDPSize, Now: cfg.Now,
		}),
		slow:    make(chan struct{}, cfg.MaxSlow),
		acl:     newACL(cfg.RecursionAllow),
		qlog:    newQueryLog(),
		nsAddrs: listenAddrs(cfg.Addr),
	}
	jar, err := cookie.New(cfg.CookieSecret)
	if err != nil {
		return nil, err
	}
	s.cookies = jar
	s.qlog.on.Store(cfg.QueryLog)
	s.qlog.tokens.Store(QueryLogRate)
	if cfg.RateLimit > 0 {
		s.rrl = newLimiter(cfg.RateLimit, cfg.Now)
	}
	if cfg.OnP2PAnswer != nil {
		s.touches = zone.NewTouches(256)
	}
	s.baseCtx, s.cancel = context.WithCancel(context.Background())
	s.rebuild()
	return s, nil
}

// current is the answer table for the snapshots published now: the one in
// use, or a fresh one when a publisher stored something newer and the
// subscription has not compiled it yet.
func (s *Server) current() *zone.Table {
	if t := s.table.Load(); t.BuiltFrom(s.view.Load(), s.local.Load()) {
		return t
	}
	return s.rebuild()
}

// fresh is t when it was built from the snapshots published now, else nil
// (the fast path then hands the query to the slow path, which compiles).
func (s *Server) fresh(t *zone.Table) *zone.Table {
	if t.BuiltFrom(s.view.Load(), s.local.Load()) {
		return t
	}
	return nil
}

// rebuild compiles a table from the latest snapshots of both sources,
// unless the table in use already is that. It runs in the subscription's
// goroutine, or in a slow-path query that saw a stale table first.
func (s *Server) rebuild() *zone.Table {
	s.buildMu.Lock()
	defer s.buildMu.Unlock()
	v, l, prev := s.view.Load(), s.local.Load(), s.table.Load()
	if prev.BuiltFrom(v, l) {
		return prev
	}
	t := zone.Rebuild(prev, v, l, zone.Options{TTL: s.cfg.TTL, Touches: s.touches, NSAddrs: s.nsAddrs})
	s.table.Store(t)
	return t
}

// Background compiles are paced: after one, the subscription waits
// rebuildGap or four times the compile's own time, whichever is longer,
// and the snapshots published meanwhile are compiled together (the
// publisher coalesces them). A burst of claims publishes a view every few
// milliseconds, and compiling each one cost a fifth of a node's CPU in the
// five-node benchmark; at a 25 ms gap the compiles of 1,000 domains were
// still 7% of it. Queries never see the delay: one that finds the table
// older than the published snapshots compiles it itself (current), so the
// gap only bounds how long an idle server keeps a stale table.
const rebuildGap = 100 * time.Millisecond

func (s *Server) rebuildPaced() {
	start := time.Now()
	s.rebuild()
	gap := max(rebuildGap, 4*time.Since(start))
	t := time.NewTimer(gap)
	defer t.Stop()
	select {
	case <-t.C:
	case <-s.baseCtx.Done():
	}
}

// reportAnswers passes the answered p2p domains to Config.OnP2PAnswer
// and starts a new reporting epoch every second, until Shutdown.
func (s *Server) reportAnswers() {
	defer s.wg.Done()
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		select {
		case <-s.baseCtx.Done():
			return
		case <-tick.C:
			s.touches.Tick()
		case d := <-s.touches.C():
			s.cfg.OnP2PAnswer(d)
		}
	}
}

// Table is the answer table for the snapshots published now (for
// diagnostics and tests: its ViewVersion and LocalVersion say what it was
// built from).
func (s *Server) Table() *zone.Table { return s.current() }

// Upstreams is the upstream list in use.
func (s *Server) Upstreams() []string { return s.up.Servers() }

// SetUpstreams replaces the upstream servers live (ip or ip:port each;
// empty: the nameservers of the system's resolv.conf, as at start). The
// server's own address is skipped, as at start.
func (s *Server) SetUpstreams(list []string) error {
	ups, err := NormalizeUpstreams(list)
	if err != nil {
		return err
	}
	if len(ups) == 0 {
		if ups, err = upstream.SystemServers(s.cfg.ResolvConf, []string{s.cfg.Addr}); err != nil {
			return fmt.Errorf("no upstreams given and none in %s: %w", s.cfg.ResolvConf, err)
		}
	}
	var kept []string
	for _, u := range ups {
		if !upstream.IsSelf(u, []string{s.cfg.Addr, s.Addr()}) {
			kept = append(kept, u)
		}
	}
	s.up.SetServers(kept)
	s.log.Info("dns upstreams changed", "upstreams", kept)
	return nil
}

// SetCacheSize changes the upstream cache's capacity live (entries).
func (s *Server) SetCacheSize(n int) { s.up.SetCacheSize(n) }

// CacheSize is the upstream cache's capacity in entries.
func (s *Server) CacheSize() int { return s.up.CacheSize() }

// Start opens the UDP sockets and the TCP listener and starts serving.
func (s *Server) Start() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.started.Load() {
		return errors.New("dns server already started")
	}
	if s.stopped.Load() {
		return errors.New("dns server was shut down")
	}
	var err error
	// With port 0 the UDP port we get may be taken for TCP: try again.
	for attempt := 0; attempt < 8; attempt++ {
		err = s.listen()
		if err == nil {
			break
		}
		if _, port, _ := net.SplitHostPort(s.cfg.Addr); port != "0" {
			break
		}
	}
	if err != nil {
		return err
	}
	for i, c := range s.udp {
		s.wg.Add(1)
		s.alive.Add(1)
		go s.serveUDP(c, s.shards[i])
	}
	s.wg.Add(1)
	s.tcpUp.Store(true)
	go func() {
		defer s.wg.Done()
		defer s.tcpUp.Store(false)
		if err := s.tcp.serve(); err != nil && !s.stopped.Load() {
			s.log.Error("dns tcp server stopped", "err", err)
		}
	}()
	s.started.Store(true)
	if s.touches != nil {
		s.wg.Add(1)
		go s.reportAnswers()
	}
	s.wg.Add(1)
	go s.runQueryLog()
	if s.cfg.CookieSecret == nil && s.cfg.CookieRotate > 0 {
		s.wg.Add(1)
		go s.rotateCookies(s.cfg.CookieRotate)
	}
	s.unsub = append(s.unsub,
		s.view.Subscribe(func(*view.Snapshot) { s.rebuildPaced() }),
		s.local.Subscribe(func(*messages.LocalSnapshot) { s.rebuildPaced() }))
	s.log.Info("dns server started", "addr", s.addr, "udpSockets", len(s.udp), "upstreams", s.up.Servers(),
		"tcp_max_conns", s.tcpListener.lim.Max(), "tcp_per_addr", s.tcpListener.lim.PerAddr())
	return nil
}

func (s *Server) listen() error {
	// With port 0 the UDP socket picks the port and TCP must get the same
	// number, which another program may hold on TCP: pick again (a few
	// times) rather than fail on a port the user never asked for.
	attempts := 1
	if _, port, err := net.SplitHostPort(s.cfg.Addr); err == nil && port == "0" {
		attempts = 8
	}
	var err error
	for i := 0; i < attempts; i++ {
		var conns []*net.UDPConn
		var ln net.Listener
		var addr string
		conns, ln, addr, err = s.listenOnce()
		if err == nil {
			return s.serveOn(conns, ln, addr)
		}
	}
	return err
}

// listenOnce binds the UDP sockets and the TCP listener on one port.
func (s *Server) listenOnce() ([]*net.UDPConn, net.Listener, string, error) {
	lc := net.ListenConfig{Control: reusePort}
	var conns []*net.UDPConn
	closeAll := func() {
		for _, c := range conns {
			c.Close()
		}
	}
	addr := s.cfg.Addr
	for i := 0; i < s.cfg.UDPSockets; i++ {
		pc, err := lc.ListenPacket(context.Background(), "udp", addr)
		if err != nil {
			closeAll()
			return nil, nil, "", fmt.Errorf("dns listen udp %s: %w", addr, err)
		}
		c := pc.(*net.UDPConn)
		_ = c.SetReadBuffer(4 << 20)
		_ = c.SetWriteBuffer(4 << 20)
		conns = append(conns, c)
		addr = c.LocalAddr().String() // the others join the port the first got
	}
	if len(conns) > 1 {
		if err := steerByCPU(conns[0], len(conns)); err != nil {
			s.log.Warn("dns: UDP queries spread by flow hash, not by CPU", "err", err)
		}
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		closeAll()
		return nil, nil, "", fmt.Errorf("dns listen tcp %s: %w", addr, err)
	}
	return conns, ln, addr, nil
}

// serveOn sets the server up on the bound sockets.
func (s *Server) serveOn(conns []*net.UDPConn, ln net.Listener, addr string) error {
	s.udp = conns
	s.addr = addr
	local := conns[0].LocalAddr().(*net.UDPAddr).AddrPort().Addr()
	s.checkClients = !s.acl.coversAll() && !(local.Unmap().IsLoopback() && s.acl.coversLoopback(local))
	s.pktinfo = false
	if local.IsUnspecified() {
		s.pktinfo = havePktinfo
		for _, c := range conns {
			if err := enablePktinfo(c); err != nil && s.pktinfo {
				s.pktinfo = false
				s.log.Warn("dns: replies may leave from another address than the one queried", "err", err)
			}
		}
	}
	s.shards = make([]*shard, len(conns))
	for i := range s.shards {
		s.shards[i] = &shard{}
	}
	s.tcpListener = newStreamListener(ln, &s.cfg)
	s.tcp = newStreamServer(s, s.tcpListener, "tcp")
	return nil
}

// Addr is the address the server listens on (after Start).
func (s *Server) Addr() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.addr
}

// Shutdown stops serving: the sockets close, in-flight slow queries get
// until ctx ends.
func (s *Server) Shutdown(ctx context.Context) error {
	s.mu.Lock()
	if s.stopped.Swap(true) {
		s.mu.Unlock()
		return nil
	}
	s.cancel()
	for _, c := range s.udp {
		c.Close()
	}
	for _, cancel := range s.unsub {
		cancel() // waits for a compile in progress
	}
	s.unsub = nil
	var err error
	if s.tcp != nil && s.started.Load() {
		err = s.tcp.shutdown(ctx)
	}
	if s.dot != nil {
		if derr := s.dot.shutdown(ctx); err == nil {
			err = derr
		}
	}
	s.mu.Unlock()
	done := make(chan struct{})
	go func() { s.wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
		return fmt.Errorf("dns shutdown: %w", ctx.Err())
	}
	return err
}
