package dns

import (
	"context"
	"encoding/binary"
	"net/netip"
	"reflect"
	"testing"

	"github.com/miekg/dns"

	"peerdns/dns/zone"
)

// FuzzHandle feeds raw bytes to both answer paths. Neither may panic; any
// reply must parse; and when the fast path answers, the slow path (plain
// miekg/dns over the same table) must give the same answer.
func FuzzHandle(f *testing.F) {
	pub, local := testSources(f)
	s, err := New(Config{Addr: "127.0.0.1:0", ResolvConf: "/nonexistent"}, pub, local, nil)
	if err != nil {
		f.Fatal(err)
	}
	for _, name := range []string{"a.local.", "WWW.site.p2p.", "admin.p2p.", "alias.local.", "other.local.", "pub.example.", ".", "x.Wild.local.", "a.b.wild.local.", "exact.wild.local.", "x.exact.wild.local.", "nobody.p2p."} {
		for _, qt := range []uint16{dns.TypeA, dns.TypeAAAA, dns.TypeTXT, dns.TypeANY, 65280} {
			m := new(dns.Msg).SetQuestion(name, qt)
			b, _ := m.Pack()
			f.Add(b)
			m.SetEdns0(600, true)
			b, _ = m.Pack()
			f.Add(b)
		}
	}
	// Cookies: client only, with a server cookie (not ours), malformed.
	for _, c := range []string{"0102030405060708", "0102030405060708010000006993c5e0a1b2c3d4e5f60718", "01020304050607"} {
		for _, name := range []string{"a.local.", "site.p2p.", "nobody.p2p."} {
			m := new(dns.Msg).SetQuestion(name, dns.TypeA)
			m.SetEdns0(1232, false)
			o := m.IsEdns0()
			o.Option = append(o.Option, &dns.EDNS0_COOKIE{Code: dns.EDNS0COOKIE, Cookie: c})
			b, _ := m.Pack()
			f.Add(b)
		}
	}
	f.Add(header(1, 0, 2, 0, 0, 0))
	for _, tc := range rejectCases() {
		f.Add(tc.pkt)
	}
	f.Add([]byte{0, 1, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0xC0, 12, 0, 1, 0, 1})
	out := make([]byte, 1232)
	f.Fuzz(func(t *testing.T, pkt []byte) {
		var q zone.Query
		n := s.fast(s.Table(), pkt, &q, out, 1232, loopback, &shard{})
		slow := slowReply(s, pkt)
		if n > 0 {
			sameAsSlow(t, pkt, out[:n], slow)
		}
		// Whatever the slow path answers (FORMERR and NOTIMP with the
		// question and OPT they could read, reject.go) is a message
		// for this query.
		if slow != nil {
			var m dns.Msg
			if err := m.Unpack(slow); err != nil || m.Id != binary.BigEndian.Uint16(pkt) || !m.Response {
				t.Fatalf("slow reply %x to %x: %v", slow, pkt, err)
			}
		}
	})
}

// sameAsSlow fails t when fast, a fast path's answer to pkt, says
// anything else than slow, the slow path's.
func sameAsSlow(t *testing.T, pkt, fast, slow []byte) {
	t.Helper()
	var sm dns.Msg
	if slow != nil {
		if err := sm.Unpack(slow); err != nil {
			t.Fatalf("slow reply does not unpack: %v (%x)", err, slow)
		}
	}
	var fm dns.Msg
	if err := fm.Unpack(fast); err != nil {
		t.Fatalf("fast reply does not unpack: %v (%x)", err, fast)
	}
	if slow == nil {
		t.Fatalf("fast path answered a query the slow path drops: %x", pkt)
	}
	if fm.Id != sm.Id || fm.Rcode != sm.Rcode || fm.Authoritative != sm.Authoritative || fm.Truncated != sm.Truncated ||
		fm.RecursionDesired != sm.RecursionDesired || fm.RecursionAvailable != sm.RecursionAvailable || !reflect.DeepEqual(fm.Question, sm.Question) {
		t.Fatalf("fast and slow headers differ:\nfast %v\nslow %v", &fm, &sm)
	}
	if len(fm.Ns) != len(sm.Ns) || len(fm.Extra) != len(sm.Extra) {
		t.Fatalf("fast and slow sections differ:\nfast %v\nslow %v", &fm, &sm)
	}
	if fo, so := fm.IsEdns0(), sm.IsEdns0(); fo != nil && so != nil && fo.String() != so.String() {
		t.Fatalf("fast and slow OPT differ (the cookie?):\nfast %v\nslow %v", fo, so)
	}
	if !reflect.DeepEqual(rdata(&fm), rdata(&sm)) {
		t.Fatalf("fast and slow answers differ: %q vs %q", rdata(&fm), rdata(&sm))
	}
	for i := range fm.Answer {
		if fm.Answer[i].Header().Name != sm.Answer[i].Header().Name || fm.Answer[i].Header().Ttl != sm.Answer[i].Header().Ttl {
			t.Fatalf("owner/TTL differ: %v vs %v", fm.Answer[i], sm.Answer[i])
		}
	}
}

// FuzzStreamFast: the TCP and DoT fast path (fastStream) answers a
// query only as the slow path answers it on a stream, for a client with
// recursion and one without (RA cleared).
func FuzzStreamFast(f *testing.F) {
	pub, local := testSources(f)
	s, err := New(Config{Addr: "127.0.0.1:0", ResolvConf: "/nonexistent", RecursionAllow: []netip.Prefix{netip.MustParsePrefix("192.0.2.0/24")}}, pub, local, nil)
	if err != nil {
		f.Fatal(err)
	}
	s.checkClients = true // as serveOn sets it for an ACL that leaves loopback out
	for _, name := range []string{"a.local.", "WWW.site.p2p.", "admin.p2p.", "alias.local.", "nobody.p2p.", "pub.example."} {
		for _, qt := range []uint16{dns.TypeA, dns.TypeAAAA, dns.TypeTXT, dns.TypeANY} {
			m := new(dns.Msg).SetQuestion(name, qt)
			b, _ := m.Pack()
			f.Add(b)
			m.SetEdns0(512, true)
			b, _ = m.Pack()
			f.Add(b)
		}
	}
	ss := newStreamServer(s, nil, "tcp")
	out := make([]byte, fastStreamMax)
	outside := netip.MustParseAddr("198.51.100.7")
	f.Fuzz(func(t *testing.T, pkt []byte) {
		for _, c := range []struct {
			client  netip.Addr
			recurse bool
		}{{netip.MustParseAddr("192.0.2.9"), true}, {outside, false}} {
			var q zone.Query
			n := ss.fastStream(pkt, &q, out, c.recurse, c.client)
			if n == 0 {
				continue
			}
			slow, _, _ := s.exchange(context.Background(), pkt, true, c.recurse, c.client)
			sameAsSlow(t, pkt, out[:n], slow)
		}
	})
}
