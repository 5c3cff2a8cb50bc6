package dns

import (
	"peerdns/messages"

	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/miekg/dns"
)

// Health is the `dns` entry of GET /api/health services.
type Health struct {
	Enabled     bool `json:"enabled"`
	Healthy     bool `json:"healthy"`
	Initialized bool `json:"initialized"`
}

// Health reports the real server state: initialized once Start bound
// every socket, healthy while every UDP reader runs, the TCP server is
// up and an answer table is loaded.
func (s *Server) Health() Health {
	started, stopped := s.started.Load(), s.stopped.Load()
	s.mu.Lock()
	n := len(s.udp)
	s.mu.Unlock()
	healthy := started && !stopped && int(s.alive.Load()) == n && n > 0 && s.tcpUp.Load() && s.table.Load() != nil
	return Health{Enabled: true, Healthy: healthy, Initialized: started}
}

// Stats are the server's query counters since start.
type Stats struct {
	Queries     int64 `json:"queries"`     // every UDP packet and TCP query
	FastAnswers int64 `json:"fastAnswers"` // answered from pre-packed wire answers
	SlowPath    int64 `json:"slowPath"`    // handed to the miekg/dns path
	Dropped     int64 `json:"dropped"`     // not answered (responses, runts, overload)
	Upstream    int64 `json:"upstream"`    // questions sent to the upstream cache
	NXDomain    int64 `json:"nxdomain"`
	ServFail    int64 `json:"servfail"`
	FormErr     int64 `json:"formerr"`
	Refused     int64 `json:"refused"`
	NotImp      int64 `json:"notimp"`
	// RecursionRefused counts REFUSED answers to clients outside the
	// recursion ACL for names only upstream knows (also in Refused).
	RecursionRefused int64 `json:"recursionRefused"`
	// RateLimited counts UDP responses to clients outside the recursion
	// ACL dropped by the response-rate limit; RateLimitSlipped those sent
	// truncated (TC=1) instead, so a real client retries over TCP.
	RateLimited      int64 `json:"rateLimited"`
	RateLimitSlipped int64 `json:"rateLimitSlipped"`
	// StreamConnsRefused counts TCP and DoT connections closed at once
	// for finding their listener at Config.MaxStreamConns (stream.go).
	StreamConnsRefused int64 `json:"streamConnsRefused"`
	// StreamConnsOverShare counts those closed at once because their
	// address held its share of MaxStreamConns (stream.go).
	StreamConnsOverShare int64 `json:"streamConnsOverShare"`
	CacheHits            int64 `json:"cacheHits"`
	CacheMisses          int64 `json:"cacheMisses"`
	CacheSize            int   `json:"cacheSize"`
	// PerSocket is the UDP queries each SO_REUSEPORT socket read (the
	// kernel spreads clients over them by flow hash).
	PerSocket []int64 `json:"perSocket"`
	// Batches is how many recvmmsg calls (or single reads) returned data.
	Batches int64 `json:"batches"`
}

// Stats sums the counters of every reader and the slow path.
func (s *Server) Stats() Stats {
	var st Stats
	s.mu.Lock()
	shards := append([]*shard{&s.slowCnt}, s.shards...)
	for _, l := range []*streamListener{s.tcpListener, s.dotListener} {
		if l != nil {
			st.StreamConnsRefused += l.lim.AtCap()
			st.StreamConnsOverShare += l.lim.Refused()
		}
	}
	s.mu.Unlock()
	for i, sh := range shards {
		if i > 0 {
			st.PerSocket = append(st.PerSocket, sh.queries.Load())
		}
		st.Batches += sh.batches.Load()
		st.Queries += sh.queries.Load()
		st.FastAnswers += sh.fast.Load()
		st.SlowPath += sh.slow.Load()
		st.Dropped += sh.dropped.Load()
		st.Upstream += sh.upstream.Load()
		st.NXDomain += sh.nxdomain.Load()
		st.ServFail += sh.servfail.Load()
		st.FormErr += sh.formerr.Load()
		st.Refused += sh.refused.Load()
		st.NotImp += sh.notimp.Load()
		st.RecursionRefused += sh.recursionRefused.Load()
		st.RateLimited += sh.rateLimited.Load()
		st.RateLimitSlipped += sh.slipped.Load()
	}
	us := s.up.Stats()
	st.CacheHits, st.CacheMisses, st.CacheSize = us.CacheHits, us.CacheMisses, us.CacheEntries
	return st
}

// LookupTypes are the record types the diagnostics lookup accepts.
var LookupTypes = []string{"A", "AAAA", "MX", "TXT", "NS", "CNAME", "SRV", "PTR", "SOA"}

// LookupResult is the body of POST /api/diagnostics/dns-lookup.
type LookupResult struct {
	Success      bool     `json:"success"`
	Domain       string   `json:"domain"`
	Type         string   `json:"type"`
	Results      []string `json:"results"`
	ResponseTime int64    `json:"responseTime"` // milliseconds
	Error        string   `json:"error,omitempty"`
}

// ErrBadLookupType is returned for a type outside LookupTypes.
var ErrBadLookupType = errors.New("unsupported lookup type")

// Lookup asks the node's own DNS server (over UDP, TCP when truncated)
// for (domain, typ) and reports the answer's records of that type as
// text. A failed lookup is Success false with Error; err is only for a
// bad type or a server that is not running.
func (s *Server) Lookup(ctx context.Context, domain, typ string) (LookupResult, error) {
	typ = strings.ToUpper(strings.TrimSpace(typ))
	if typ == "" {
		typ = "A"
	}
	res := LookupResult{Domain: domain, Type: typ, Results: []string{}}
	qt, ok := dns.StringToType[typ]
	if !ok || !contains(LookupTypes, typ) {
		return res, fmt.Errorf("%w %q (one of %s)", ErrBadLookupType, typ, strings.Join(LookupTypes, ", "))
	}
	addr := s.Addr()
	if addr == "" || !s.started.Load() || s.stopped.Load() {
		return res, errors.New("dns server is not running")
	}
	start := time.Now()
	defer func() { res.ResponseTime = time.Since(start).Milliseconds() }()
	name := strings.TrimSpace(domain)
	if _, ok := dns.IsDomainName(name); !ok || name == "" {
		res.Error = fmt.Sprintf("%q is not a valid domain name", domain)
		res.ResponseTime = time.Since(start).Milliseconds()
		return res, nil
	}
	q := new(dns.Msg)
	q.SetQuestion(dns.Fqdn(name), qt)
	q.SetEdns0(s.cfg.UDPSize, false)
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	c := &dns.Client{Net: "udp", UDPSize: s.cfg.UDPSize}
	m, _, err := c.ExchangeContext(ctx, q, addr)
	if err == nil && m.Truncated {
		m, _, err = (&dns.Client{Net: "tcp"}).ExchangeContext(ctx, q, addr)
	}
	res.ResponseTime = time.Since(start).Milliseconds()
	if err != nil {
		res.Error = err.Error()
		return res, nil
	}
	if m.Rcode != dns.RcodeSuccess {
		res.Error = dns.RcodeToString[m.Rcode]
		return res, nil
	}
	for _, rr := range m.Answer {
		if rr.Header().Rrtype == qt {
			res.Results = append(res.Results, strings.TrimSpace(strings.TrimPrefix(rr.String(), rr.Header().String())))
		}
	}
	if len(res.Results) == 0 {
		res.Error = "no " + typ + " records"
		return res, nil
	}
	res.Success = true
	return res, nil
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// PublicLookup resolves name's A record through the upstream servers
// only (never the node's own data): the public IP, or "" when the name
// has no public A record. The localdns actor uses it to find p2p domains
// that also exist in public DNS.
func (s *Server) PublicLookup(ctx context.Context, name string) (string, error) {
	m, err := s.up.Resolve(ctx, name, dns.TypeA, dns.ClassINET)
	if err != nil {
		return "", err
	}
	for _, rr := range m.Answer {
		if a, ok := rr.(*dns.A); ok {
			return a.A.String(), nil
		}
	}
	return "", nil
}

// ClearCache drops the upstream cache entries of domain and returns how
// many there were.
func (s *Server) ClearCache(domain string) (int, error) {
	name, err := messages.CleanName("domain", domain)
	if err != nil {
		return 0, err
	}
	return s.up.Clear(name), nil
}
