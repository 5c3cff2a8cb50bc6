package dns

import (
	"context"
	"net"
	"strings"
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
func TestReviewDSFromParentZone(t *testing.T) {
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
		mine, _, err := c.Exchange(q.Copy(), s.Addr())
		if err != nil {
			t.Fatal(err)
		}
		theirs, _, err := c.Exchange(q.Copy(), knot)
		if err != nil {
			t.Fatal(err)
		}
		if a, b := canon(mine), canon(theirs); a != b {
			t.Errorf("%s DS:\nnode:\n%sknot:\n%s", name, a, b)
		}
	}
}

// The freshness lifetime Exchange gives DoH for a negative answer is at
// most its SOA's MINIMUM (RFC 8484 §5.1, RFC 2308 §5): the upstream's
// NXDOMAIN and NODATA carry a SOA of TTL 600 and MINIMUM 60, which the
// node's own cache keeps for 60 s; an HTTP cache told 600 would serve
// the name as missing for ten times as long.
func TestReviewExchangeNegativeLifetime(t *testing.T) {
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

// An answer whose additional records do not all fit the client's UDP
// size is sent without them and without TC (RFC 2181 §9: TC is not set
// merely because extra information was left out), as Knot and unbound
// do; TC would send every such client to TCP for data it does not need.
// Answer records that do not fit still set TC.
func TestReviewNoTCForAdditionalOnly(t *testing.T) {
	h := dns.HandlerFunc(func(w dns.ResponseWriter, req *dns.Msg) {
		m := new(dns.Msg).SetReply(req)
		m.RecursionAvailable = true
		q := req.Question[0]
		switch q.Name {
		case "mx.example.":
			for i := 0; i < 2; i++ {
				m.Answer = append(m.Answer, &dns.MX{Hdr: dns.RR_Header{Name: q.Name, Rrtype: dns.TypeMX, Class: dns.ClassINET, Ttl: 300},
					Preference: uint16(10 * i), Mx: "mail" + string(rune('a'+i)) + ".example."})
			}
			for i := 0; i < 40; i++ {
				m.Extra = append(m.Extra, &dns.A{Hdr: dns.RR_Header{Name: "maila.example.", Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: 300},
					A: net.IPv4(192, 0, 2, byte(i+1))})
			}
		case "many.example.":
			for i := 0; i < 60; i++ {
				m.Answer = append(m.Answer, &dns.A{Hdr: dns.RR_Header{Name: q.Name, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: 300},
					A: net.IPv4(192, 0, 2, byte(i+1))})
			}
		}
		m.Compress = true
		w.WriteMsg(m)
	})
	pc, ln := listenPair(t)
	for _, srv := range []*dns.Server{{PacketConn: pc, Handler: h}, {Listener: ln, Handler: h}} {
		started := make(chan struct{})
		srv.NotifyStartedFunc = func() { close(started) }
		go srv.ActivateAndServe()
		<-started
		t.Cleanup(func() { srv.Shutdown() })
	}
	pub, local := testSources(t)
	s := newTestServer(t, testConfig{Config: Config{Upstreams: []string{pc.LocalAddr().String()}}}, pub, local)
	for _, edns := range []bool{false, true} {
		m := ask(t, "udp", s.Addr(), "mx.example.", dns.TypeMX, edns)
		if m.Truncated || len(m.Answer) != 2 {
			t.Errorf("mx.example. MX (edns %v): want both MX records without TC, got TC=%v with %d answers, %d additional",
				edns, m.Truncated, len(m.Answer), len(m.Extra))
		}
		if edns && m.IsEdns0() == nil {
			t.Errorf("mx.example. MX: the OPT record was left out")
		}
		m = ask(t, "udp", s.Addr(), "many.example.", dns.TypeA, edns)
		if !edns && (!m.Truncated || len(m.Answer) == 60) {
			t.Errorf("many.example. A (edns %v): want TC with part of the answer, got TC=%v with %d answers", edns, m.Truncated, len(m.Answer))
		}
	}
}

// A CNAME loop in the local records is answered with each record of the
// chain once, as Knot answers it, not with the loop walked until the
// chase limit (the same CNAME records repeated, nine in all): RFC 1034
// §3.6.2 has loops signalled, and RFC 2181 §5 has no RR sent twice.
func TestReviewCNAMELoopOnce(t *testing.T) {
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
