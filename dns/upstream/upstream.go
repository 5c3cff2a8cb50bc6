// Package upstream forwards questions the node cannot answer itself to
// public resolvers and caches their answers.
//
// Forwarding: UDP with EDNS0 (1232 bytes) to each server in turn, retried
// over TCP when the answer is truncated; a server that times out, fails
// or answers with an RCODE other than NOERROR, NXDOMAIN or YXDOMAIN
// (SERVFAIL, REFUSED, or one about our query: FORMERR, NOTIMP, BADVERS)
// is skipped for the next one.
//
// Cache: github.com/hashicorp/golang-lru/v2, bounded by entries. Positive
// answers live for their smallest TTL; NXDOMAIN and NODATA for
// min(SOA TTL, SOA MINIMUM) as RFC 2308 §5 says (and no longer than the
// CNAMEs before them), and are not cached without a SOA; a failure of every server is remembered for
// FailureTTL (RFC 2308 §7.1 allows up to five minutes) so a dead
// upstream costs one timeout, not one per query; one that came of the
// asker's own deadline (a short diagnostic) is not, and those who joined
// its query ask again. Every record's TTL is
// capped at MaxTTL as it arrives (a TTL with its top bit set is 0, RFC
// 2181 §8), so clients are never told to keep an answer longer than the
// cache does, and counted down on every hit.
package upstream

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	lru "github.com/hashicorp/golang-lru/v2"
	"github.com/miekg/dns"
)

// ErrFailed means no upstream server gave a usable answer.
var ErrFailed = errors.New("no upstream server answered")

// ErrNoServers means the resolver has no upstream servers configured.
var ErrNoServers = errors.New("no upstream servers configured")

// Config tunes a Resolver.
type Config struct {
	Servers    []string      // host:port of each upstream, tried in order
	Timeout    time.Duration // per attempt; default 1s
	CacheSize  int           // entries; default 10000
	MaxTTL     time.Duration // cap on cached TTLs; default 24h
	FailureTTL time.Duration // how long a total failure is remembered; default 5s
	UDPSize    uint16        // EDNS0 size we ask upstream for; default 1232
	Now        func() time.Time
}

// Resolver forwards and caches. Safe for concurrent use.
type Resolver struct {
	cfg     Config // Servers and CacheSize are read from the two fields below
	servers atomic.Pointer[[]string]
	size    atomic.Int64 // the cache's capacity in entries
	cache   *lru.Cache[key, *entry]
	tcp     *dns.Client

	mu       sync.Mutex // guards inflight and orders stores against Clear
	inflight map[key]*call
	// epoch counts Clear and Purge calls (changed under mu). A forward
	// remembers it when it starts and stores its answer only if no clear
	// came since: an answer fetched before a clear must not be cached
	// after it, or clear-dns-cache would silently not clear.
	epoch uint64

	wmu  sync.RWMutex // guards wire
	wire map[string]*Template

	hits, misses, failures, forwarded atomic.Int64
	lat                               latency // every exchange with a server (latency.go)
}

type key struct {
	name          string // lowercased FQDN
	qtype, qclass uint16
}

type entry struct {
	msg     *dns.Msg // Rcode, Answer, Ns, Extra without OPT
	stored  time.Time
	expires time.Time
	failed  bool
	wkey    string    // its Template's key, when it has one
	tpl     *Template // its wire answer for the server's fast path
}

type call struct {
	done chan struct{}
	msg  *dns.Msg
	err  error
	cut  bool // err came of the asker's own deadline or cancel, not of the servers
}

// New returns a resolver for cfg.
func New(cfg Config) *Resolver {
	if cfg.Timeout <= 0 {
		cfg.Timeout = time.Second
	}
	if cfg.CacheSize <= 0 {
		cfg.CacheSize = 10000
	}
	if cfg.MaxTTL <= 0 {
		cfg.MaxTTL = 24 * time.Hour
	}
	if cfg.FailureTTL <= 0 {
		cfg.FailureTTL = 5 * time.Second
	}
	if cfg.UDPSize == 0 {
		cfg.UDPSize = 1232
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	r := &Resolver{
		cfg:      cfg,
		tcp:      &dns.Client{Net: "tcp", Timeout: cfg.Timeout},
		inflight: map[key]*call{},
		wire:     map[string]*Template{},
	}
	r.cache, _ = lru.NewWithEvict[key, *entry](cfg.CacheSize, r.evicted) // only fails for size <= 0
	r.SetServers(cfg.Servers)
	r.size.Store(int64(cfg.CacheSize))
	return r
}

// Servers is the upstream list in use.
func (r *Resolver) Servers() []string { return append([]string(nil), *r.servers.Load()...) }

// SetServers replaces the upstream list (host:port each, tried in order)
// for the next forwarded query; queries in flight finish on the old one.
// Cached answers stay: they were right when they were asked. Remembered
// failures go (those of queries in flight are not remembered): they were
// the old servers', and the new ones may answer.
func (r *Resolver) SetServers(servers []string) {
	s := append([]string(nil), servers...)
	r.mu.Lock()
	defer r.mu.Unlock()
	r.servers.Store(&s)
	for _, k := range r.cache.Keys() {
		if e, ok := r.cache.Peek(k); ok && e.failed {
			r.cache.Remove(k)
		}
	}
}

// SetCacheSize changes the cache's capacity (entries, at least 1); a
// smaller cache evicts its least recently used answers at once.
func (r *Resolver) SetCacheSize(n int) {
	n = max(n, 1)
	r.size.Store(int64(n))
	r.cache.Resize(n)
}

// CacheSize is the cache's capacity in entries.
func (r *Resolver) CacheSize() int { return int(r.size.Load()) }

// Stats are the resolver's counters.
type Stats struct {
	CacheHits, CacheMisses, Failures, Forwarded int64
	CacheEntries                                int
}

// Stats reads the counters.
func (r *Resolver) Stats() Stats {
	return Stats{CacheHits: r.hits.Load(), CacheMisses: r.misses.Load(), Failures: r.failures.Load(), Forwarded: r.forwarded.Load(), CacheEntries: r.cache.Len()}
}

// Resolve answers (name, qtype, qclass) from the cache or upstream. The
// returned message is the caller's own (a copy with TTLs counted down);
// its Rcode is the upstream's. err is ErrFailed (or ErrNoServers) when no
// server answered; that failure is cached for FailureTTL, unless ctx
// ended first (then the servers were not given their time).
func (r *Resolver) Resolve(ctx context.Context, name string, qtype, qclass uint16) (*dns.Msg, error) {
	k := key{strings.ToLower(dns.Fqdn(name)), qtype, qclass}
	if m, err, ok := r.lookup(k); ok {
		r.hits.Add(1)
		return m, err
	}
	r.mu.Lock()
	// Stored between the lookup above and the lock (the query in flight
	// then ended): a second query would go upstream for it.
	if m, err, ok := r.lookup(k); ok {
		r.mu.Unlock()
		r.hits.Add(1)
		return m, err
	}
	r.misses.Add(1)
	if c, ok := r.inflight[k]; ok {
		r.mu.Unlock()
		select {
		case <-c.done:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		if c.cut && !ended(ctx) {
			// The asker we waited for ran out of time, not the servers:
			// ask again on our own time.
			return r.Resolve(ctx, name, qtype, qclass)
		}
		if c.err != nil {
			return nil, c.err
		}
		return c.msg.Copy(), nil
	}
	c := &call{done: make(chan struct{})}
	r.inflight[k] = c
	epoch, servers := r.epoch, r.servers.Load()
	r.mu.Unlock()

	c.msg, c.err = r.forward(ctx, k, *servers)
	// A failure when our own deadline ended or we were cancelled says
	// nothing of the servers (slow for us, they may answer the next
	// asker): it is not remembered.
	c.cut = c.err != nil && ended(ctx)
	var e *entry
	if !c.cut {
		e = r.entryFor(k, c.msg, c.err) // built outside the lock: every miss takes it
	}
	r.mu.Lock()
	if e != nil && r.epoch == epoch && (!e.failed || r.servers.Load() == servers) {
		r.store(k, e)
	}
	if r.inflight[k] == c {
		delete(r.inflight, k)
	}
	r.mu.Unlock()
	close(c.done)
	if c.err != nil {
		return nil, c.err
	}
	return c.msg.Copy(), nil
}

// ended reports whether ctx is done or past its deadline: a socket
// given that deadline can time out before ctx's own timer has fired.
func ended(ctx context.Context) bool {
	if ctx.Err() != nil {
		return true
	}
	dl, ok := ctx.Deadline()
	return ok && !time.Now().Before(dl)
}

func (r *Resolver) lookup(k key) (*dns.Msg, error, bool) {
	e, ok := r.cache.Get(k)
	if !ok {
		return nil, nil, false
	}
	now := r.cfg.Now()
	if !now.Before(e.expires) {
		r.cache.Remove(k)
		return nil, nil, false
	}
	if e.failed {
		return nil, ErrFailed, true
	}
	m := e.msg.Copy()
	age := uint32(now.Sub(e.stored) / time.Second)
	for _, sec := range [][]dns.RR{m.Answer, m.Ns, m.Extra} {
		for _, rr := range sec {
			if h := rr.Header(); h.Ttl > age {
				h.Ttl -= age
			} else {
				h.Ttl = 0
			}
		}
	}
	return m, nil, true
}

// entryFor is the cache entry of the answer (m, err) to k, its wire
// template built; nil when it is not to be cached.
func (r *Resolver) entryFor(k key, m *dns.Msg, err error) *entry {
	now := r.cfg.Now()
	if err != nil {
		return &entry{stored: now, expires: now.Add(r.cfg.FailureTTL), failed: true}
	}
	ttl, ok := cacheTTL(m)
	if !ok {
		return nil
	}
	d := min(time.Duration(ttl)*time.Second, r.cfg.MaxTTL)
	if d <= 0 {
		return nil
	}
	e := &entry{msg: m.Copy(), stored: now, expires: now.Add(d)}
	r.template(k, e)
	return e
}

// store caches e as the answer to k; called with mu held.
func (r *Resolver) store(k key, e *entry) {
	r.putTemplate(e)
	r.cache.Add(k, e)
}

// cacheTTL is how long m may be cached, in seconds.
func cacheTTL(m *dns.Msg) (uint32, bool) {
	switch m.Rcode {
	case dns.RcodeSuccess, dns.RcodeNameError:
	default:
		return 0, false
	}
	ttl := uint32(1<<31 - 1)
	for _, rr := range m.Answer {
		ttl = min(ttl, rr.Header().Ttl)
	}
	// NXDOMAIN or NODATA, also at the end of a CNAME chain: RFC 2308 §5,
	// the SOA's TTL capped by its MINIMUM, and no longer than the chain.
	for _, rr := range m.Ns {
		if soa, ok := rr.(*dns.SOA); ok {
			return min(ttl, soa.Hdr.Ttl, soa.Minttl), true
		}
	}
	// A positive answer; a negative one without SOA is not cached, nor is
	// a chain of CNAMEs that ends without a record of the type (a NODATA).
	return ttl, m.Rcode == dns.RcodeSuccess && hasType(m)
}

// hasType reports whether m's answer holds a record of its question's
// type (any record for ANY).
func hasType(m *dns.Msg) bool {
	if len(m.Question) != 1 {
		return false
	}
	qt := m.Question[0].Qtype
	for _, rr := range m.Answer {
		if qt == dns.TypeANY || rr.Header().Rrtype == qt {
			return true
		}
	}
	return false
}

func (r *Resolver) forward(ctx context.Context, k key, servers []string) (*dns.Msg, error) {
	if len(servers) == 0 {
		r.failures.Add(1)
		return nil, ErrNoServers
	}
	q := new(dns.Msg)
	q.SetQuestion(k.name, k.qtype)
	q.Question[0].Qclass = k.qclass
	q.RecursionDesired = true
	q.SetEdns0(r.cfg.UDPSize, false)
	var errs []error
	for _, srv := range servers {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		r.forwarded.Add(1)
		start := time.Now()
		m, err := r.exchange(ctx, q, srv)
		r.lat.observe(time.Since(start))
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", srv, err))
			continue
		}
		switch m.Rcode {
		case dns.RcodeSuccess, dns.RcodeNameError, dns.RcodeYXDomain: // YXDOMAIN: a DNAME's result too long (RFC 6672 §2.2)
		default:
			// SERVFAIL, REFUSED, or an RCODE about our query rather than
			// the name (FORMERR, NOTIMP, BADVERS, ...): not the client's
			// to see.
			errs = append(errs, fmt.Errorf("%s: rcode %d", srv, m.Rcode))
			continue
		}
		if !answers(m, q) {
			errs = append(errs, fmt.Errorf("%s: answer is for another question", srv))
			continue
		}
		clean(m, uint32(min(r.cfg.MaxTTL/time.Second, 1<<31-1)))
		return m, nil
	}
	r.failures.Add(1)
	return nil, fmt.Errorf("%w: %w", ErrFailed, errors.Join(errs...))
}

func (r *Resolver) exchange(ctx context.Context, q *dns.Msg, srv string) (*dns.Msg, error) {
	ctx1, cancel := context.WithTimeout(ctx, r.cfg.Timeout)
	defer cancel()
	m, err := r.exchangeUDP(ctx1, q, srv)
	if err != nil {
		return nil, err
	}
	if !m.Truncated {
		return m, nil
	}
	// Truncated over UDP: ask again over TCP (RFC 7766 §5).
	ctx2, cancel2 := context.WithTimeout(ctx, r.cfg.Timeout)
	defer cancel2()
	m, _, err = r.tcp.ExchangeContext(ctx2, q, srv)
	return m, err
}

// exchangeUDP sends q to srv from a connected UDP socket (the kernel
// drops datagrams from any other address; the source port is its random
// ephemeral one, the id dns.Id's random one) and returns the first
// datagram that answers q. Any other — one that does not parse, is not a
// response, or has another id or question — is ignored and the wait goes
// on until ctx's deadline (RFC 5452 §9.1): it is what an off-path
// attacker sprays at the port in the server's name.
func (r *Resolver) exchangeUDP(ctx context.Context, q *dns.Msg, srv string) (*dns.Msg, error) {
	b, err := q.Pack()
	if err != nil {
		return nil, err
	}
	var d net.Dialer
	c, err := d.DialContext(ctx, "udp", srv)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	if dl, ok := ctx.Deadline(); ok {
		if err := c.SetDeadline(dl); err != nil {
			return nil, err
		}
	}
	if _, err := c.Write(b); err != nil {
		return nil, err
	}
	size := max(int(r.cfg.UDPSize), dns.MinMsgSize)
	buf := make([]byte, size+1) // one byte more tells a datagram over size
	for {
		n, err := c.Read(buf)
		if err != nil {
			return nil, err
		}
		if n > size {
			// Over the size we asked for (a server that ignores EDNS's):
			// cut, it cannot be read. Ours (our id, a response) is asked
			// again over TCP, as a truncated answer is.
			if buf[0] == byte(q.Id>>8) && buf[1] == byte(q.Id) && buf[2]&0x80 != 0 {
				return &dns.Msg{MsgHdr: dns.MsgHdr{Id: q.Id, Response: true, Truncated: true}}, nil
			}
			continue
		}
		m := new(dns.Msg)
		if m.Unpack(buf[:n]) != nil {
			continue
		}
		if answers(m, q) || m.Response && m.Id == q.Id && len(m.Question) == 0 && m.Rcode != dns.RcodeSuccess {
			return m, nil // (an error without the question: FORMERR, NOTIMP, as some servers send them)
		}
	}
}

// answers reports whether m is a response to q: same id and opcode, and
// q's one question (name case aside).
func answers(m, q *dns.Msg) bool {
	return m.Response && m.Id == q.Id && m.Opcode == q.Opcode && len(m.Question) == 1 &&
		strings.EqualFold(m.Question[0].Name, q.Question[0].Name) &&
		m.Question[0].Qtype == q.Question[0].Qtype && m.Question[0].Qclass == q.Question[0].Qclass
}

// clean keeps what a forwarder passes on: the sections without OPT,
// every TTL at most maxTTL, and 0 for a TTL with its top bit set (RFC
// 2181 §8), as unbound's cache-max-ttl caps what it hands out: the cache
// keeps an answer no longer than maxTTL, neither should its clients. The
// SOA of a negative answer (in authority) gets at most its MINIMUM as
// TTL (RFC 2308 §3, as unbound does): a client keeps the answer
// min(SOA TTL, MINIMUM), and only the TTL is counted down in the cache.
func clean(m *dns.Msg, maxTTL uint32) {
	extra := m.Extra[:0]
	for _, rr := range m.Extra {
		if rr.Header().Rrtype != dns.TypeOPT {
			extra = append(extra, rr)
		}
	}
	m.Extra = extra
	for _, sec := range [][]dns.RR{m.Answer, m.Ns, m.Extra} {
		for _, rr := range sec {
			switch h := rr.Header(); {
			case h.Ttl >= 1<<31:
				h.Ttl = 0
			case h.Ttl > maxTTL:
				h.Ttl = maxTTL
			}
		}
	}
	for _, rr := range m.Ns {
		if soa, ok := rr.(*dns.SOA); ok {
			soa.Hdr.Ttl = min(soa.Hdr.Ttl, soa.Minttl)
		}
	}
}

// Clear drops every cached answer for name; it returns how many. A
// question for name asked after Clear returns is sent upstream again,
// even if one sent before is still in flight.
func (r *Resolver) Clear(name string) int {
	n := strings.ToLower(dns.Fqdn(name))
	r.mu.Lock()
	defer r.mu.Unlock()
	r.epoch++
	for k := range r.inflight {
		if k.name == n {
			delete(r.inflight, k) // its caller still gets its answer; nobody new joins it
		}
	}
	cleared := 0
	for _, k := range r.cache.Keys() {
		if k.name == n {
			if r.cache.Remove(k) {
				cleared++
			}
		}
	}
	return cleared
}

// Purge empties the cache; answers in flight when it is called are not
// cached.
func (r *Resolver) Purge() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.epoch++
	clear(r.inflight)
	r.cache.Purge()
}

// SystemServers reads the nameservers of a resolv.conf file as host:port,
// leaving out any address in self (the node's own DNS listeners, so the
// node never forwards to itself).
func SystemServers(path string, self []string) ([]string, error) {
	cc, err := dns.ClientConfigFromFile(path)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	var out []string
	for _, s := range cc.Servers {
		hp := net.JoinHostPort(s, cc.Port)
		if !IsSelf(hp, self) {
			out = append(out, hp)
		}
	}
	return out, nil
}

// listenAddrPort parses a listen address: an empty host (":53") means
// every address, "localhost" the IPv4 loopback.
func listenAddrPort(s string) (netip.AddrPort, error) {
	host, port, err := net.SplitHostPort(s)
	if err != nil {
		return netip.AddrPort{}, err
	}
	p, err := strconv.ParseUint(port, 10, 16)
	if err != nil {
		return netip.AddrPort{}, err
	}
	switch host {
	case "":
		return netip.AddrPortFrom(netip.IPv6Unspecified(), uint16(p)), nil
	case "localhost":
		return netip.AddrPortFrom(netip.AddrFrom4([4]byte{127, 0, 0, 1}), uint16(p)), nil
	}
	ip, err := netip.ParseAddr(host)
	if err != nil {
		return netip.AddrPort{}, err
	}
	return netip.AddrPortFrom(ip, uint16(p)), nil
}

// isLocalAddr reports whether ip belongs to one of this host's
// interfaces (a listener on every address answers there too).
func isLocalAddr(ip netip.Addr) bool {
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return false
	}
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok {
			if x, ok := netip.AddrFromSlice(n.IP); ok && x.Unmap() == ip.Unmap() {
				return true
			}
		}
	}
	return false
}

// IsSelf reports whether addr (host:port) is one of the self listeners.
// A listener on an unspecified address (0.0.0.0, ::, or an empty host)
// matches every loopback address and every address of this host's
// interfaces on its port.
func IsSelf(addr string, self []string) bool {
	a, err := netip.ParseAddrPort(addr)
	if err != nil {
		return false
	}
	for _, s := range self {
		b, err := listenAddrPort(s)
		if err != nil || a.Port() != b.Port() {
			continue
		}
		if a.Addr().Unmap() == b.Addr().Unmap() {
			return true
		}
		if b.Addr().IsUnspecified() && (a.Addr().IsLoopback() || a.Addr().IsUnspecified() || isLocalAddr(a.Addr())) {
			return true
		}
	}
	return false
}
