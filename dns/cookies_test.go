package dns

import (
	"encoding/hex"
	"fmt"
	"net/netip"
	"testing"
	"time"

	"github.com/miekg/dns"

	"peerdns/dns/cookie"
	"peerdns/dns/zone"
	"peerdns/internal/testutil"
)

// askCookie sends name/A with the COOKIE option data (hex) and returns
// the reply and the cookie it carries ("" none).
func askCookie(t *testing.T, proto, addr, name string, qtype uint16, cookies ...string) (*dns.Msg, string) {
	t.Helper()
	q := new(dns.Msg)
	q.SetQuestion(name, qtype)
	q.SetEdns0(1232, false)
	o := q.IsEdns0()
	for _, c := range cookies {
		o.Option = append(o.Option, &dns.EDNS0_COOKIE{Code: dns.EDNS0COOKIE, Cookie: c})
	}
	c := &dns.Client{Net: proto, Timeout: 3 * time.Second}
	m, _, err := c.Exchange(q, addr)
	if err != nil {
		t.Fatalf("%s %s: %v", proto, name, err)
	}
	got := ""
	if ro := m.IsEdns0(); ro != nil {
		for _, opt := range ro.Option {
			if ck, ok := opt.(*dns.EDNS0_COOKIE); ok {
				got = ck.Cookie
			}
		}
	}
	return m, got
}

const clientCookie = "0123456789abcdef"

// checkOurs fails unless got is clientCookie followed by a server cookie
// the server made for 127.0.0.1.
func checkOurs(t *testing.T, s *Server, got string) string {
	t.Helper()
	b, err := hex.DecodeString(got)
	if err != nil || len(b) != 24 || hex.EncodeToString(b[:8]) != clientCookie {
		t.Fatalf("reply cookie %q: want the client cookie and a 16-byte server cookie", got)
	}
	var cl [8]byte
	copy(cl[:], b)
	if !s.cookies.Valid(b[8:], &cl, netip.MustParseAddr("127.0.0.1"), time.Now()) {
		t.Fatalf("reply cookie %q does not verify", got)
	}
	return got[16:]
}

func TestCookies(t *testing.T) {
	up := startUpstream(t)
	pub, local := testSources(t)
	s := newTestServer(t, testConfig{Config: Config{Upstreams: []string{up.addr}}}, pub, local)
	other, _ := cookie.New(nil)
	var cl [8]byte
	copy(cl[:], mustHexT(t, clientCookie))
	var foreign [16]byte
	other.Make(&foreign, &cl, netip.MustParseAddr("127.0.0.1"), time.Now())

	for _, proto := range []string{"udp", "tcp"} {
		// a.local (fast path on UDP), pub.example (slow path, upstream).
		for _, name := range []string{"a.local.", "site.p2p.", "pub.example."} {
			t.Run(proto+"/"+name, func(t *testing.T) {
				m, got := askCookie(t, proto, s.Addr(), name, dns.TypeA, clientCookie)
				if m.Rcode != 0 || len(m.Answer) == 0 {
					t.Fatalf("client cookie only: %v", m)
				}
				srv := checkOurs(t, s, got)
				// Sent back: a normal answer with a (fresh) cookie.
				m, got = askCookie(t, proto, s.Addr(), name, dns.TypeA, clientCookie+srv)
				if m.Rcode != 0 || len(m.Answer) == 0 {
					t.Fatalf("valid server cookie: %v", m)
				}
				checkOurs(t, s, got)
				// Another server's cookie, inside the recursion ACL: answered
				// normally with our cookie (RFC 7873 §5.2.4).
				m, got = askCookie(t, proto, s.Addr(), name, dns.TypeA, clientCookie+hex.EncodeToString(foreign[:]))
				if m.Rcode != 0 || len(m.Answer) == 0 {
					t.Fatalf("foreign server cookie: %v", m)
				}
				checkOurs(t, s, got)
				// Malformed: FORMERR (§5.2.2), no cookie in the reply.
				for _, bad := range [][]string{{"01234567"}, {clientCookie + "0102030405"}, {clientCookie + hex.EncodeToString(make([]byte, 33))}, {clientCookie, clientCookie}} {
					m, got = askCookie(t, proto, s.Addr(), name, dns.TypeA, bad...)
					if m.Rcode != dns.RcodeFormatError || got != "" || len(m.Answer) != 0 {
						t.Fatalf("malformed cookie %q: rcode %s, cookie %q", bad, dns.RcodeToString[m.Rcode], got)
					}
				}
			})
		}
	}
}

// A client outside the recursion ACL with a server cookie that is not
// ours gets BADCOOKIE over UDP (with a fresh cookie, no data), retries
// with the fresh one and is answered; with a valid cookie it is exempt
// from the response-rate limit.
func TestBadCookieOutsideACL(t *testing.T) {
	pub, local := testSources(t)
	s := newTestServer(t, testConfig{Config: Config{Upstreams: []string{deadUpstream(t)}, RecursionAllow: []netip.Prefix{}, RateLimit: 5}}, pub, local)
	for _, name := range []string{"site.p2p.", "a.local.", "mail.local."} {
		m, got := askCookie(t, "udp", s.Addr(), name, dns.TypeA, clientCookie+"01000000"+"00000000"+"0102030405060708")
		if m.Rcode != dns.RcodeBadCookie || len(m.Answer) != 0 {
			t.Fatalf("%s: foreign cookie over UDP from outside the ACL: rcode %s, %d answers; want BADCOOKIE", name, dns.RcodeToString[m.Rcode], len(m.Answer))
		}
		srv := checkOurs(t, s, got)
		// TCP proves the address anyway: answered.
		if m, _ := askCookie(t, "tcp", s.Addr(), name, dns.TypeA, clientCookie+"01000000"+"00000000"+"0102030405060708"); m.Rcode != 0 {
			t.Fatalf("%s over TCP: rcode %s", name, dns.RcodeToString[m.Rcode])
		}
		// With our cookie, 20 queries in a row beat a limit of 5/s (the
		// BADCOOKIE answers above took from the same budget).
		for i := 0; i < 20; i++ {
			m, got = askCookie(t, "udp", s.Addr(), name, dns.TypeA, clientCookie+srv)
			if m.Rcode != 0 || m.Truncated || m.RecursionAvailable {
				t.Fatalf("%s, query %d with a valid cookie: %v", name, i, m)
			}
			srv = checkOurs(t, s, got)
		}
	}
	// Without a cookie the same client is limited (some of 10 queries
	// get no answer or an empty truncated one).
	limited := 0
	for i := 0; i < 10; i++ {
		q := new(dns.Msg).SetQuestion("site.p2p.", dns.TypeA)
		c := &dns.Client{Timeout: 150 * time.Millisecond}
		m, _, err := c.Exchange(q, s.Addr())
		if err != nil || m.Truncated || len(m.Answer) == 0 {
			limited++
		}
	}
	if limited == 0 {
		t.Fatal("no query without a cookie was rate-limited: the test proves nothing")
	}
	if n := s.AnswersByRcode()["BADCOOKIE"]; n != 3 {
		t.Fatalf("BADCOOKIE answers counted %d, want 3", n)
	}
}

func mustHexT(t testing.TB, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(s)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// The fast path answers a query with a cookie without allocating.
func TestCookieFastAllocs(t *testing.T) {
	pub, local := testSources(t)
	s, err := New(Config{Addr: "127.0.0.1:0", ResolvConf: "/nonexistent"}, pub, local, nil)
	if err != nil {
		t.Fatal(err)
	}
	q := new(dns.Msg).SetQuestion("site.p2p.", dns.TypeA)
	q.SetEdns0(1232, false)
	q.IsEdns0().Option = append(q.IsEdns0().Option, &dns.EDNS0_COOKIE{Code: dns.EDNS0COOKIE, Cookie: clientCookie})
	pkt, _ := q.Pack()
	out := make([]byte, 1232)
	var zq zone.Query
	sh := &shard{}
	tb := s.Table()
	if n := s.fast(tb, pkt, &zq, out, 1232, loopback, sh); n == 0 {
		t.Fatal("cookie query not answered on the fast path")
	}
	if a := testing.AllocsPerRun(1000, func() { s.fast(tb, pkt, &zq, out, 1232, loopback, sh) }); a != 0 {
		t.Fatalf("%v allocations per cookie answer, want 0", a)
	}
}

// BenchmarkFastCookie: the server's fast path for one question without
// a cookie, with a client cookie, and with our valid server cookie (one
// SipHash to make the next, two to check one).
func BenchmarkFastCookie(b *testing.B) {
	pub, local := testSources(b)
	s, err := New(Config{Addr: "127.0.0.1:0", ResolvConf: "/nonexistent"}, pub, local, nil)
	if err != nil {
		b.Fatal(err)
	}
	var cl [8]byte
	copy(cl[:], mustHexT(b, clientCookie))
	var srv [16]byte
	s.cookies.Make(&srv, &cl, loopback, time.Now())
	for _, bc := range []struct{ name, cookie string }{
		{"none", ""}, {"client", clientCookie}, {"server", clientCookie + hex.EncodeToString(srv[:])},
	} {
		q := new(dns.Msg).SetQuestion("site.p2p.", dns.TypeA)
		q.SetEdns0(1232, false)
		if bc.cookie != "" {
			q.IsEdns0().Option = append(q.IsEdns0().Option, &dns.EDNS0_COOKIE{Code: dns.EDNS0COOKIE, Cookie: bc.cookie})
		}
		pkt, _ := q.Pack()
		out := make([]byte, 1232)
		var zq zone.Query
		sh := &shard{}
		tb := s.Table()
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				sh.nowOK = false // a batch of one datagram: the clock read every time
				if s.fast(tb, pkt, &zq, out, 1232, loopback, sh) == 0 {
					b.Fatal("not answered")
				}
			}
		})
	}
}

// A random secret is rotated on schedule: a server cookie keeps working
// across one rotation and becomes "not ours" (BADCOOKIE, for a UDP
// client outside the recursion ACL) after the next.
func TestCookieSecretRotates(t *testing.T) {
	pub, local := testSources(t)
	s := newTestServer(t, testConfig{Config: Config{Upstreams: []string{deadUpstream(t)}, RecursionAllow: []netip.Prefix{},
		CookieRotate: 50 * time.Millisecond}}, pub, local)
	m, got := askCookie(t, "udp", s.Addr(), "a.local.", dns.TypeA, clientCookie)
	if m.Rcode != 0 {
		t.Fatalf("client cookie only: %v", m)
	}
	old := checkOurs(t, s, got)
	testutil.Eventually(t, 10*time.Second, func() error {
		m, _ := askCookie(t, "udp", s.Addr(), "a.local.", dns.TypeA, clientCookie+old)
		if m.Rcode != dns.RcodeBadCookie {
			return fmt.Errorf("the cookie of two rotations ago still answered: rcode %s", dns.RcodeToString[m.Rcode])
		}
		return nil
	})
	// A fresh cookie works at once.
	_, got = askCookie(t, "udp", s.Addr(), "a.local.", dns.TypeA, clientCookie)
	if m, _ := askCookie(t, "udp", s.Addr(), "a.local.", dns.TypeA, clientCookie+checkOurs(t, s, got)); m.Rcode != 0 {
		t.Fatalf("fresh cookie: rcode %s", dns.RcodeToString[m.Rcode])
	}
}

// A query with no question and only an OPT holding a client cookie asks
// for a server cookie (RFC 7873 §5.4): NOERROR with the client cookie and
// a fresh server cookie, on every transport, as BIND answers. It was
// FORMERR without a cookie. Without a cookie, or with a second question,
// it is still FORMERR.
func TestCookieOnlyQuery(t *testing.T) {
	pub, local := testSources(t)
	s := newTestServer(t, testConfig{Config: Config{Upstreams: []string{deadUpstream(t)}}}, pub, local)
	query := func(proto string, cookie bool) *dns.Msg {
		t.Helper()
		q := new(dns.Msg)
		q.Id = dns.Id()
		q.SetEdns0(1232, false)
		if cookie {
			o := q.IsEdns0()
			o.Option = append(o.Option, &dns.EDNS0_COOKIE{Code: dns.EDNS0COOKIE, Cookie: clientCookie})
		}
		c := &dns.Client{Net: proto, Timeout: 3 * time.Second}
		m, _, err := c.Exchange(q, s.Addr())
		if err != nil {
			t.Fatalf("%s: %v", proto, err)
		}
		return m
	}
	for _, proto := range []string{"udp", "tcp"} {
		m := query(proto, true)
		if m.Rcode != dns.RcodeSuccess || len(m.Question) != 0 || len(m.Answer)+len(m.Ns) != 0 || len(m.Extra) != 1 {
			t.Fatalf("%s cookie-only query: %v, want NOERROR with only an OPT", proto, m)
		}
		got := ""
		for _, o := range m.IsEdns0().Option {
			if ck, ok := o.(*dns.EDNS0_COOKIE); ok {
				got = ck.Cookie
			}
		}
		server := checkOurs(t, s, got)
		// The server cookie it got is one the server takes.
		if r, _ := askCookie(t, proto, s.Addr(), "a.local.", dns.TypeA, clientCookie+server); r.Rcode != dns.RcodeSuccess || len(r.Answer) != 2 {
			t.Fatalf("%s with the cookie got: %v", proto, r)
		}
		if m := query(proto, false); m.Rcode != dns.RcodeFormatError {
			t.Fatalf("%s no question, no cookie: rcode %s, want FORMERR", proto, dns.RcodeToString[m.Rcode])
		}
	}
}
