package dns

import (
	"peerdns/messages"

	"context"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/miekg/dns"

	"peerdns/dns/dnstest"
	"peerdns/internal/view"
)

// fakeUpstream is a real miekg/dns server on loopback (UDP and TCP on one
// port) playing the public DNS.
type fakeUpstream struct {
	addr string
	hits atomic.Int64
}

func soa() dns.RR {
	return &dns.SOA{Hdr: dns.RR_Header{Name: "example.", Rrtype: dns.TypeSOA, Class: dns.ClassINET, Ttl: 600},
		Ns: "ns.example.", Mbox: "admin.example.", Serial: 1, Refresh: 3600, Retry: 600, Expire: 86400, Minttl: 60}
}

func (f *fakeUpstream) ServeDNS(w dns.ResponseWriter, req *dns.Msg) {
	f.hits.Add(1)
	m := new(dns.Msg)
	m.SetReply(req)
	m.RecursionAvailable = true
	q := req.Question[0]
	name := strings.ToLower(q.Name)
	hdr := func(t uint16, ttl uint32) dns.RR_Header {
		return dns.RR_Header{Name: q.Name, Rrtype: t, Class: dns.ClassINET, Ttl: ttl}
	}
	a := func(ip string, ttl uint32) {
		if q.Qtype == dns.TypeA {
			m.Answer = append(m.Answer, &dns.A{Hdr: hdr(dns.TypeA, ttl), A: net.ParseIP(ip)})
		} else {
			m.Ns = append(m.Ns, soa())
		}
	}
	switch name {
	case "pub.example.":
		a("203.0.113.7", 300)
	case "short.example.":
		a("203.0.113.8", 1)
	case "clash.p2p.":
		a("198.51.100.9", 300)
	case "pubpref.p2p.":
		a("198.51.100.10", 300)
	case "tiepublic.p2p.":
		a("198.51.100.11", 300)
	case "big.example.":
		for i := 0; i < 40; i++ {
			m.Answer = append(m.Answer, &dns.TXT{Hdr: hdr(dns.TypeTXT, 300), Txt: []string{strings.Repeat("x", 90) + string(rune('a'+i%26))}})
		}
	default:
		m.Rcode = dns.RcodeNameError
		m.Ns = append(m.Ns, soa())
	}
	if w.RemoteAddr().Network() == "udp" {
		size := dns.MinMsgSize
		if o := req.IsEdns0(); o != nil {
			size = int(o.UDPSize())
		}
		m.Truncate(size)
	}
	w.WriteMsg(m)
}

func startUpstream(t *testing.T) *fakeUpstream {
	t.Helper()
	f := &fakeUpstream{}
	pc, ln := listenPair(t)
	for _, srv := range []*dns.Server{{PacketConn: pc, Handler: f}, {Listener: ln, Handler: f}} {
		up := make(chan struct{})
		srv.NotifyStartedFunc = func() { close(up) }
		go srv.ActivateAndServe()
		<-up
		t.Cleanup(func() { srv.Shutdown() })
	}
	f.addr = pc.LocalAddr().String()
	return f
}

// deadUpstream is a UDP socket that never answers.
func deadUpstream(t *testing.T) string {
	t.Helper()
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pc.Close() })
	return pc.LocalAddr().String()
}

func mustRecord(t testing.TB, js string) messages.LocalRecord {
	t.Helper()
	r, err := messages.ParseLocalRecord([]byte(js))
	if err != nil {
		t.Fatalf("Parse(%s): %v", js, err)
	}
	return r
}

var testRecordJSON = []string{
	`{"name":"a.local","type":"A","ttl":120,"data":"192.0.2.1"}`,
	`{"name":"a.local","type":"A","ttl":120,"data":"192.0.2.2"}`,
	`{"name":"v6.local","type":"AAAA","ttl":120,"data":"2001:db8::1"}`,
	`{"name":"alias.local","type":"CNAME","ttl":120,"data":"a.local"}`,
	`{"name":"ext.local","type":"CNAME","ttl":120,"data":"pub.example"}`,
	`{"name":"mail.local","type":"MX","ttl":120,"preference":10,"exchange":"mx.local"}`,
	`{"name":"txt.local","type":"TXT","ttl":120,"data":"hello world"}`,
	`{"name":"_sip._tcp.local","type":"SRV","ttl":120,"priority":1,"weight":2,"port":5060,"target":"a.local"}`,
	`{"name":"zone.local","type":"SOA","ttl":120,"mname":"ns1.zone.local","rname":"admin.zone.local","serial":7,"refresh":3600,"retry":600,"expire":86400,"minimum":60}`,
	`{"name":"caa.local","type":"CAA","ttl":120,"flag":0,"tag":"issue","value":"letsencrypt.org"}`,
	`{"name":"ns.local","type":"NS","ttl":120,"data":"ns1.local"}`,
	`{"name":"1.2.0.192.in-addr.arpa","type":"PTR","ttl":120,"data":"a.local"}`,
	`{"name":"other.local","type":"OTHER","ttl":120,"rrtype":65280,"data":"deadbeef"}`,
	`{"name":"hinfo.local","type":"OTHER","ttl":120,"rrtype":13,"data":"03637075026f73"}`,
	`{"name":"txt.site.p2p","type":"TXT","ttl":120,"data":"local under p2p"}`,
	`{"name":"version.peerdns","class":"CH","type":"TXT","ttl":0,"data":"peerdns"}`,
	`{"name":"*.wild.local","type":"A","ttl":90,"data":"192.0.2.77"}`,
	`{"name":"*.wild.local","type":"CNAME","class":"CH","ttl":90,"data":"a.local"}`,
	`{"name":"exact.wild.local","type":"TXT","ttl":90,"data":"exact"}`,
}

func testSources(t testing.TB) (*view.Published, *view.LocalPublished) {
	pub := &view.Published{}
	pub.Store(&view.Snapshot{
		Version: 1,
		Domains: map[string]*view.Domain{
			"site.p2p":      {Name: "site.p2p", Status: "resolved", IP: netip.MustParseAddr("10.77.0.5")},
			"clash.p2p":     {Name: "clash.p2p", Status: "resolved", IP: netip.MustParseAddr("10.77.0.6")},
			"pubpref.p2p":   {Name: "pubpref.p2p", Status: "resolved", IP: netip.MustParseAddr("10.77.0.7")},
			"tie.p2p":       {Name: "tie.p2p", Status: "tie"},
			"tiepublic.p2p": {Name: "tiepublic.p2p", Status: "insufficient_quorum"},
		},
		Internal: map[string]netip.Addr{"admin.p2p": netip.MustParseAddr("127.0.0.1")},
	})
	local := &view.LocalPublished{}
	var recs []messages.LocalRecord
	for _, js := range testRecordJSON {
		recs = append(recs, mustRecord(t, js))
	}
	local.Store(&messages.LocalSnapshot{Version: 1, Records: recs, Prefs: map[string]string{"pubpref.p2p": messages.VersionPublic}})
	return pub, local
}

// testConfig is Config plus test-only switches.
type testConfig struct {
	Config
	singleReads bool
}

func newTestServer(t *testing.T, tc testConfig, pub *view.Published, local *view.LocalPublished) *Server {
	cfg := tc.Config
	t.Helper()
	if cfg.Addr == "" {
		cfg.Addr = "127.0.0.1:0"
	}
	if cfg.UDPSockets == 0 {
		cfg.UDPSockets = 2
	}
	if cfg.UpstreamTimeout == 0 {
		cfg.UpstreamTimeout = 300 * time.Millisecond
	}
	single := tc.singleReads
	s, err := New(cfg, pub, local, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	s.singleReads = single
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := s.Shutdown(ctx); err != nil {
			t.Errorf("Shutdown: %v", err)
		}
	})
	return s
}

func ask(t testing.TB, proto, addr, name string, qtype uint16, edns bool) *dns.Msg {
	t.Helper()
	q := new(dns.Msg)
	q.SetQuestion(name, qtype)
	if edns {
		q.SetEdns0(1232, false)
	}
	c := &dns.Client{Net: proto, Timeout: 3 * time.Second}
	m, _, err := c.Exchange(q, addr)
	if err != nil {
		t.Fatalf("%s %s %s: %v", proto, name, dns.TypeToString[qtype], err)
	}
	return m
}

// rdata is the answer section as "TYPE rdata" strings.
func rdata(m *dns.Msg) []string {
	var out []string
	for _, rr := range m.Answer {
		if u, ok := rr.(*dns.RFC3597); ok {
			out = append(out, fmt.Sprintf("TYPE%d \\# %d %s", u.Hdr.Rrtype, len(u.Rdata)/2, u.Rdata))
			continue
		}
		out = append(out, dns.TypeToString[rr.Header().Rrtype]+" "+strings.TrimSpace(strings.TrimPrefix(rr.String(), rr.Header().String())))
	}
	return out
}

// rawQuery sends raw bytes over UDP and returns the reply, or nil when
// none came within d.
func rawQuery(t *testing.T, addr string, pkt []byte, d time.Duration) []byte {
	t.Helper()
	c, err := net.Dial("udp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Write(pkt); err != nil {
		t.Fatal(err)
	}
	c.SetReadDeadline(time.Now().Add(d))
	buf := make([]byte, 65535)
	n, err := c.Read(buf)
	if err != nil {
		return nil
	}
	return buf[:n]
}

// loopback is the client address of tests that talk to the answer
// functions directly.
var loopback = netip.MustParseAddr("127.0.0.1")

func contextWithTimeout(d time.Duration) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), d)
}

// listenPair binds UDP and TCP on one free loopback port.
var listenPair = dnstest.ListenPair

// slowReply is the slow path's reply to pkt from a loopback client that
// gets recursion.
func slowReply(s *Server, pkt []byte) []byte {
	b, _ := s.handleRaw(context.Background(), pkt, true, loopback)
	return b
}
