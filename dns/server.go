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
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/miekg/dns"

	"peerdns/dns/records"
	"peerdns/dns/upstream"
	"peerdns/dns/zone"
	"peerdns/internal/view"
)

// DefaultAddr is where the node answers DNS unless told otherwise.
const DefaultAddr = "127.0.0.1:7753"

// DefaultUDPSize is the EDNS0 payload size we advertise and honour: the
// DNS Flag Day 2020 value, which avoids IP fragmentation.
const DefaultUDPSize = 1232

// Config configures a Server. Zero values take the defaults.
type Config struct {
	Addr            string           // host:port for UDP and TCP; default DefaultAddr
	Upstreams       []string         // ip:port or ip (port 53); empty: the nameservers of ResolvConf
	ResolvConf      string           // default /etc/resolv.conf
	UDPSockets      int              // SO_REUSEPORT sockets; default one per CPU
	UDPSize         uint16           // EDNS0 payload size; default DefaultUDPSize
	TTL             uint32           // TTL of internal and p2p answers; default zone.DefaultTTL
	UpstreamTimeout time.Duration    // per upstream attempt; default 1s
	FailureTTL      time.Duration    // how long "every upstream failed" is cached; default 5s
	CacheSize       int              // upstream cache entries; default 10000
	MaxSlow         int              // concurrent slow-path UDP queries; default 4096
	Now             func() time.Time // clock of the upstream cache and the rate limiter; default time.Now (tests inject one)

	// RecursionAllow lists the client networks that get recursion:
	// forwarding upstream and answers from the upstream cache. Everyone
	// gets answers from the node's own data (internal domains, local
	// records, p2p domains); others get REFUSED for names only upstream
	// knows. nil: DefaultRecursionAllow (loopback and private ranges);
	// empty: nobody. ParsePrefixes reads it from a flag or env value.
	RecursionAllow []netip.Prefix
	// RateLimit is how many UDP responses per second one client network
	// (/24, /56) outside RecursionAllow gets before responses are dropped
	// or slip out truncated; default DefaultRateLimit, negative: no limit.
	RateLimit int
}

func (c *Config) defaults() {
	c.Upstreams = append([]string(nil), c.Upstreams...) // Validate rewrites entries; keep the caller's slice
	if c.Addr == "" {
		c.Addr = DefaultAddr
	}
	if c.ResolvConf == "" {
		c.ResolvConf = "/etc/resolv.conf"
	}
	if c.UDPSockets <= 0 {
		c.UDPSockets = runtime.NumCPU()
	}
	if !haveReusePort {
		c.UDPSockets = 1
	}
	if c.UDPSize < zone.MinUDPSize {
		c.UDPSize = DefaultUDPSize
	}
	if c.MaxSlow <= 0 {
		c.MaxSlow = 4096
	}
	if c.RecursionAllow == nil {
		c.RecursionAllow = DefaultRecursionAllow()
	}
	if c.RateLimit == 0 {
		c.RateLimit = DefaultRateLimit
	}
	if c.Now == nil {
		c.Now = time.Now
	}
}

// Validate checks the config after defaults (and completes bare
// upstream addresses with port 53).
func (c *Config) Validate() error {
	if _, _, err := net.SplitHostPort(c.Addr); err != nil {
		return fmt.Errorf("dns addr %q: %w", c.Addr, err)
	}
	for i, u := range c.Upstreams {
		if _, err := netip.ParseAddrPort(u); err == nil {
			continue
		}
		// A bare address means port 53.
		ip, err := netip.ParseAddr(strings.Trim(u, "[]"))
		if err != nil {
			return fmt.Errorf("upstream %q: want ip or ip:port (host names cannot be resolved before DNS runs)", u)
		}
		c.Upstreams[i] = netip.AddrPortFrom(ip, 53).String()
	}
	for _, p := range c.RecursionAllow {
		if !p.IsValid() {
			return fmt.Errorf("recursion ACL: invalid network %v", p)
		}
	}
	return nil
}

// Server is the node's DNS server.
type Server struct {
	cfg   Config
	log   *slog.Logger
	up    *upstream.Resolver
	view  *view.Published    // never nil (an empty publisher when New got nil)
	local *records.Published // never nil, as view

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

	mu      sync.Mutex // guards the listeners below and the state changes
	udp     []*net.UDPConn
	tcp     *dns.Server
	addr    string
	started atomic.Bool
	stopped atomic.Bool
	alive   atomic.Int32 // UDP reader goroutines running
	tcpUp   atomic.Bool  // the TCP server goroutine runs
	wg      sync.WaitGroup
	slow    chan struct{} // semaphore of slow-path UDP goroutines
	baseCtx context.Context
	cancel  context.CancelFunc

	shards []*shard // one per UDP reader
	// singleReads makes the readers use one read and one write system
	// call per datagram (the path of platforms without batched I/O), so
	// tests cover both.
	singleReads bool
	slowCnt     shard // counters of the slow path
	lastLog     atomic.Int64
}

// shard is one reader's counters, padded so readers never share a line.
type shard struct {
	queries, fast, slow, dropped                 atomic.Int64
	nxdomain, servfail, formerr, refused, notimp atomic.Int64
	upstream, batches                            atomic.Int64
	recursionRefused, rateLimited, slipped       atomic.Int64
	_                                            [64]byte
}

// New builds a server over the published p2p view and local records;
// either may be nil. The answer table follows every change published to
// either (see the package doc). Start opens the sockets.
func New(cfg Config, pub *view.Published, local *records.Published, log *slog.Logger) (*Server, error) {
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
		local = &records.Published{}
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
		slow: make(chan struct{}, cfg.MaxSlow),
		acl:  newACL(cfg.RecursionAllow),
	}
	if cfg.RateLimit > 0 {
		s.rrl = newLimiter(cfg.RateLimit, cfg.Now)
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
	v, l := s.view.Load(), s.local.Load()
	if t := s.table.Load(); t.BuiltFrom(v, l) {
		return t
	}
	t := zone.Build(v, l, zone.Options{TTL: s.cfg.TTL})
	s.table.Store(t)
	return t
}

// Table is the answer table for the snapshots published now (for
// diagnostics and tests: its ViewVersion and LocalVersion say what it was
// built from).
func (s *Server) Table() *zone.Table { return s.current() }

// Upstreams is the upstream list in use.
func (s *Server) Upstreams() []string { return s.up.Servers() }

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
	up := make(chan struct{})
	s.tcp.NotifyStartedFunc = func() { close(up) }
	tcpErr := make(chan error, 1)
	s.wg.Add(1)
	s.tcpUp.Store(true)
	go func() {
		defer s.wg.Done()
		defer s.tcpUp.Store(false)
		if err := s.tcp.ActivateAndServe(); err != nil && !s.stopped.Load() {
			s.log.Error("dns tcp server stopped", "err", err)
			tcpErr <- err
		}
	}()
	select {
	case <-up:
	case err := <-tcpErr:
		for _, c := range s.udp {
			c.Close() // the readers see net.ErrClosed and return
		}
		s.wg.Wait()
		return fmt.Errorf("dns tcp: %w", err)
	}
	s.started.Store(true)
	s.unsub = append(s.unsub,
		s.view.Subscribe(func(*view.Snapshot) { s.rebuild() }),
		s.local.Subscribe(func(*records.Snapshot) { s.rebuild() }))
	s.log.Info("dns server started", "addr", s.addr, "udpSockets", len(s.udp), "upstreams", s.up.Servers())
	return nil
}

func (s *Server) listen() error {
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
			return fmt.Errorf("dns listen udp %s: %w", addr, err)
		}
		c := pc.(*net.UDPConn)
		_ = c.SetReadBuffer(4 << 20)
		_ = c.SetWriteBuffer(4 << 20)
		conns = append(conns, c)
		addr = c.LocalAddr().String() // the others join the port the first got
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		closeAll()
		return fmt.Errorf("dns listen tcp %s: %w", addr, err)
	}
	s.udp = conns
	s.addr = addr
	local := conns[0].LocalAddr().(*net.UDPAddr).AddrPort().Addr()
	s.checkClients = !s.acl.coversAll() && !(local.Unmap().IsLoopback() && s.acl.coversLoopback(local))
	s.shards = make([]*shard, len(conns))
	for i := range s.shards {
		s.shards[i] = &shard{}
	}
	s.tcp = &dns.Server{
		Listener:      ln,
		Net:           "tcp",
		Handler:       dns.HandlerFunc(s.serveTCP),
		MsgAcceptFunc: accept,
		ReadTimeout:   5 * time.Second,
		WriteTimeout:  5 * time.Second,
		IdleTimeout:   func() time.Duration { return 10 * time.Second },
	}
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
		err = s.tcp.ShutdownContext(ctx)
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

// readLoop is one UDP socket's reader, one datagram per system call
// (serveUDP uses batched I/O where it can): fast path inline, slow path
// in a goroutine.
func (s *Server) readLoop(c *net.UDPConn, sh *shard) {
	defer s.wg.Done()
	defer s.alive.Add(-1)
	buf := make([]byte, dns.MaxMsgSize)
	out := make([]byte, s.cfg.UDPSize)
	size := int(s.cfg.UDPSize)
	var q zone.Query
	for {
		n, from, err := c.ReadFromUDPAddrPort(buf)
		if err != nil {
			if s.stopped.Load() || errors.Is(err, net.ErrClosed) {
				return
			}
			s.logError("dns udp read", err)
			continue
		}
		sh.queries.Add(1)
		sh.batches.Add(1)
		if t := s.fresh(s.table.Load()); t != nil {
			m := s.fast(t, buf[:n], &q, out, size, from.Addr(), sh)
			if m > 0 {
				if _, err := c.WriteToUDPAddrPort(out[:m], from); err != nil {
					s.logError("dns udp write", err)
				}
				sh.fast.Add(1)
				if s.debugEnabled() {
					s.debugQuery(out[:m], from, "fast")
				}
				continue
			}
			if m < 0 {
				continue // rate-limited: no reply
			}
		}
		s.slowUDP(c, buf[:n], from, sh)
	}
}

// fast answers a plain UDP query from client without miekg/dns: from the
// table's pre-packed answers, or, for a name the node's data does not
// cover and a client that gets recursion, from the upstream cache's wire
// template. 0 means the slow path; -1 that the answer was rate-limited
// away (counted; nothing to send).
//
// A client outside the recursion ACL costs one ACL match per answer here
// (none at all when checkClients is false, e.g. on the default loopback
// address): its answers lose RA and go through the rate limiter, because
// the node's own records (a 4000-byte TXT) amplify as well as anyone's.
func (s *Server) fast(t *zone.Table, pkt []byte, q *zone.Query, out []byte, size int, client netip.Addr, sh *shard) int {
	if t == nil || !zone.Parse(pkt, size, q) {
		return 0
	}
	m := t.Answer(pkt, q, out, s.cfg.UDPSize)
	if m == 0 {
		if !q.Miss {
			return 0
		}
		// Not our name: only recursion answers it, and the upstream cache
		// is recursion's too (as BIND's allow-query-cache defaults to
		// allow-recursion). Others go to the slow path, which refuses.
		if s.checkClients && !s.acl.contains(client) {
			return 0
		}
		return s.cached(pkt, q, out)
	}
	if s.checkClients && !s.acl.contains(client) {
		if m = s.screen(out[:m], client, sh); m == 0 {
			return -1
		}
	}
	return m
}

// screen applies to resp (in place) what a UDP client outside the
// recursion ACL gets: RA cleared, then the response-rate limit. It
// returns the length to send, 0 for nothing.
func (s *Server) screen(resp []byte, client netip.Addr, sh *shard) int {
	if len(resp) < 12 {
		return 0
	}
	resp[3] &^= 0x80 // RA: no recursion for this client (RFC 1035 §4.1.1)
	if s.rrl == nil {
		return len(resp)
	}
	switch s.rrl.take(client) {
	case rrlSend:
		return len(resp)
	case rrlSlipTC:
		sh.slipped.Add(1)
		return slip(resp)
	}
	sh.rateLimited.Add(1)
	return 0
}

// recursionFor reports whether client gets recursion.
func (s *Server) recursionFor(client netip.Addr) bool {
	return !s.checkClients || s.acl.contains(client)
}

// cached writes the upstream cache's answer to q with TTLs counted down.
func (s *Server) cached(req []byte, q *zone.Query, out []byte) int {
	var key [258]byte
	n := copy(key[:], q.Key[:q.KeyLen])
	binary.BigEndian.PutUint16(key[n:], q.Qtype)
	now := s.up.Now()
	tpl, ok := s.up.Template(key[:n+2], now)
	if !ok || tpl.QEnd != q.QEnd {
		return 0
	}
	b := tpl.Msg
	m := zone.Write(req, q, out, binary.BigEndian.Uint16(b[2:])&0x000F,
		binary.BigEndian.Uint16(b[6:]), binary.BigEndian.Uint16(b[8:]), binary.BigEndian.Uint16(b[10:]), b[tpl.QEnd:], s.cfg.UDPSize)
	if m == 0 {
		return 0
	}
	age := uint32(now.Sub(tpl.Stored) / time.Second)
	for i, off := range tpl.TTLOffs {
		ttl := tpl.TTLs[i]
		if ttl > age {
			ttl -= age
		} else {
			ttl = 0
		}
		binary.BigEndian.PutUint32(out[off:], ttl)
	}
	return m
}

// slowUDP answers one datagram through miekg/dns in its own goroutine, so
// a slow upstream never stalls the socket. pkt is copied.
func (s *Server) slowUDP(c *net.UDPConn, pkt []byte, from netip.AddrPort, sh *shard) {
	sh.slow.Add(1)
	select {
	case s.slow <- struct{}{}:
	default:
		sh.dropped.Add(1) // overloaded: drop, the client retries
		return
	}
	req := append([]byte(nil), pkt...)
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		defer func() { <-s.slow }()
		recurse := s.recursionFor(from.Addr())
		resp := s.handleRaw(s.baseCtx, req, recurse)
		if resp == nil {
			return
		}
		if !recurse {
			n := s.screen(resp, from.Addr(), &s.slowCnt)
			if n == 0 {
				return
			}
			resp = resp[:n]
		}
		if _, err := c.WriteToUDPAddrPort(resp, from); err != nil && !s.stopped.Load() {
			s.logError("dns udp write", err)
		}
		if s.debugEnabled() {
			s.debugQuery(resp, from, "slow")
		}
	}()
}

func (s *Server) debugEnabled() bool { return s.log.Enabled(context.Background(), slog.LevelDebug) }

func (s *Server) debugQuery(resp []byte, from netip.AddrPort, path string) {
	var m dns.Msg
	if m.Unpack(resp) != nil || len(m.Question) == 0 {
		return
	}
	q := m.Question[0]
	s.log.Debug("query", "name", q.Name, "type", dns.TypeToString[q.Qtype], "rcode", dns.RcodeToString[m.Rcode], "answers", len(m.Answer), "from", from.String(), "path", path)
}

// logError logs at most one error line per second (a flood of bad
// packets must not flood the log).
func (s *Server) logError(msg string, err error) {
	now := time.Now().Unix()
	last := s.lastLog.Load()
	if now == last || !s.lastLog.CompareAndSwap(last, now) {
		return
	}
	s.log.Error(msg, "err", err)
}
