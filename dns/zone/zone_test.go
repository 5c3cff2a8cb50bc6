package zone

import (
	"peerdns/messages"

	"fmt"
	"net/netip"
	"testing"

	"github.com/miekg/dns"

	"peerdns/internal/view"
)

func testTable(tb testing.TB, n int) *Table {
	tb.Helper()
	var recs []messages.LocalRecord
	for i := 0; i < n; i++ {
		r, err := messages.ParseLocalRecord([]byte(fmt.Sprintf(`{"name":"host%d.bench.test","type":"A","ttl":300,"data":"10.%d.%d.%d"}`, i, i>>16&255, i>>8&255, i&255)))
		if err != nil {
			tb.Fatal(err)
		}
		recs = append(recs, r)
	}
	v := &view.Snapshot{Version: 3, Domains: map[string]*view.Domain{
		"site.p2p": {Name: "site.p2p", Status: "resolved", IP: netip.MustParseAddr("10.77.0.5")},
		"v6.p2p":   {Name: "v6.p2p", Status: "resolved", IP: netip.MustParseAddr("fd00::5")},
		"tie.p2p":  {Name: "tie.p2p", Status: "tie"},
		"a.b.p2p":  {Name: "a.b.p2p", Status: "resolved", IP: netip.MustParseAddr("10.77.0.9")},
	}, Internal: map[string]netip.Addr{"admin.p2p": netip.MustParseAddr("127.0.0.1")}}
	return Build(v, &messages.LocalSnapshot{Version: 4, Records: recs}, Options{})
}

func query(name string, qtype uint16, edns bool) []byte {
	m := new(dns.Msg)
	m.SetQuestion(name, qtype)
	m.Id = 4242
	if edns {
		m.SetEdns0(4096, true)
	}
	b, err := m.Pack()
	if err != nil {
		panic(err)
	}
	return b
}

func TestFast(t *testing.T) {
	tb := testTable(t, 10)
	if tb.ViewVersion != 3 || tb.LocalVersion != 4 {
		t.Fatalf("versions %d %d", tb.ViewVersion, tb.LocalVersion)
	}
	out := make([]byte, 1232)
	for _, tt := range []struct {
		name   string
		qtype  uint16
		edns   bool
		fast   bool
		answer string
	}{
		{"host3.bench.test.", dns.TypeA, false, true, "10.0.0.3"},
		{"HOST3.Bench.TEST.", dns.TypeA, true, true, "10.0.0.3"},
		{"host3.bench.test.", dns.TypeAAAA, false, true, ""},
		{"site.p2p.", dns.TypeA, false, true, "10.77.0.5"},
		{"a.b.site.p2p.", dns.TypeA, true, true, "10.77.0.5"},
		{"v6.p2p.", dns.TypeAAAA, false, true, "fd00::5"},
		{"v6.p2p.", dns.TypeA, false, true, ""},
		{"admin.p2p.", dns.TypeA, false, true, "127.0.0.1"},
		{"tie.p2p.", dns.TypeA, false, false, ""},
		{"elsewhere.example.", dns.TypeA, false, false, ""},
		{"host3.bench.test.", dns.TypeANY, false, false, ""},
	} {
		req := query(tt.name, tt.qtype, tt.edns)
		n := tb.Fast(req, out, 1232, 1232)
		if (n > 0) != tt.fast {
			t.Fatalf("Fast(%s %s) = %d, want fast=%v", tt.name, dns.TypeToString[tt.qtype], n, tt.fast)
		}
		if n == 0 {
			continue
		}
		var m dns.Msg
		if err := m.Unpack(out[:n]); err != nil {
			t.Fatalf("Fast(%s) reply does not unpack: %v", tt.name, err)
		}
		// Local records outside the zones the node holds are not
		// authoritative (apex.go); everything else here is.
		wantAA := tt.name[len(tt.name)-5:] == ".p2p."
		if m.Id != 4242 || !m.Response || m.Authoritative != wantAA || !m.RecursionDesired || !m.RecursionAvailable || m.Question[0].Name != tt.name {
			t.Errorf("Fast(%s) header/question wrong: %v", tt.name, &m)
		}
		if (m.IsEdns0() != nil) != tt.edns {
			t.Errorf("Fast(%s) OPT = %v, want %v", tt.name, m.IsEdns0() != nil, tt.edns)
		}
		if tt.edns && (!m.IsEdns0().Do() || m.IsEdns0().UDPSize() != 1232) {
			t.Errorf("Fast(%s) OPT %v: want DO copied and size 1232", tt.name, m.IsEdns0())
		}
		got := ""
		if len(m.Answer) > 0 {
			if m.Answer[0].Header().Name != tt.name {
				t.Errorf("owner %q, want %q", m.Answer[0].Header().Name, tt.name)
			}
			switch rr := m.Answer[0].(type) {
			case *dns.A:
				got = rr.A.String()
			case *dns.AAAA:
				got = rr.AAAA.String()
			}
		}
		if got != tt.answer {
			t.Errorf("Fast(%s %s) answer %q, want %q", tt.name, dns.TypeToString[tt.qtype], got, tt.answer)
		}
	}
	// Not for the fast path: odd flags, EDNS options, two questions.
	for name, req := range map[string][]byte{
		"response":  func() []byte { b := query("site.p2p.", dns.TypeA, false); b[2] |= 0x80; return b }(),
		"truncated": query("site.p2p.", dns.TypeA, false)[:20],
		"cookie": func() []byte {
			m := new(dns.Msg).SetQuestion("site.p2p.", dns.TypeA)
			m.SetEdns0(1232, false)
			m.IsEdns0().Option = append(m.IsEdns0().Option, &dns.EDNS0_COOKIE{Code: dns.EDNS0COOKIE, Cookie: "0123456789abcdef"})
			b, _ := m.Pack()
			return b
		}(),
		"class CH": func() []byte {
			m := new(dns.Msg).SetQuestion("site.p2p.", dns.TypeA)
			m.Question[0].Qclass = dns.ClassCHAOS
			b, _ := m.Pack()
			return b
		}(),
	} {
		if n := tb.Fast(req, out, 1232, 1232); n != 0 {
			t.Errorf("Fast(%s) = %d, want 0 (slow path)", name, n)
		}
	}
}

func TestFastAllocs(t *testing.T) {
	tb := testTable(t, 1000)
	req := query("host500.bench.test.", dns.TypeA, true)
	sub := query("www.site.p2p.", dns.TypeA, false)
	out := make([]byte, 1232)
	allocs := testing.AllocsPerRun(1000, func() {
		if tb.Fast(req, out, 1232, 1232) == 0 || tb.Fast(sub, out, 1232, 1232) == 0 {
			t.Fatal("not answered")
		}
	})
	if allocs != 0 {
		t.Fatalf("Fast allocates %v times per query, want 0", allocs)
	}
}

func TestResolveCNAMELoop(t *testing.T) {
	var recs []messages.LocalRecord
	for _, js := range []string{
		`{"name":"x.loop","type":"CNAME","data":"y.loop"}`,
		`{"name":"y.loop","type":"CNAME","data":"x.loop"}`,
	} {
		r, err := messages.ParseLocalRecord([]byte(js))
		if err != nil {
			t.Fatal(err)
		}
		recs = append(recs, r)
	}
	tb := Build(nil, &messages.LocalSnapshot{Records: recs}, Options{})
	res := tb.Resolve("x.loop.", dns.TypeA, dns.ClassINET)
	// The loop ends, each of its records given once (as Knot answers).
	if len(res.Answer) != 2 || res.Upstream {
		t.Fatalf("loop: %d answers, upstream %v", len(res.Answer), res.Upstream)
	}
}

func BenchmarkFast(b *testing.B) {
	tb := testTable(b, 1000)
	reqs := make([][]byte, 1000)
	for i := range reqs {
		reqs[i] = query(fmt.Sprintf("host%d.bench.test.", i), dns.TypeA, false)
	}
	out := make([]byte, 1232)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if tb.Fast(reqs[i%len(reqs)], out, 1232, 1232) == 0 {
			b.Fatal("not answered")
		}
	}
}

func BenchmarkBuild(b *testing.B) {
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		testTable(b, 1000)
	}
}

// BenchmarkBuildP2P compiles a table of 1,000 resolved p2p domains (what
// the DNS server does after the ledger publishes a view in a burst).
func BenchmarkBuildP2P(b *testing.B) {
	v := &view.Snapshot{Version: 9, Domains: map[string]*view.Domain{}}
	for i := 0; i < 1000; i++ {
		name := fmt.Sprintf("bulk%d.p2p", i)
		v.Domains[name] = &view.Domain{Name: name, Status: "resolved", IP: netip.AddrFrom4([4]byte{127, 77, byte(i >> 8), byte(i)})}
	}
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		Build(v, nil, Options{})
	}
}
