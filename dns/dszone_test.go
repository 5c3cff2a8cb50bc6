package dns

import (
	"net"
	"testing"
	"time"

	"github.com/miekg/dns"
)

// A DS query for the apex of a zone the node cuts below p2p. (a claimed
// or internal domain) is answered from the parent's side of the cut, as
// Knot answers it when it serves both zones: the DS RRset lives in the
// parent zone (RFC 4034 §5, RFC 4035 §3.1.4.1), so its NODATA carries
// the parent's SOA, not the child's. Below the apex the name is the
// child zone's, and so is the SOA.
func TestDSFromParentZone(t *testing.T) {
	pub, local := knotSources(t)
	s := newTestServer(t, testConfig{Config: Config{Upstreams: []string{deadUpstream(t)}}}, pub, local)
	for _, tc := range []struct{ name, soa string }{
		{"site.p2p.", "p2p."},
		{"Site.P2P.", "p2p."},
		{"admin.p2p.", "p2p."},
		{"a.deep.p2p.", "p2p."},
		{"www.site.p2p.", "site.p2p."},
		{"txt.site.p2p.", "site.p2p."},
	} {
		for _, proto := range []string{"udp", "tcp"} {
			m := ask(t, proto, s.Addr(), tc.name, dns.TypeDS, true)
			if m.Rcode != dns.RcodeSuccess || !m.Authoritative || len(m.Answer) != 0 || len(m.Ns) != 1 {
				t.Fatalf("%s %s DS: want an authoritative NODATA, got\n%v", proto, tc.name, m)
			}
			soa, ok := m.Ns[0].(*dns.SOA)
			if !ok || soa.Hdr.Name != tc.soa {
				t.Errorf("%s %s DS: authority %v, want the SOA of %s", proto, tc.name, m.Ns[0], tc.soa)
			}
		}
	}
	// Knot, serving the same zones, agrees (when it is installed).
	host, _, _ := net.SplitHostPort(s.Addr())
	knot := startKnot(t, knotZones(host))
	c := &dns.Client{Timeout: 3 * time.Second}
	for _, name := range []string{"site.p2p.", "admin.p2p.", "a.deep.p2p.", "v6.p2p.", "www.site.p2p."} {
		q := new(dns.Msg).SetQuestion(name, dns.TypeDS)
		q.RecursionDesired = false
		if a, b := askBoth(t, c, q, s.Addr(), knot); a != b {
			t.Errorf("%s DS:\nnode:\n%sknot:\n%s", name, a, b)
		}
	}
}
