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
// of its zone) and one at txt.site.p2p, and Knot serving the same zones;
// it returns both addresses.
func startApexLocal(t *testing.T) (node, knot string) {
	t.Helper()
	pub, local := publishSources(t, knotSerial-1, map[string]string{"site.p2p": "10.77.0.5", "v6.p2p": "fd00::5", "a.deep.p2p": "10.77.0.6"},
		`{"name":"txt.site.p2p","type":"TXT","ttl":120,"data":"local under site"}`,
		`{"name":"site.p2p","type":"TXT","ttl":120,"data":"local at apex"}`)
	s := newTestServer(t, testConfig{Config: Config{Upstreams: []string{deadUpstream(t)}}}, pub, local)
	host, _, _ := net.SplitHostPort(s.Addr())
	zones := knotZones(host)
	zones["p2p."] = "$TTL 30\np2p. SOA ns.p2p. hostmaster.p2p. 5 3600 600 86400 30\np2p. NS ns.p2p.\nns.p2p. A " + host + "\n" +
		"site.p2p. NS ns.p2p.\nv6.p2p. NS ns.p2p.\na.deep.p2p. NS ns.p2p.\nadmin.p2p. NS ns.p2p.\n"
	zones["site.p2p."] += "site.p2p. 120 TXT \"local at apex\"\n"
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
				mine, _, err := c.Exchange(q.Copy(), node)
				if err != nil {
					t.Fatal(err)
				}
				theirs, _, err := c.Exchange(q.Copy(), knot)
				if err != nil {
					t.Fatal(err)
				}
				if a, b := canon(mine), canon(theirs); a != b {
					t.Errorf("%s %s %s:\nnode:\n%sknot:\n%s", proto, name, dns.TypeToString[qt], a, b)
				}
			}
		}
	}
}
