package dns

import (
	"sync/atomic"

	"github.com/miekg/dns"

	"peerdns/dns/upstream"
	"peerdns/dns/zone"
)

// Source is where the server found the answer to a query: the label
// `source` of the node's DNS metrics.
type Source uint8

// Answer sources.
const (
	// SourceNone: answered before any data was looked at (a malformed
	// query, an opcode we do not implement, a zone transfer, a client
	// refused recursion).
	SourceNone     Source = iota
	SourceP2P             // the p2p view: resolved domains and the p2p zone's NXDOMAIN
	SourceLocal           // local records
	SourceInternal        // internal domains (the admin and plugin domains)
	SourceUpstream        // forwarded through the upstream resolver (which may itself answer from its cache)
	SourceCache           // the upstream cache's wire answers on the fast path
	numSources
)

var sourceNames = [numSources]string{"none", "p2p", "local", "internal", "upstream", "cache"}

func (s Source) String() string {
	if s < numSources {
		return sourceNames[s]
	}
	return "none"
}

// RcodeOther is the counter slot of every rcode above BADCOOKIE (23),
// the last one a DNS server sends to a plain query (RFC 7873); the
// extended ones (BADVERS 16, BADCOOKIE 23) keep their own slots.
const RcodeOther = dns.RcodeBadCookie + 1

// answers counts answers by source and rcode: one array per reader
// shard (and one for the slow path), so the fast path adds to a counter
// only its own goroutine writes and no lock is ever taken.
type answers [numSources][RcodeOther + 1]atomic.Int64

func (a *answers) add(src Source, rcode int) {
	if rcode < 0 || rcode > RcodeOther {
		rcode = RcodeOther
	}
	a[src][rcode].Add(1)
}

// kindSource is the source of an answer written from a table node.
func kindSource(k zone.Kind) Source {
	switch k {
	case zone.KindInternal:
		return SourceInternal
	case zone.KindLocal:
		return SourceLocal
	case zone.KindP2P, zone.KindPublic, zone.KindUnresolved, zone.KindZone:
		// KindZone is the p2p zone's own data: its apex SOA and NS and
		// its name server's address.
		return SourceP2P
	}
	return SourceNone
}

// resultSource is the source of a slow-path answer built from res.
func resultSource(res zone.Result) Source {
	switch {
	case res.Upstream:
		return SourceUpstream
	case res.Kind != 0:
		return kindSource(res.Kind)
	case res.Authoritative:
		return SourceP2P // the p2p zone's NXDOMAIN, the only kindless authoritative answer
	}
	return SourceNone
}

// AnswerCount is how many answers of one source and rcode the server
// built since it started (Rcode RcodeOther: any rcode above BADCOOKIE).
type AnswerCount struct {
	Source Source
	Rcode  int
	Count  int64
}

// AnswerCounts sums the answer counters of every reader and the slow
// path; pairs never seen are left out. The readers keep counting while
// this runs: each count is a value it held during the call.
func (s *Server) AnswerCounts() []AnswerCount {
	s.mu.Lock()
	shards := append([]*shard{&s.slowCnt}, s.shards...)
	s.mu.Unlock()
	var sum [numSources][RcodeOther + 1]int64
	for _, sh := range shards {
		for src := range sh.answers {
			for rc := range sh.answers[src] {
				sum[src][rc] += sh.answers[src][rc].Load()
			}
		}
	}
	var out []AnswerCount
	for src := range sum {
		for rc, n := range sum[src] {
			if n > 0 {
				out = append(out, AnswerCount{Source: Source(src), Rcode: rc, Count: n})
			}
		}
	}
	return out
}

// UpstreamLatency reads the histogram of exchanges with upstream servers.
func (s *Server) UpstreamLatency() upstream.Latency { return s.up.Latency() }

// UpstreamStats reads the upstream resolver's counters.
func (s *Server) UpstreamStats() upstream.Stats { return s.up.Stats() }
