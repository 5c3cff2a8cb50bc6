package dns

import (
	"fmt"
	"net"
	"net/netip"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/miekg/dns"

	"peerdns/internal/testutil"
)

func TestParsePrefixes(t *testing.T) {
	for _, tt := range []struct {
		in   string
		want []netip.Prefix
		err  bool
	}{
		{"", nil, false},
		{"  ", nil, false},
		{"none", []netip.Prefix{}, false},
		{"NONE", []netip.Prefix{}, false},
		{"10.0.0.0/8", []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}, false},
		{"10.1.2.3/8, 192.0.2.7 ,::1  fd00::/8", []netip.Prefix{
			netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("192.0.2.7/32"),
			netip.MustParsePrefix("::1/128"), netip.MustParsePrefix("fd00::/8"),
		}, false},
		{"0.0.0.0/0,::/0", []netip.Prefix{netip.MustParsePrefix("0.0.0.0/0"), netip.MustParsePrefix("::/0")}, false},
		{"10.0.0.0/33", nil, true},
		{"localhost", nil, true},
		{"fe80::1%eth0", nil, true},
		{"10.0.0.0/8,,bogus", nil, true},
	} {
		got, err := ParsePrefixes(tt.in)
		if (err != nil) != tt.err {
			t.Errorf("ParsePrefixes(%q) error = %v, want error %v", tt.in, err, tt.err)
			continue
		}
		if !tt.err && !reflect.DeepEqual(got, tt.want) {
			t.Errorf("ParsePrefixes(%q) = %v, want %v", tt.in, got, tt.want)
		}
	}
}

func TestACL(t *testing.T) {
	def := newACL(DefaultRecursionAllow())
	for _, tt := range []struct {
		ip string
		in bool
	}{
		{"127.0.0.1", true}, {"127.255.0.9", true}, {"::1", true},
		{"10.200.0.1", true}, {"172.16.0.1", true}, {"172.31.255.255", true}, {"172.32.0.1", false},
		{"192.168.44.1", true}, {"192.169.0.1", false}, {"100.64.0.1", true}, {"100.127.255.255", true}, {"100.128.0.1", false},
		{"8.8.8.8", false}, {"0.0.0.0", false}, {"::ffff:192.168.1.1", true}, {"::ffff:8.8.8.8", false},
		{"fd12:3456::1", true}, {"fc00::1", true}, {"fe80::1", true}, {"fe80::1%eth0", true},
		{"2001:db8::1", false}, {"::2", false},
	} {
		if got := def.contains(netip.MustParseAddr(tt.ip)); got != tt.in {
			t.Errorf("default ACL contains %s = %v, want %v", tt.ip, got, tt.in)
		}
	}
	if def.coversAll() || !def.coversLoopback(netip.MustParseAddr("127.0.0.1")) || !def.coversLoopback(netip.IPv6Loopback()) {
		t.Error("default ACL: wrong coversAll/coversLoopback")
	}
	all := newACL([]netip.Prefix{netip.MustParsePrefix("0.0.0.0/0"), netip.MustParsePrefix("::/0")})
	if !all.coversAll() || !all.contains(netip.MustParseAddr("8.8.8.8")) || !all.contains(netip.MustParseAddr("2001:db8::1")) {
		t.Error("0.0.0.0/0,::/0 does not cover everything")
	}
	one := newACL([]netip.Prefix{netip.MustParsePrefix("127.0.0.1/32"), netip.MustParsePrefix("::ffff:10.0.0.0/104")})
	if one.coversLoopback(netip.MustParseAddr("127.0.0.1")) || one.contains(netip.MustParseAddr("127.0.0.2")) || !one.contains(netip.MustParseAddr("10.9.9.9")) {
		t.Error("127.0.0.1/32 + mapped 10/8: wrong membership")
	}
	none := newACL([]netip.Prefix{})
	if none.contains(netip.MustParseAddr("127.0.0.1")) || none.coversLoopback(netip.MustParseAddr("127.0.0.1")) {
		t.Error("empty ACL lets loopback recurse")
	}
}

// TestACLAllocs: the client check costs no allocation.
func TestACLAllocs(t *testing.T) {
	a := newACL(DefaultRecursionAllow())
	ips := []netip.Addr{netip.MustParseAddr("127.0.0.1"), netip.MustParseAddr("8.8.8.8"), netip.MustParseAddr("2001:db8::1"), netip.MustParseAddr("fe80::1%eth0")}
	l := newLimiter(1000, time.Now)
	if allocs := testing.AllocsPerRun(1000, func() {
		for _, ip := range ips {
			a.contains(ip)
			l.take(ip)
		}
	}); allocs != 0 {
		t.Fatalf("ACL check and limiter allocate %v times, want 0", allocs)
	}
}

// untrusted is a client address outside the test servers' ACL; loopback
// addresses other than 127.0.0.1 work as sources on Linux.
var untrusted = netip.MustParseAddr("127.0.0.2")

// aclServer serves the test data with recursion for 127.0.0.1 only.
func aclServer(t *testing.T, up string, rate int, now func() time.Time, singleReads bool) *Server {
	t.Helper()
	pub, local := testSources(t)
	return newTestServer(t, testConfig{Config: Config{
		Upstreams: []string{up}, RecursionAllow: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")},
		RateLimit: rate, Now: now,
	}, singleReads: singleReads}, pub, local)
}

// askFrom asks like ask, from the source address src.
func askFrom(t *testing.T, proto string, src netip.Addr, addr, name string, qtype uint16) *dns.Msg {
	t.Helper()
	d := &net.Dialer{LocalAddr: &net.UDPAddr{IP: src.AsSlice()}}
	if proto == "tcp" {
		d.LocalAddr = &net.TCPAddr{IP: src.AsSlice()}
	}
	c := &dns.Client{Net: proto, Timeout: 3 * time.Second, Dialer: d}
	m, _, err := c.Exchange(new(dns.Msg).SetQuestion(name, qtype), addr)
	if err != nil {
		t.Fatalf("%s %s from %s: %v", proto, name, src, err)
	}
	return m
}

func TestRecursionOnlyForACL(t *testing.T) {
	up := startUpstream(t)
	s := aclServer(t, up.addr, -1, nil, false)
	if !s.checkClients {
		t.Fatal("client checks are off although the ACL leaves out part of loopback")
	}
	// A client in the ACL fills the cache: recursion as usual.
	if m := ask(t, "udp", s.Addr(), "pub.example.", dns.TypeA, false); m.Rcode != dns.RcodeSuccess || !m.RecursionAvailable || len(m.Answer) != 1 {
		t.Fatalf("trusted client: %v", m)
	}
	hits := up.hits.Load()
	for _, proto := range []string{"udp", "tcp"} {
		for _, tt := range []struct {
			name   string
			qtype  uint16
			rcode  int
			answer []string
		}{
			{"pub.example.", dns.TypeA, dns.RcodeRefused, nil},       // cached, but the cache is recursion's
			{"nothing.example.", dns.TypeA, dns.RcodeRefused, nil},   // would go upstream
			{"tiepublic.p2p.", dns.TypeA, dns.RcodeRefused, nil},     // unresolved p2p domain: upstream decides
			{"pubpref.p2p.", dns.TypeA, dns.RcodeRefused, nil},       // public preference: upstream
			{"site.p2p.", dns.TypeA, 0, []string{"A 10.77.0.5"}},     // our data: for anyone
			{"www.site.p2p.", dns.TypeA, 0, []string{"A 10.77.0.5"}}, // subdomain
			{"admin.p2p.", dns.TypeA, 0, []string{"A 127.0.0.1"}},    // internal
			{"a.local.", dns.TypeA, 0, []string{"A 192.0.2.1", "A 192.0.2.2"}},
			{"txt.local.", dns.TypeTXT, 0, []string{`TXT "hello world"`}},
			{"ext.local.", dns.TypeA, 0, []string{"CNAME pub.example."}}, // the chain stops where our data ends
		} {
			m := askFrom(t, proto, untrusted, s.Addr(), tt.name, tt.qtype)
			if m.Rcode != tt.rcode || !reflect.DeepEqual(rdata(m), tt.answer) {
				t.Errorf("%s %s from %s: %s %q, want %s %q", proto, tt.name, untrusted, dns.RcodeToString[m.Rcode], rdata(m), dns.RcodeToString[tt.rcode], tt.answer)
			}
			if m.RecursionAvailable {
				t.Errorf("%s %s: RA set for a client without recursion", proto, tt.name)
			}
		}
	}
	if h := up.hits.Load(); h != hits {
		t.Errorf("upstream asked %d times for a client without recursion", h-hits)
	}
	st := s.Stats()
	if st.RecursionRefused != 8 || st.Refused < 8 {
		t.Errorf("recursionRefused = %d, refused = %d; want 8 each", st.RecursionRefused, st.Refused)
	}
	// The trusted client still recurses, over TCP too.
	if m := askFrom(t, "tcp", netip.MustParseAddr("127.0.0.1"), s.Addr(), "pub.example.", dns.TypeA); m.Rcode != 0 || len(m.Answer) != 1 || !m.RecursionAvailable {
		t.Errorf("trusted TCP client: %v", m)
	}
}

// fixedClock is a clock tests move by hand.
type fixedClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fixedClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fixedClock) add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

func TestRateLimitOutsideACL(t *testing.T) {
	for _, single := range []bool{false, true} {
		t.Run(map[bool]string{false: "batched", true: "singleReads"}[single], func(t *testing.T) {
			testRateLimit(t, single)
		})
	}
}

func testRateLimit(t *testing.T, singleReads bool) {
	clk := &fixedClock{t: time.Unix(1_700_000_000, 0)}
	const rate = 5
	s := aclServer(t, deadUpstream(t), rate, clk.now, singleReads)
	c, err := net.ListenUDP("udp", net.UDPAddrFromAddrPort(netip.AddrPortFrom(untrusted, 0)))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	srv := net.UDPAddrFromAddrPort(netip.MustParseAddrPort(s.Addr()))
	// 12 queries at one instant: 5 answered (one second's budget), then of
	// the 7 over budget every second one slips out truncated, the rest
	// are dropped. Some are fast-path answers, some slow-path REFUSED.
	const sent = 12
	for i := 0; i < sent; i++ {
		name := "site.p2p."
		if i%3 == 2 {
			name = "pub.example." // REFUSED: responses count, refusals too
		}
		q := new(dns.Msg).SetQuestion(name, dns.TypeA)
		q.Id = uint16(100 + i)
		b, _ := q.Pack()
		if _, err := c.WriteToUDP(b, srv); err != nil {
			t.Fatal(err)
		}
	}
	const limited = sent - rate
	wantSlip, wantDrop := int64(limited/rrlSlip), int64(limited-limited/rrlSlip)
	testutil.Eventually(t, 5*time.Second, func() error {
		if st := s.Stats(); st.RateLimited != wantDrop || st.RateLimitSlipped != wantSlip {
			return fmt.Errorf("rateLimited %d, slipped %d; want %d, %d", st.RateLimited, st.RateLimitSlipped, wantDrop, wantSlip)
		}
		return nil
	})
	// Every decision is made, so exactly rate+wantSlip datagrams were sent.
	full, tc := 0, 0
	buf := make([]byte, 2048)
	c.SetReadDeadline(time.Now().Add(5 * time.Second)) // hang guard
	for i := 0; i < rate+int(wantSlip); i++ {
		n, err := c.Read(buf)
		if err != nil {
			t.Fatalf("reply %d: %v", i, err)
		}
		var m dns.Msg
		if err := m.Unpack(buf[:n]); err != nil {
			t.Fatalf("reply does not unpack: %v", err)
		}
		if len(m.Question) != 1 || m.RecursionAvailable {
			t.Fatalf("reply without its question or with RA: %v", &m)
		}
		if m.Truncated {
			tc++
			if len(m.Answer)+len(m.Ns)+len(m.Extra) != 0 {
				t.Fatalf("slipped reply carries records: %v", &m)
			}
			continue
		}
		full++
	}
	if full != rate || tc != int(wantSlip) {
		t.Fatalf("%d full and %d truncated replies, want %d and %d", full, tc, rate, wantSlip)
	}
	// TCP is never limited: a client told TC=1 gets its answer there.
	if m := askFrom(t, "tcp", untrusted, s.Addr(), "site.p2p.", dns.TypeA); !reflect.DeepEqual(rdata(m), []string{"A 10.77.0.5"}) {
		t.Fatalf("TCP while limited: %v", m)
	}
	// A client in the ACL is never limited.
	for i := 0; i < 3*rate; i++ {
		if got := rdata(ask(t, "udp", s.Addr(), "site.p2p.", dns.TypeA, false)); len(got) != 1 {
			t.Fatalf("trusted query %d: %q", i, got)
		}
	}
	// A second later the budget is back.
	clk.add(time.Second)
	if m := askFrom(t, "udp", untrusted, s.Addr(), "site.p2p.", dns.TypeA); m.Truncated || len(m.Answer) != 1 {
		t.Fatalf("after refill: %v", m)
	}
}

func TestLimiterBuckets(t *testing.T) {
	clk := &fixedClock{t: time.Unix(0, 0)}
	l := newLimiter(2, clk.now)
	a, b := netip.MustParseAddr("198.51.100.1"), netip.MustParseAddr("198.51.100.200") // one /24
	other := netip.MustParseAddr("198.51.101.1")
	v6a, v6b := netip.MustParseAddr("2001:db8:0:ff::1"), netip.MustParseAddr("2001:db8:0:1::1") // one /56
	got := []rrlVerdict{l.take(a), l.take(b), l.take(a), l.take(b), l.take(a), l.take(other), l.take(v6a), l.take(v6b), l.take(v6a)}
	want := []rrlVerdict{rrlSend, rrlSend, rrlDrop, rrlSlipTC, rrlDrop, rrlSend, rrlSend, rrlSend, rrlDrop}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("verdicts %v, want %v", got, want)
	}
	clk.add(500 * time.Millisecond) // one token back
	if v := l.take(a); v != rrlSend {
		t.Fatalf("after 0.5s: %v", v)
	}
	// Memory stays bounded under many spoofed networks.
	for i := 0; i < rrlMaxBuckets+10; i++ {
		l.take(netip.AddrFrom4([4]byte{10, byte(i >> 16), byte(i >> 8), 1}))
	}
	if n := len(l.buckets); n > rrlMaxBuckets {
		t.Fatalf("%d buckets, want at most %d", n, rrlMaxBuckets)
	}
}

func TestSlip(t *testing.T) {
	q := new(dns.Msg).SetQuestion("www.example.", dns.TypeTXT)
	q.SetEdns0(1232, false)
	r := new(dns.Msg).SetReply(q)
	r.Answer = append(r.Answer, &dns.TXT{Hdr: dns.RR_Header{Name: "www.example.", Rrtype: dns.TypeTXT, Class: dns.ClassINET, Ttl: 60}, Txt: []string{"big"}})
	b, _ := r.Pack()
	n := slip(b)
	var m dns.Msg
	if err := m.Unpack(b[:n]); err != nil {
		t.Fatal(err)
	}
	if !m.Truncated || len(m.Answer)+len(m.Ns)+len(m.Extra) != 0 || m.Question[0] != q.Question[0] || m.Id != q.Id {
		t.Fatalf("slip = %v", &m)
	}
	if n > q.Len() {
		t.Fatalf("slipped reply %d bytes > query %d bytes", n, q.Len())
	}
	if slip([]byte{1, 2, 3}) != 0 || slip(append(header(1, 0x8000, 1, 0, 0, 0), 5, 'a')) != 0 {
		t.Fatal("slip accepted a message without a whole question")
	}
}
