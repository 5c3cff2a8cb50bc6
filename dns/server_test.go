package dns

import (
	"peerdns/messages"

	"encoding/binary"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"

	"peerdns/internal/testutil"
	"peerdns/internal/view"
)

func TestAnswerSources(t *testing.T) {
	for _, single := range []bool{false, true} {
		t.Run(fmt.Sprintf("singleReads=%v", single), func(t *testing.T) { testAnswerSources(t, single) })
	}
}

func testAnswerSources(t *testing.T, singleReads bool) {
	up := startUpstream(t)
	pub, local := testSources(t)
	s := newTestServer(t, testConfig{Config: Config{Upstreams: []string{up.addr}}, singleReads: singleReads}, pub, local)

	tests := []struct {
		name   string
		qname  string
		qtype  uint16
		rcode  int
		aa     bool
		answer []string
	}{
		{"local A rrset", "a.local.", dns.TypeA, 0, false, []string{"A 192.0.2.1", "A 192.0.2.2"}},
		{"local A any case", "A.LoCaL.", dns.TypeA, 0, false, []string{"A 192.0.2.1", "A 192.0.2.2"}},
		{"local AAAA", "v6.local.", dns.TypeAAAA, 0, false, []string{"AAAA 2001:db8::1"}},
		{"local NODATA", "v6.local.", dns.TypeA, 0, false, nil},
		{"local CNAME chased locally", "alias.local.", dns.TypeA, 0, false, []string{"CNAME a.local.", "A 192.0.2.1", "A 192.0.2.2"}},
		{"local CNAME asked as CNAME", "alias.local.", dns.TypeCNAME, 0, false, []string{"CNAME a.local."}},
		{"local CNAME chased upstream", "ext.local.", dns.TypeA, 0, false, []string{"CNAME pub.example.", "A 203.0.113.7"}},
		{"local MX", "mail.local.", dns.TypeMX, 0, false, []string{"MX 10 mx.local."}},
		{"local TXT", "txt.local.", dns.TypeTXT, 0, false, []string{`TXT "hello world"`}},
		{"local SRV", "_sip._tcp.local.", dns.TypeSRV, 0, false, []string{"SRV 1 2 5060 a.local."}},
		{"local SOA", "zone.local.", dns.TypeSOA, 0, false, []string{"SOA ns1.zone.local. admin.zone.local. 7 3600 600 86400 60"}},
		{"local CAA", "caa.local.", dns.TypeCAA, 0, false, []string{`CAA 0 issue "letsencrypt.org"`}},
		{"local NS", "ns.local.", dns.TypeNS, 0, false, []string{"NS ns1.local."}},
		{"local PTR", "1.2.0.192.in-addr.arpa.", dns.TypePTR, 0, false, []string{"PTR a.local."}},
		{"local OTHER unknown type", "other.local.", 65280, 0, false, []string{`TYPE65280 \# 4 deadbeef`}},
		{"local OTHER known type", "hinfo.local.", dns.TypeHINFO, 0, false, []string{`HINFO "cpu" "os"`}},
		{"internal", "admin.p2p.", dns.TypeA, 0, true, []string{"A 127.0.0.1"}},
		{"internal AAAA NODATA", "admin.p2p.", dns.TypeAAAA, 0, true, nil},
		{"p2p resolved", "site.p2p.", dns.TypeA, 0, true, []string{"A 10.77.0.5"}},
		{"p2p subdomain", "www.deep.Site.P2P.", dns.TypeA, 0, true, []string{"A 10.77.0.5"}},
		{"p2p AAAA NODATA", "site.p2p.", dns.TypeAAAA, 0, true, nil},
		{"p2p MX NODATA", "site.p2p.", dns.TypeMX, 0, true, nil},
		{"local record under p2p domain", "txt.site.p2p.", dns.TypeTXT, 0, true, []string{`TXT "local under p2p"`}},
		{"local name falls back to p2p for A", "txt.site.p2p.", dns.TypeA, 0, true, []string{"A 10.77.0.5"}},
		{"conflict with p2p preference", "clash.p2p.", dns.TypeA, 0, true, []string{"A 10.77.0.6"}},
		{"public preference goes upstream", "pubpref.p2p.", dns.TypeA, 0, false, []string{"A 198.51.100.10"}},
		{"unresolved p2p without public data", "tie.p2p.", dns.TypeA, dns.RcodeServerFailure, false, nil},
		{"unresolved p2p with public data", "tiepublic.p2p.", dns.TypeA, 0, false, []string{"A 198.51.100.11"}},
		{"upstream", "pub.example.", dns.TypeA, 0, false, []string{"A 203.0.113.7"}},
		{"upstream NXDOMAIN", "nothing.example.", dns.TypeA, dns.RcodeNameError, false, nil},
	}
	for _, proto := range []string{"udp", "tcp"} {
		for _, edns := range []bool{false, true} {
			for _, tt := range tests {
				t.Run(fmt.Sprintf("%s/edns=%v/%s", proto, edns, tt.name), func(t *testing.T) {
					m := ask(t, proto, s.Addr(), tt.qname, tt.qtype, edns)
					if m.Rcode != tt.rcode {
						t.Fatalf("rcode = %s, want %s", dns.RcodeToString[m.Rcode], dns.RcodeToString[tt.rcode])
					}
					if m.Authoritative != tt.aa {
						t.Errorf("AA = %v, want %v", m.Authoritative, tt.aa)
					}
					if !m.RecursionAvailable {
						t.Error("RA not set")
					}
					if got := rdata(m); !reflect.DeepEqual(got, tt.answer) {
						t.Fatalf("answer = %q, want %q", got, tt.answer)
					}
					if len(m.Answer) > 0 && m.Answer[0].Header().Name != tt.qname {
						t.Errorf("owner = %q, want the question's spelling %q", m.Answer[0].Header().Name, tt.qname)
					}
					if got := m.IsEdns0() != nil; got != edns {
						t.Errorf("OPT in reply = %v, want %v", got, edns)
					}
					if m.Question[0].Name != tt.qname {
						t.Errorf("question = %q, want %q", m.Question[0].Name, tt.qname)
					}
				})
			}
		}
	}
	st := s.Stats()
	if st.FastAnswers == 0 || st.SlowPath == 0 || st.Upstream == 0 {
		t.Errorf("stats = %+v, want fast, slow and upstream counts", st)
	}
}

// A wildcard does not answer a name that exists as an empty non-terminal
// (the parent of a local name or of another wildcard), nor a name below
// one (its closest encloser, RFC 4592 §2.2.2, §3.3.1), on the fast path
// and the slow path; Knot answers those NODATA or NXDOMAIN, never the
// wildcard's records.
func TestWildcardEmptyNonTerminal(t *testing.T) {
	up := startUpstream(t)
	pub := &view.Published{}
	pub.Store(&view.Snapshot{Version: 1})
	local := &view.LocalPublished{}
	var recs []messages.LocalRecord
	for _, js := range []string{
		`{"name":"*.dev.lan","type":"A","ttl":60,"data":"10.0.0.1"}`,
		`{"name":"a.b.dev.lan","type":"A","ttl":60,"data":"10.0.0.2"}`,
		`{"name":"*.deep.dev.lan","type":"A","ttl":60,"data":"10.0.0.3"}`,
	} {
		recs = append(recs, mustRecord(t, js))
	}
	local.Store(&messages.LocalSnapshot{Version: 1, Records: recs})
	s := newTestServer(t, testConfig{Config: Config{Upstreams: []string{up.addr}}}, pub, local)
	for _, tt := range []struct {
		qname  string
		answer []string
	}{
		{"c.dev.lan.", []string{"A 10.0.0.1"}},
		{"a.b.dev.lan.", []string{"A 10.0.0.2"}},
		{"x.deep.dev.lan.", []string{"A 10.0.0.3"}},
		{"b.dev.lan.", nil},     // exists: the parent of a.b.dev.lan
		{"x.b.dev.lan.", nil},   // closest encloser b.dev.lan has no wildcard
		{"deep.dev.lan.", nil},  // exists: the parent of *.deep.dev.lan
		{"B.Dev.Lan.", nil},     // any spelling
		{"y.x.b.dev.lan.", nil}, // deeper below the empty non-terminal
	} {
		for _, proto := range []string{"udp", "tcp"} {
			m := ask(t, proto, s.Addr(), tt.qname, dns.TypeA, true)
			if got := rdata(m); !reflect.DeepEqual(got, tt.answer) {
				t.Errorf("%s %s A: answer %q, want %q", proto, tt.qname, got, tt.answer)
			}
		}
	}
}

// ANY at a local CNAME answers the CNAME alone, over UDP and TCP: ANY
// matches the CNAME RRset itself, so the chain is not followed (RFC 1034
// §3.6.2, §4.3.2 step 3a), nor forwarded upstream, as Knot and BIND
// answer.
func TestAnyAtCNAME(t *testing.T) {
	up := startUpstream(t)
	pub, local := testSources(t)
	s := newTestServer(t, testConfig{Config: Config{Upstreams: []string{up.addr}}}, pub, local)
	for _, tt := range []struct{ name, target string }{
		{"alias.local.", "a.local."},
		{"ext.local.", "pub.example."},
	} {
		for _, proto := range []string{"udp", "tcp"} {
			before := up.hits.Load()
			m := ask(t, proto, s.Addr(), tt.name, dns.TypeANY, true)
			want := []string{"CNAME " + tt.target}
			if got := rdata(m); m.Rcode != dns.RcodeSuccess || !reflect.DeepEqual(got, want) {
				t.Errorf("%s %s ANY: %s %q, want NOERROR %q", proto, tt.name, dns.RcodeToString[m.Rcode], got, want)
			}
			if n := up.hits.Load() - before; n != 0 {
				t.Errorf("%s %s ANY: %d upstream queries, want none", proto, tt.name, n)
			}
		}
	}
}

func TestChaosClass(t *testing.T) {
	pub, local := testSources(t)
	s := newTestServer(t, testConfig{Config: Config{Upstreams: []string{deadUpstream(t)}}}, pub, local)
	for _, tt := range []struct {
		name  string
		class uint16
		rcode int
		n     int
	}{
		{"version.peerdns.", dns.ClassCHAOS, 0, 1},
		{"version.bind.", dns.ClassCHAOS, dns.RcodeRefused, 0},
		{"a.local.", dns.ClassHESIOD, dns.RcodeRefused, 0},
		{"a.local.", dns.ClassNONE, dns.RcodeRefused, 0},
		{"a.local.", dns.ClassANY, 0, 2},
	} {
		q := new(dns.Msg)
		q.SetQuestion(tt.name, dns.TypeTXT)
		if tt.class == dns.ClassANY {
			q.Question[0].Qtype = dns.TypeA
		}
		q.Question[0].Qclass = tt.class
		m, _, err := (&dns.Client{}).Exchange(q, s.Addr())
		if err != nil {
			t.Fatal(err)
		}
		if m.Rcode != tt.rcode || len(m.Answer) != tt.n {
			t.Errorf("%s class %d: rcode %s, %d answers; want %s, %d", tt.name, tt.class, dns.RcodeToString[m.Rcode], len(m.Answer), dns.RcodeToString[tt.rcode], tt.n)
		}
	}
}

func TestLiveUpdates(t *testing.T) {
	pub, local := testSources(t)
	s := newTestServer(t, testConfig{Config: Config{Upstreams: []string{deadUpstream(t)}}}, pub, local)
	if got := rdata(ask(t, "udp", s.Addr(), "new.local.", dns.TypeA, false)); got != nil {
		t.Fatalf("before add: %q", got)
	}
	snap := local.Load()
	recs := append(append([]messages.LocalRecord(nil), snap.Records...), mustRecord(t, `{"name":"new.local","type":"A","data":"192.0.2.99"}`))
	local.Store(&messages.LocalSnapshot{Version: 2, Records: recs, Prefs: snap.Prefs})
	// Visible as soon as Store returns: the fast path sees that the table
	// is older than the published snapshot and the slow path compiles it
	// if the subscription has not yet.
	if got := rdata(ask(t, "udp", s.Addr(), "new.local.", dns.TypeA, false)); !reflect.DeepEqual(got, []string{"A 192.0.2.99"}) {
		t.Fatalf("after add: %q", got)
	}
	pub.Store(&view.Snapshot{Version: 2, Domains: map[string]*view.Domain{
		"fresh.p2p": {Name: "fresh.p2p", Status: "resolved", IP: netip.MustParseAddr("10.77.0.99")},
	}})
	if got := rdata(ask(t, "udp", s.Addr(), "fresh.p2p.", dns.TypeA, false)); !reflect.DeepEqual(got, []string{"A 10.77.0.99"}) {
		t.Fatalf("after view change: %q", got)
	}
	// Unclaimed .p2p names are ours to deny (RFC 2308, zone/negative.go).
	// (site.p2p, also gone, still has a local record below it: an empty
	// non-terminal, NODATA.)
	if m := ask(t, "udp", s.Addr(), "site.p2p.", dns.TypeA, false); m.Rcode != dns.RcodeSuccess || len(m.Answer) != 0 || len(m.Ns) != 1 || m.Ns[0].Header().Name != "p2p." {
		t.Fatalf("empty non-terminal: rcode %s, authority %v; want NODATA with the SOA of p2p.", dns.RcodeToString[m.Rcode], m.Ns)
	}
	if m := ask(t, "udp", s.Addr(), "clash.p2p.", dns.TypeA, false); m.Rcode != dns.RcodeNameError || len(m.Ns) != 1 || m.Ns[0].Header().Name != "p2p." {
		t.Fatalf("removed domain: rcode %s, authority %v; want NXDOMAIN with the SOA of p2p.", dns.RcodeToString[m.Rcode], m.Ns)
	}
}

func TestTruncation(t *testing.T) {
	pub := &view.Published{}
	local := &view.LocalPublished{}
	var recs []messages.LocalRecord
	for i := 0; i < 30; i++ {
		recs = append(recs, mustRecord(t, fmt.Sprintf(`{"name":"many.local","type":"TXT","data":"%s-%02d"}`, strings.Repeat("t", 60), i)))
	}
	local.Store(&messages.LocalSnapshot{Records: recs})
	up := startUpstream(t)
	s := newTestServer(t, testConfig{Config: Config{Upstreams: []string{up.addr}}}, pub, local)
	for _, tt := range []struct {
		name, proto string
		edns        bool
		tc          bool
	}{
		{"many.local.", "udp", false, true},
		{"many.local.", "udp", true, true}, // 30*~80 bytes > 1232
		{"many.local.", "tcp", false, false},
		{"big.example.", "udp", true, true}, // upstream answer fetched over TCP, truncated for us
		{"big.example.", "tcp", false, false},
	} {
		m := ask(t, tt.proto, s.Addr(), tt.name, dns.TypeTXT, tt.edns)
		if m.Truncated != tt.tc {
			t.Errorf("%s %s edns=%v: TC = %v, want %v", tt.proto, tt.name, tt.edns, m.Truncated, tt.tc)
		}
		if !tt.tc && len(m.Answer) < 30 {
			t.Errorf("%s %s: %d answers, want all", tt.proto, tt.name, len(m.Answer))
		}
		m.Compress = true
		if m.Len() > 512 && !tt.edns && tt.proto == "udp" {
			t.Errorf("%s %s: %d bytes over UDP without EDNS", tt.proto, tt.name, m.Len())
		}
	}
}

// A local answer that does not fit the client's UDP size is truncated to
// the whole RRsets that fit, none when the first does not (RFC 2181 §9:
// a resolver must not take part of an RRset for all of it), with TC, as
// Knot answers: a CNAME whose target's RRset does not fit goes alone.
func TestTruncationWholeRRsets(t *testing.T) {
	pub := &view.Published{}
	local := &view.LocalPublished{}
	recs := []messages.LocalRecord{mustRecord(t, `{"name":"to-many.local","type":"CNAME","data":"many.local"}`)}
	for i := 0; i < 30; i++ {
		recs = append(recs, mustRecord(t, fmt.Sprintf(`{"name":"many.local","type":"TXT","data":"%s-%02d"}`, strings.Repeat("t", 60), i)))
	}
	local.Store(&messages.LocalSnapshot{Records: recs})
	up := startUpstream(t)
	s := newTestServer(t, testConfig{Config: Config{Upstreams: []string{up.addr}}}, pub, local)
	for _, tt := range []struct {
		name   string
		answer []string
	}{
		{"many.local.", nil},
		{"to-many.local.", []string{"CNAME many.local."}},
	} {
		for _, edns := range []bool{false, true} {
			m := ask(t, "udp", s.Addr(), tt.name, dns.TypeTXT, edns)
			if !m.Truncated {
				t.Errorf("%s edns=%v: TC not set", tt.name, edns)
			}
			if got := rdata(m); !reflect.DeepEqual(got, tt.answer) {
				t.Errorf("%s edns=%v: answer %d records %.60q, want %q", tt.name, edns, len(got), got, tt.answer)
			}
		}
	}
}

func TestUpstreamCaching(t *testing.T) {
	up := startUpstream(t)
	s := newTestServer(t, testConfig{Config: Config{Upstreams: []string{up.addr}}}, nil, nil)
	m1 := ask(t, "udp", s.Addr(), "pub.example.", dns.TypeA, false)
	m2 := ask(t, "udp", s.Addr(), "pub.example.", dns.TypeA, false)
	if up.hits.Load() != 1 {
		t.Fatalf("upstream hits = %d, want 1 (second answer from cache)", up.hits.Load())
	}
	if m2.Answer[0].Header().Ttl > m1.Answer[0].Header().Ttl {
		t.Errorf("cached TTL %d > first %d", m2.Answer[0].Header().Ttl, m1.Answer[0].Header().Ttl)
	}
	// Negative caching: NXDOMAIN cached for min(SOA TTL, MINIMUM).
	for i := 0; i < 3; i++ {
		if m := ask(t, "udp", s.Addr(), "gone.example.", dns.TypeA, false); m.Rcode != dns.RcodeNameError || len(m.Ns) != 1 {
			t.Fatalf("NXDOMAIN: %v", m)
		}
	}
	if up.hits.Load() != 2 {
		t.Fatalf("upstream hits = %d, want 2 (NXDOMAIN cached)", up.hits.Load())
	}
	// TTL 1 expires: polled, no sleep.
	ask(t, "udp", s.Addr(), "short.example.", dns.TypeA, false)
	before := up.hits.Load()
	testutil.Eventually(t, 5*time.Second, func() error {
		ask(t, "udp", s.Addr(), "short.example.", dns.TypeA, false)
		if up.hits.Load() == before {
			return fmt.Errorf("still cached")
		}
		return nil
	})
	if n, err := s.ClearCache("pub.example"); err != nil || n != 1 {
		t.Fatalf("ClearCache = %d, %v; want 1", n, err)
	}
	h := up.hits.Load()
	ask(t, "udp", s.Addr(), "pub.example.", dns.TypeA, false)
	if up.hits.Load() != h+1 {
		t.Fatal("cleared name not asked upstream again")
	}
	if _, err := s.ClearCache("bad..name"); err == nil {
		t.Fatal("ClearCache accepted a bad name")
	}
}

func TestDeadUpstreamServfailFast(t *testing.T) {
	s := newTestServer(t, testConfig{Config: Config{Upstreams: []string{deadUpstream(t)}, UpstreamTimeout: 200 * time.Millisecond}}, nil, nil)
	start := time.Now()
	m := ask(t, "udp", s.Addr(), "pub.example.", dns.TypeA, false)
	if m.Rcode != dns.RcodeServerFailure {
		t.Fatalf("rcode %s, want SERVFAIL", dns.RcodeToString[m.Rcode])
	}
	if d := time.Since(start); d > 1500*time.Millisecond {
		t.Fatalf("SERVFAIL after %v, want about the 200ms timeout", d)
	}
	start = time.Now()
	m = ask(t, "udp", s.Addr(), "pub.example.", dns.TypeA, false)
	if m.Rcode != dns.RcodeServerFailure {
		t.Fatalf("second: rcode %s", dns.RcodeToString[m.Rcode])
	}
	if d := time.Since(start); d > 100*time.Millisecond {
		t.Fatalf("cached failure took %v", d)
	}
}

func TestNoUpstreamServfail(t *testing.T) {
	s := newTestServer(t, testConfig{Config: Config{ResolvConf: "/nonexistent/resolv.conf"}}, nil, nil)
	if m := ask(t, "udp", s.Addr(), "pub.example.", dns.TypeA, false); m.Rcode != dns.RcodeServerFailure {
		t.Fatalf("rcode %s, want SERVFAIL", dns.RcodeToString[m.Rcode])
	}
}

func header(id, flags, qd, an, ns, ar uint16) []byte {
	b := make([]byte, 12)
	for i, v := range []uint16{id, flags, qd, an, ns, ar} {
		binary.BigEndian.PutUint16(b[2*i:], v)
	}
	return b
}

func question(name string, qtype, qclass uint16) []byte {
	b := make([]byte, 300)
	n, err := dns.PackDomainName(name, b, 0, nil, false)
	if err != nil {
		panic(err)
	}
	b = b[:n]
	return binary.BigEndian.AppendUint16(binary.BigEndian.AppendUint16(b, qtype), qclass)
}

func TestBadInput(t *testing.T) {
	pub, local := testSources(t)
	s := newTestServer(t, testConfig{Config: Config{Upstreams: []string{deadUpstream(t)}}}, pub, local)
	q := question("a.local.", dns.TypeA, dns.ClassINET)
	hugeName := []byte{}
	for i := 0; i < 5; i++ {
		hugeName = append(hugeName, 63)
		hugeName = append(hugeName, []byte(strings.Repeat("x", 63))...)
	}
	hugeName = append(hugeName, 0, 0, 1, 0, 1)
	loop := append(header(9, 0, 1, 0, 0, 0), 0xC0, 12, 0, 1, 0, 1)
	badOpt := append(append(header(10, 0, 1, 0, 0, 1), q...), 0, 0, 41, 4, 0, 0, 1, 0, 0, 0, 0) // EDNS version 1
	twoOpt := append(append(header(11, 0, 1, 0, 0, 2), q...), 0, 0, 41, 4, 0, 0, 0, 0, 0, 0, 0, 0, 0, 41, 4, 0, 0, 0, 0, 0, 0, 0)
	ixfr, err := new(dns.Msg).SetIxfr("site.p2p.", 3, "ns.p2p.", "hostmaster.site.p2p.").Pack() // the client's SOA in authority (RFC 1995 §3)
	if err != nil {
		t.Fatal(err)
	}
	soaInA := append([]byte(nil), ixfr...)
	binary.BigEndian.PutUint16(soaInA[len(header(0, 0, 0, 0, 0, 0))+len(question("site.p2p.", 0, 0))-4:], dns.TypeA)
	tests := []struct {
		name  string
		pkt   []byte
		rcode int // -1: no reply
	}{
		{"runt", []byte{1, 2, 3}, -1},
		{"header only", header(1, 0, 0, 0, 0, 0), dns.RcodeFormatError},
		{"response packet ignored", append(header(2, 0x8000, 1, 0, 0, 0), q...), -1},
		{"two questions", append(append(header(3, 0, 2, 0, 0, 0), q...), q...), dns.RcodeFormatError},
		{"qdcount 1 but no question", header(4, 0, 1, 0, 0, 0), dns.RcodeFormatError},
		{"truncated question", append(header(5, 0, 1, 0, 0, 0), q[:5]...), dns.RcodeFormatError},
		{"question cut before its class", append(header(18, 0, 1, 0, 0, 0), q[:len(q)-2]...), dns.RcodeFormatError},
		{"question cut before its type", append(header(19, 0, 1, 0, 0, 0), q[:len(q)-4]...), dns.RcodeFormatError},
		{"class 0", append(header(20, 0, 1, 0, 0, 0), question("a.local.", dns.TypeA, 0)...), dns.RcodeFormatError},
		{"opcode IQUERY", append(header(6, 1<<11, 1, 0, 0, 0), q...), dns.RcodeNotImplemented},
		{"opcode UPDATE", append(header(7, 5<<11, 1, 0, 0, 0), q...), dns.RcodeNotImplemented},
		{"name over 255 bytes", append(header(8, 0, 1, 0, 0, 0), hugeName...), dns.RcodeFormatError},
		{"compression loop", loop, dns.RcodeFormatError},
		{"answer section in query", append(append(header(12, 0, 1, 1, 0, 0), q...), q...), dns.RcodeFormatError},
		{"EDNS version 1", badOpt, dns.RcodeBadVers},
		{"two OPT records", twoOpt, dns.RcodeFormatError},
		{"AXFR", append(header(13, 0, 1, 0, 0, 0), question("a.local.", dns.TypeAXFR, dns.ClassINET)...), dns.RcodeRefused},
		{"IXFR with its SOA", ixfr, dns.RcodeRefused},
		{"A with an SOA in authority", soaInA, dns.RcodeFormatError},
		{"qtype OPT", append(header(14, 0, 1, 0, 0, 0), question("a.local.", dns.TypeOPT, dns.ClassINET)...), dns.RcodeFormatError},
		{"unknown class", append(header(15, 0, 1, 0, 0, 0), question("a.local.", dns.TypeA, 77)...), dns.RcodeRefused},
		{"trailing garbage", append(append(header(16, 0, 1, 0, 0, 0), q...), 1, 2, 3), dns.RcodeFormatError},
		{"ARCOUNT 1 without a record", append(header(21, 0, 1, 0, 0, 1), q...), dns.RcodeFormatError},
		{"question name a forward pointer", append(header(22, 0, 1, 0, 0, 1), 0xC0, 29, 0, 1, 0, 1, // to the RDATA of:
			0, 0xFF, 0, 0, 1, 0, 0, 0, 0, 0, 9, 1, 'a', 5, 'l', 'o', 'c', 'a', 'l', 0), dns.RcodeFormatError},
		{"question name a pointer into the header", append(header(23, 0, 1, 0, 0, 0), 0xC0, 4, 0, 1, 0, 1), dns.RcodeFormatError},
		{"oversized datagram", append(append(header(17, 0, 1, 0, 0, 0), q...), make([]byte, 6000)...), dns.RcodeFormatError},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.rcode < 0 {
				noReply(t, s, tt.pkt)
				return
			}
			resp := rawQuery(t, s.Addr(), tt.pkt, 2*time.Second)
			if resp == nil {
				t.Fatal("no reply")
			}
			var m dns.Msg
			if err := m.Unpack(resp); err != nil {
				t.Fatalf("reply does not unpack: %v", err)
			}
			if m.Id != binary.BigEndian.Uint16(tt.pkt) || !m.Response {
				t.Errorf("id %d response %v", m.Id, m.Response)
			}
			if m.Rcode != tt.rcode {
				t.Fatalf("rcode %s, want %s", dns.RcodeToString[m.Rcode], dns.RcodeToString[tt.rcode])
			}
		})
	}
	// The server still answers after all that.
	if got := rdata(ask(t, "udp", s.Addr(), "a.local.", dns.TypeA, false)); len(got) != 2 {
		t.Fatalf("after bad input: %q", got)
	}
	if h := s.Health(); !h.Healthy || !h.Initialized || !h.Enabled {
		t.Fatalf("health after bad input: %+v", h)
	}
}

// noReply sends pkt and checks that the server drops it: it waits until
// the server counted the drop (the decision is made; a reply would have
// been written before the count), then sends a good query on the same
// socket and requires that query's reply to be the first datagram back.
func noReply(t *testing.T, s *Server, pkt []byte) {
	t.Helper()
	c, err := net.Dial("udp", s.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	before := s.Stats().Dropped
	if _, err := c.Write(pkt); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 5*time.Second, func() error {
		if d := s.Stats().Dropped; d == before {
			return fmt.Errorf("dropped = %d: packet not handled yet", d)
		}
		return nil
	})
	probe := new(dns.Msg).SetQuestion("a.local.", dns.TypeA)
	probe.Id = 0xBEEF
	b, _ := probe.Pack()
	if _, err := c.Write(b); err != nil {
		t.Fatal(err)
	}
	c.SetReadDeadline(time.Now().Add(5 * time.Second)) // a hang guard, not a wait
	buf := make([]byte, 65535)
	n, err := c.Read(buf)
	if err != nil {
		t.Fatalf("no reply to the probe: %v", err)
	}
	if id := binary.BigEndian.Uint16(buf); n < 12 || id != 0xBEEF {
		t.Fatalf("first datagram back is %x, not the probe's reply: the dropped packet was answered", buf[:n])
	}
}

func TestHealthAndShutdown(t *testing.T) {
	s, err := New(Config{Addr: "127.0.0.1:0", UDPSockets: 3, Upstreams: []string{"127.0.0.1:1"}}, nil, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if h := s.Health(); h.Initialized || h.Healthy || !h.Enabled {
		t.Fatalf("before Start: %+v", h)
	}
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	if h := s.Health(); !h.Initialized || !h.Healthy {
		t.Fatalf("after Start: %+v", h)
	}
	addr := s.Addr()
	ask(t, "tcp", addr, "x.", dns.TypeA, false)
	ctx, cancel := contextWithTimeout(5 * time.Second)
	defer cancel()
	if err := s.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	if h := s.Health(); h.Healthy {
		t.Fatalf("after Shutdown: %+v", h)
	}
	if _, _, err := (&dns.Client{Net: "tcp", Timeout: 300 * time.Millisecond}).Exchange(new(dns.Msg).SetQuestion("x.", dns.TypeA), addr); err == nil {
		t.Fatal("TCP still answers after Shutdown")
	}
	if err := s.Start(); err == nil {
		t.Fatal("Start after Shutdown succeeded")
	}
}

func TestSelfUpstreamSkipped(t *testing.T) {
	s, err := New(Config{Addr: "127.0.0.1:7753", Upstreams: []string{"127.0.0.1:7753", "127.0.0.2:53"}}, nil, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := s.Upstreams(); !reflect.DeepEqual(got, []string{"127.0.0.2:53"}) {
		t.Fatalf("Upstreams = %q", got)
	}
	if _, err := New(Config{Upstreams: []string{"dns.google"}}, nil, nil, nil); err == nil {
		t.Fatal("accepted a host name as upstream")
	}
	s, err = New(Config{Addr: "127.0.0.1:7753", Upstreams: []string{"192.0.2.53", "2001:db8::53", "[2001:db8::54]:5353"}}, nil, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := s.Upstreams(), []string{"192.0.2.53:53", "[2001:db8::53]:53", "[2001:db8::54]:5353"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("Upstreams = %q, want %q", got, want)
	}
}

func TestLookup(t *testing.T) {
	up := startUpstream(t)
	pub, local := testSources(t)
	s := newTestServer(t, testConfig{Config: Config{Upstreams: []string{up.addr}}}, pub, local)
	for _, tt := range []struct {
		domain, typ string
		ok          bool
		results     []string
	}{
		{"a.local", "", true, []string{"192.0.2.1", "192.0.2.2"}},
		{"mail.local", "mx", true, []string{"10 mx.local."}},
		{"site.p2p", "A", true, []string{"10.77.0.5"}},
		{"site.p2p", "AAAA", false, []string{}},
		{"nothing.example", "A", false, []string{}},
		{"bad..name", "A", false, []string{}},
	} {
		res, err := s.Lookup(t.Context(), tt.domain, tt.typ)
		if err != nil {
			t.Fatalf("Lookup(%q, %q): %v", tt.domain, tt.typ, err)
		}
		if res.Success != tt.ok || !reflect.DeepEqual(res.Results, tt.results) {
			t.Errorf("Lookup(%q, %q) = %+v, want success %v results %q", tt.domain, tt.typ, res, tt.ok, tt.results)
		}
	}
	if _, err := s.Lookup(t.Context(), "a.local", "HINFO"); err == nil {
		t.Fatal("Lookup accepted HINFO")
	}
	ip, err := s.PublicLookup(t.Context(), "clash.p2p")
	if err != nil || ip != "198.51.100.9" {
		t.Fatalf("PublicLookup(clash.p2p) = %q, %v", ip, err)
	}
	ip, err = s.PublicLookup(t.Context(), "site.p2p")
	if err != nil || ip != "" {
		t.Fatalf("PublicLookup(site.p2p) = %q, %v; want no public IP", ip, err)
	}
}

func TestQueryLogAtDebug(t *testing.T) {
	pub, local := testSources(t)
	var buf testutil.LogBuffer
	s, err := New(Config{Addr: "127.0.0.1:0", UDPSockets: 1, Upstreams: []string{deadUpstream(t)}, UpstreamTimeout: 100 * time.Millisecond},
		pub, local, slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug})))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		ctx, cancel := contextWithTimeout(5 * time.Second)
		defer cancel()
		s.Shutdown(ctx)
	}()
	ask(t, "udp", s.Addr(), "a.local.", dns.TypeA, false)
	ask(t, "udp", s.Addr(), "pub.example.", dns.TypeA, false)
	ask(t, "tcp", s.Addr(), "a.local.", dns.TypeA, false)
	testutil.Eventually(t, 5*time.Second, func() error {
		out := buf.String()
		for _, want := range []string{"name=a.local. type=A rcode=NOERROR answers=2", "path=fast", "path=tcp",
			"name=pub.example. type=A rcode=SERVFAIL", "path=slow", `msg="dns upstream"`} {
			if !strings.Contains(out, want) {
				return fmt.Errorf("log lacks %q:\n%s", want, out)
			}
		}
		return nil
	})
}

func TestIPv6Loopback(t *testing.T) {
	if c, err := net.ListenPacket("udp", "[::1]:0"); err != nil {
		t.Skipf("no IPv6 loopback here: %v", err)
	} else {
		c.Close()
	}
	pub, local := testSources(t)
	s := newTestServer(t, testConfig{Config: Config{Addr: "[::1]:0", Upstreams: []string{deadUpstream(t)}}}, pub, local)
	for _, proto := range []string{"udp", "tcp"} {
		if got := rdata(ask(t, proto, s.Addr(), "site.p2p.", dns.TypeA, false)); !reflect.DeepEqual(got, []string{"A 10.77.0.5"}) {
			t.Fatalf("%s over IPv6: %q", proto, got)
		}
	}
}

func TestPortInUse(t *testing.T) {
	s1 := newTestServer(t, testConfig{Config: Config{ResolvConf: "/nonexistent"}}, nil, nil)
	// A second server on the same address must fail: SO_REUSEPORT would
	// let its UDP sockets join the port (same user), but the TCP
	// listener has no SO_REUSEPORT and refuses, so Start fails and
	// closes what it opened.
	s2, err := New(Config{Addr: s1.Addr(), ResolvConf: "/nonexistent"}, nil, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := s2.Start(); err == nil {
		ctx, cancel := contextWithTimeout(time.Second)
		defer cancel()
		s2.Shutdown(ctx)
		t.Fatal("second server started on a port in use")
	}
	if h := s2.Health(); h.Healthy || h.Initialized {
		t.Fatalf("failed server health %+v", h)
	}
}

// The subscriptions compile a new table without waiting for a query, and
// Shutdown ends them with every other goroutine of the server.
func TestTableFollowsPublishers(t *testing.T) {
	testutil.NoLeaks(t)
	pub, local := testSources(t)
	s := newTestServer(t, testConfig{Config: Config{Upstreams: []string{deadUpstream(t)}}}, pub, local)
	pub.Store(&view.Snapshot{Version: 7, Domains: map[string]*view.Domain{
		"new.p2p": {Name: "new.p2p", Status: "resolved", IP: netip.MustParseAddr("10.77.0.70")},
	}})
	local.Store(&messages.LocalSnapshot{Version: 9})
	testutil.Eventually(t, 5*time.Second, func() error {
		if tab := s.table.Load(); tab.ViewVersion != 7 || tab.LocalVersion != 9 {
			return fmt.Errorf("table built from view %d, local %d; want 7, 9", tab.ViewVersion, tab.LocalVersion)
		}
		return nil
	})
	if got := rdata(ask(t, "udp", s.Addr(), "new.p2p.", dns.TypeA, false)); !reflect.DeepEqual(got, []string{"A 10.77.0.70"}) {
		t.Fatalf("new.p2p = %q", got)
	}
}

// OnP2PAnswer hears about answered p2p domains, from UDP and TCP, and
// not about the others.
func TestOnP2PAnswer(t *testing.T) {
	pub, local := testSources(t)
	got := make(chan string, 16)
	s := newTestServer(t, testConfig{Config: Config{Upstreams: []string{deadUpstream(t)}, OnP2PAnswer: func(d string) { got <- d }}}, pub, local)
	ask(t, "udp", s.Addr(), "a.local.", dns.TypeA, false)
	ask(t, "udp", s.Addr(), "site.p2p.", dns.TypeA, false)
	select {
	case d := <-got:
		if d != "site.p2p" {
			t.Fatalf("reported %q, want site.p2p", d)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("site.p2p answered over UDP was not reported")
	}
	ask(t, "tcp", s.Addr(), "clash.p2p.", dns.TypeA, false)
	select {
	case d := <-got:
		if d != "clash.p2p" {
			t.Fatalf("reported %q, want clash.p2p", d)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("clash.p2p answered over TCP was not reported")
	}
}

// Responses and runts that reach the port (the backscatter of queries
// someone sent to others in the node's name) are dropped by the socket's
// reader, as Knot drops them: each cost a goroutine of the slow path and
// a copy of the datagram, only to be dropped there.
func TestResponsesDroppedByReader(t *testing.T) {
	for _, single := range []bool{false, true} {
		t.Run(fmt.Sprintf("singleReads=%v", single), func(t *testing.T) {
			pub, local := testSources(t)
			s := newTestServer(t, testConfig{Config: Config{Upstreams: []string{deadUpstream(t)}}, singleReads: single}, pub, local)
			resp := new(dns.Msg).SetQuestion("a.local.", dns.TypeA)
			resp.Response = true
			resp.Answer = []dns.RR{&dns.A{Hdr: dns.RR_Header{Name: "a.local.", Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: 60}, A: net.IPv4(192, 0, 2, 9)}}
			b, err := resp.Pack()
			if err != nil {
				t.Fatal(err)
			}
			before := s.Stats()
			c, err := net.Dial("udp", s.Addr())
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			const n = 50
			for i := 0; i < n; i++ {
				pkt := b
				if i%5 == 0 {
					pkt = b[:7] // a runt
				}
				if _, err := c.Write(pkt); err != nil {
					t.Fatal(err)
				}
			}
			testutil.Eventually(t, 5*time.Second, func() error {
				if d := s.Stats().Dropped - before.Dropped; d < n {
					return fmt.Errorf("%d of %d dropped", d, n)
				}
				return nil
			})
			if after := s.Stats(); after.SlowPath != before.SlowPath {
				t.Fatalf("slow path took %d of the responses", after.SlowPath-before.SlowPath)
			}
			noReply(t, s, b)
		})
	}
}
