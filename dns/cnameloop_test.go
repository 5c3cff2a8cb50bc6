package dns

import (
	"strings"
	"testing"

	"github.com/miekg/dns"
)

// A CNAME loop in the local records is answered with each record of the
// chain once, as Knot answers it, not with the loop walked until the
// chase limit (the same CNAME records repeated, nine in all): RFC 1034
// §3.6.2 has loops signalled, and RFC 2181 §5 has no RR sent twice.
func TestCNAMELoopOnce(t *testing.T) {
	pub, local := publishSources(t, 1, map[string]string{"site.p2p": "10.77.0.5"},
		`{"name":"x.home","type":"CNAME","ttl":120,"data":"y.home"}`,
		`{"name":"y.home","type":"CNAME","ttl":120,"data":"x.home"}`,
		`{"name":"self.home","type":"CNAME","ttl":120,"data":"self.home"}`,
		`{"name":"a.home","type":"CNAME","ttl":120,"data":"b.home"}`,
		`{"name":"b.home","type":"CNAME","ttl":120,"data":"c.home"}`,
		`{"name":"c.home","type":"CNAME","ttl":120,"data":"b.home"}`)
	s := newTestServer(t, testConfig{Config: Config{Upstreams: []string{deadUpstream(t)}}}, pub, local)
	want := map[string][]string{
		"X.home.":    {"x.home. y.home.", "y.home. x.home."},
		"self.home.": {"self.home. self.home."},
		"a.home.":    {"a.home. b.home.", "b.home. c.home.", "c.home. b.home."},
	}
	for name, chain := range want {
		for _, proto := range []string{"udp", "tcp"} {
			for _, qt := range []uint16{dns.TypeA, dns.TypeTXT} {
				m := ask(t, proto, s.Addr(), name, qt, true)
				var got []string
				for _, rr := range m.Answer {
					c, ok := rr.(*dns.CNAME)
					if !ok {
						t.Fatalf("%s %s: %v in the answer", proto, name, rr)
					}
					got = append(got, strings.ToLower(c.Hdr.Name)+" "+c.Target)
				}
				if m.Rcode != dns.RcodeSuccess || strings.Join(got, ", ") != strings.Join(chain, ", ") {
					t.Errorf("%s %s %s: %s %v, want NOERROR %v", proto, name, dns.TypeToString[qt], dns.RcodeToString[m.Rcode], got, chain)
				}
			}
		}
	}
}
