package dns

import (
	"context"
	"errors"
	"net/netip"

	"github.com/miekg/dns"
)

// ErrNoReply is returned by Exchange for a message that gets no answer
// at all (a response, QR=1, or fewer than 12 bytes); its text is the
// whole message DoH answers with.
var ErrNoReply = errors.New("not a DNS query: shorter than a DNS header, or a response (QR set)")

// Exchange answers one query in wire format from client, through the
// same answer path as TCP (no UDP size limit): the reply in wire format,
// and the smallest TTL of its answer and authority records (0 when it
// has none), which DoH turns into Cache-Control (RFC 8484 §5.1). It is
// the entry point of DNS over HTTPS (http/doh); the client's recursion
// follows Config.RecursionAllow as on UDP and TCP. Exchange checks the
// table is current, as every query does.
func (s *Server) Exchange(ctx context.Context, query []byte, client netip.Addr) ([]byte, uint32, error) {
	s.slowCnt.queries.Add(1)
	b, m, _ := s.exchange(ctx, query, true, s.recursionFor(client.Unmap()), client.Unmap())
	if b == nil {
		return nil, 0, ErrNoReply
	}
	if s.qlog.on.Load() {
		s.note(client, b, "doh")
	}
	return b, minTTL(m), nil
}

// minTTL is the smallest TTL of m's answer and authority records, and
// for a negative answer (no answer records) at most its SOA's MINIMUM
// (RFC 8484 §5.1, RFC 2308 §5); 0 for none (nothing to cache: an error,
// or a bare header).
func minTTL(m *dns.Msg) uint32 {
	if m == nil {
		return 0
	}
	var ttl uint32
	first := true
	for _, sec := range [][]dns.RR{m.Answer, m.Ns} {
		for _, rr := range sec {
			t := rr.Header().Ttl
			if soa, ok := rr.(*dns.SOA); ok && len(m.Answer) == 0 {
				t = min(t, soa.Minttl)
			}
			if first || t < ttl {
				ttl, first = t, false
			}
		}
	}
	return ttl
}
