package dns

import (
	"net"
	"testing"
	"time"

	"github.com/miekg/dns"
)

// Local records on the name of a claimed domain (its zone's apex) and
// below it are records of that zone: the node answers questions about
// them as Knot does when the zone file holds them.

// startApexLocal starts the node with a local TXT at site.p2p (the apex
// of its zone), one at txt.site.p2p and a CNAME to it, and Knot
// serving the same zones; it returns both addresses.
func startApexLocal(t *testing.T) (node, knot string) {
	t.Helper()
	pub, local := publishSources(t, knotSerial-1, map[string]string{"site.p2p": "10.77.0.5", "v6.p2p": "fd00::5", "a.deep.p2p": "10.77.0.6"},
		`{"name":"txt.site.p2p","type":"TXT","ttl":120,"data":"local under site"}`,
		`{"name":"site.p2p","type":"TXT","ttl":120,"data":"local at apex"}`,
		`{"name":"c.site.p2p","type":"CNAME","ttl":120,"data":"txt.site.p2p."}`)
	s := newTestServer(t, testConfig{Config: Config{Upstreams: []string{deadUpstream(t)}}}, pub, local)
	host, _, _ := net.SplitHostPort(s.Addr())
	zones := knotZones(host)
	zones["p2p."] = "$TTL 30\np2p. SOA ns.p2p. hostmaster.p2p. 5 3600 600 86400 30\np2p. NS ns.p2p.\nns.p2p. A " + host + "\n" +
		"site.p2p. NS ns.p2p.\nv6.p2p. NS ns.p2p.\na.deep.p2p. NS ns.p2p.\nadmin.p2p. NS ns.p2p.\n"
	zones["site.p2p."] += "site.p2p. 120 TXT \"local at apex\"\nc.site.p2p. 120 CNAME txt.site.p2p.\n"
	return s.Addr(), startKnot(t, zones)
}

// A DS question at an apex is the parent's (RFC 4035 §3.1.4.1): with a
// local record on the apex, its NODATA still carries the SOA of p2p.,
// not the child's.
func TestLocalAtApexLikeKnot(t *testing.T) {
	node, knot := startApexLocal(t)
	for _, proto := range []string{"udp", "tcp"} {
		c := &dns.Client{Net: proto, Timeout: 3 * time.Second}
		for _, name := range []string{"site.p2p.", "Site.P2p.", "txt.site.p2p.", "x.site.p2p."} {
			for _, qt := range []uint16{dns.TypeA, dns.TypeAAAA, dns.TypeNS, dns.TypeSOA, dns.TypeMX, dns.TypeTXT, dns.TypeDS, dns.TypeCNAME} {
				q := new(dns.Msg).SetQuestion(name, qt)
				q.RecursionDesired = false
				if a, b := askBoth(t, c, q, node, knot); a != b {
					t.Errorf("%s %s %s:\nnode:\n%sknot:\n%s", proto, name, dns.TypeToString[qt], a, b)
				}
			}
		}
	}
}

// ANY at a local name that a domain's records complete (its address,
// and at the apex SOA and NS) gives those too: over UDP the RRset of
// the lowest type, as Knot answers (RFC 8482 §4.1), over TCP every one;
// at a CNAME, the CNAME alone.
func TestLocalAnyLikeKnot(t *testing.T) {
	node, knot := startApexLocal(t)
	c := &dns.Client{Timeout: 3 * time.Second}
	want := map[string][]uint16{
		"site.p2p.":     {dns.TypeA, dns.TypeNS, dns.TypeSOA, dns.TypeTXT},
		"Site.P2p.":     {dns.TypeA, dns.TypeNS, dns.TypeSOA, dns.TypeTXT},
		"txt.site.p2p.": {dns.TypeA, dns.TypeTXT},
		"c.site.p2p.":   {dns.TypeCNAME},
	}
	for name, types := range want {
		q := new(dns.Msg).SetQuestion(name, dns.TypeANY)
		q.RecursionDesired = false
		if a, b := askBoth(t, c, q, node, knot); a != b {
			t.Errorf("udp %s ANY:\nnode:\n%sknot:\n%s", name, a, b)
		}
		m := ask(t, "tcp", node, name, dns.TypeANY, true)
		got := map[uint16]int{}
		for _, rr := range m.Answer {
			if rr.Header().Name != name {
				t.Errorf("tcp %s ANY: owner %s, want the question's spelling", name, rr.Header().Name)
			}
			got[rr.Header().Rrtype]++
		}
		for _, typ := range types {
			if got[typ] != 1 {
				t.Errorf("tcp %s ANY: %d %s records, want 1\n%v", name, got[typ], dns.TypeToString[typ], m)
			}
		}
		if len(m.Answer) != len(types) || !m.Authoritative {
			t.Errorf("tcp %s ANY: want %d authoritative records, got\n%v", name, len(types), m)
		}
	}
}
