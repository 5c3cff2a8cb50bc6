package dns

import (
	"context"
	"testing"
	"time"

	"github.com/miekg/dns"
)

// The freshness lifetime Exchange gives DoH for a negative answer is at
// most its SOA's MINIMUM (RFC 8484 §5.1, RFC 2308 §5): the upstream's
// NXDOMAIN and NODATA carry a SOA of TTL 600 and MINIMUM 60, which the
// node's own cache keeps for 60 s; an HTTP cache told 600 would serve
// the name as missing for ten times as long.
func TestExchangeNegativeLifetime(t *testing.T) {
	up := startUpstream(t)
	pub, local := testSources(t)
	s := newTestServer(t, testConfig{Config: Config{Upstreams: []string{up.addr}}}, pub, local)
	for _, tc := range []struct {
		name  string
		qtype uint16
		rcode int
	}{
		{"missing.example.", dns.TypeA, dns.RcodeNameError},
		{"pub.example.", dns.TypeTXT, dns.RcodeSuccess}, // NODATA
	} {
		q := new(dns.Msg).SetQuestion(tc.name, tc.qtype)
		raw, err := q.Pack()
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		b, ttl, err := s.Exchange(ctx, raw, loopback)
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		var m dns.Msg
		if err := m.Unpack(b); err != nil {
			t.Fatal(err)
		}
		if m.Rcode != tc.rcode || len(m.Answer) != 0 || len(m.Ns) != 1 {
			t.Fatalf("%s: want a negative answer with a SOA, got\n%v", tc.name, &m)
		}
		soa := m.Ns[0].(*dns.SOA)
		if ttl > soa.Minttl {
			t.Errorf("%s %s: lifetime %d s, more than the SOA's MINIMUM %d (TTL %d)", tc.name, dns.RcodeToString[m.Rcode], ttl, soa.Minttl, soa.Hdr.Ttl)
		}
	}
}
