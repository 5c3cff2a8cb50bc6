package upstream

import (
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/miekg/dns"
)

type fake struct {
	hits   atomic.Int64
	gate   chan struct{} // when set, answers wait for it
	rcode  int
	refuse bool
	edns   bool // every answer is rcode, with an OPT (for extended RCODEs)
}

func (f *fake) ServeDNS(w dns.ResponseWriter, req *dns.Msg) {
	f.hits.Add(1)
	if f.gate != nil {
		<-f.gate
	}
	m := new(dns.Msg).SetReply(req)
	q := req.Question[0]
	if f.refuse {
		m.Rcode = dns.RcodeRefused
		w.WriteMsg(m)
		return
	}
	if f.edns {
		m.Rcode = f.rcode
		m.SetEdns0(1232, false)
		w.WriteMsg(m)
		return
	}
	soa := func(ttl, min uint32) dns.RR {
		return &dns.SOA{Hdr: dns.RR_Header{Name: "example.", Rrtype: dns.TypeSOA, Class: dns.ClassINET, Ttl: ttl}, Ns: "ns.", Mbox: "m.", Minttl: min}
	}
	switch q.Name {
	case "a.example.", "b.example.", "c.example.":
		m.Answer = append(m.Answer, &dns.A{Hdr: dns.RR_Header{Name: q.Name, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: 100}, A: net.IPv4(192, 0, 2, 1)})
		m.Answer = append(m.Answer, &dns.A{Hdr: dns.RR_Header{Name: q.Name, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: 50}, A: net.IPv4(192, 0, 2, 2)})
	case "long.example.":
		m.Answer = append(m.Answer, &dns.A{Hdr: dns.RR_Header{Name: q.Name, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: 1 << 30}, A: net.IPv4(192, 0, 2, 3)})
	case "msb.example.":
		m.Answer = append(m.Answer, &dns.A{Hdr: dns.RR_Header{Name: q.Name, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: 1<<31 + 5}, A: net.IPv4(192, 0, 2, 4)})
	case "cname-nodata.example.", "cname-nx.example.":
		m.Answer = append(m.Answer, &dns.CNAME{Hdr: dns.RR_Header{Name: q.Name, Rrtype: dns.TypeCNAME, Class: dns.ClassINET, Ttl: 3600}, Target: "target.example."})
		m.Ns = append(m.Ns, soa(600, 30))
		if q.Name == "cname-nx.example." {
			m.Answer[0].Header().Ttl = 10
			m.Ns[0] = soa(600, 300)
			m.Rcode = dns.RcodeNameError
		}
	case "cname-nosoa.example.":
		m.Answer = append(m.Answer, &dns.CNAME{Hdr: dns.RR_Header{Name: q.Name, Rrtype: dns.TypeCNAME, Class: dns.ClassINET, Ttl: 3600}, Target: "target.example."})
	case "nx.example.":
		m.Rcode = dns.RcodeNameError
		m.Ns = append(m.Ns, soa(600, 30))
	case "nodata.example.":
		m.Ns = append(m.Ns, soa(20, 300))
	case "nosoa.example.":
		m.Rcode = dns.RcodeNameError
	default:
		m.Rcode = f.rcode
	}
	w.WriteMsg(m)
}

func serve(t *testing.T, f *fake) string {
	t.Helper()
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	up := make(chan struct{})
	srv := &dns.Server{PacketConn: pc, Handler: f, NotifyStartedFunc: func() { close(up) }}
	go srv.ActivateAndServe()
	<-up
	t.Cleanup(func() { srv.Shutdown() })
	return pc.LocalAddr().String()
}

type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

func TestCacheTTLs(t *testing.T) {
	f := &fake{rcode: dns.RcodeServerFailure}
	clk := &clock{now: time.Unix(1000, 0)}
	r := New(Config{Servers: []string{serve(t, f)}, Now: clk.Now, MaxTTL: time.Hour, FailureTTL: 5 * time.Second, Timeout: 500 * time.Millisecond})
	ctx := context.Background()
	res := func(name string) (*dns.Msg, error) { return r.Resolve(ctx, name, dns.TypeA, dns.ClassINET) }

	m, err := res("a.example")
	if err != nil || len(m.Answer) != 2 {
		t.Fatalf("a.example: %v %v", m, err)
	}
	clk.add(20 * time.Second)
	m, _ = res("A.EXAMPLE.")
	if f.hits.Load() != 1 {
		t.Fatalf("hits %d, want 1", f.hits.Load())
	}
	if ttl := m.Answer[0].Header().Ttl; ttl != 80 {
		t.Fatalf("TTL after 20s = %d, want 80", ttl)
	}
	clk.add(30 * time.Second) // past the smallest TTL (50)
	res("a.example")
	if f.hits.Load() != 2 {
		t.Fatalf("expired entry not refreshed: hits %d", f.hits.Load())
	}

	// RFC 2308 §5: negative TTL = min(SOA TTL, MINIMUM).
	for _, tt := range []struct {
		name  string
		ttl   time.Duration
		rcode int
	}{{"nx.example", 30 * time.Second, dns.RcodeNameError}, {"nodata.example", 20 * time.Second, dns.RcodeSuccess}} {
		h := f.hits.Load()
		m, err := res(tt.name)
		if err != nil || m.Rcode != tt.rcode {
			t.Fatalf("%s: %v %v", tt.name, m, err)
		}
		clk.add(tt.ttl - time.Second)
		res(tt.name)
		if f.hits.Load() != h+1 {
			t.Fatalf("%s not cached negatively", tt.name)
		}
		clk.add(2 * time.Second)
		res(tt.name)
		if f.hits.Load() != h+2 {
			t.Fatalf("%s cached past its negative TTL", tt.name)
		}
	}
	// Without SOA a negative answer is not cached.
	h := f.hits.Load()
	res("nosoa.example")
	res("nosoa.example")
	if f.hits.Load() != h+2 {
		t.Fatal("negative answer without SOA was cached")
	}
	// MaxTTL caps huge TTLs.
	res("long.example")
	h = f.hits.Load()
	clk.add(time.Hour + time.Second)
	res("long.example")
	if f.hits.Load() != h+1 {
		t.Fatal("TTL not capped at MaxTTL")
	}
	// SERVFAIL from the only server: a failure, remembered for FailureTTL.
	h = f.hits.Load()
	if _, err := res("broken.example"); !errors.Is(err, ErrFailed) {
		t.Fatalf("broken: %v, want ErrFailed", err)
	}
	if _, err := res("broken.example"); !errors.Is(err, ErrFailed) || f.hits.Load() != h+1 {
		t.Fatalf("failure not cached: %v hits %d", err, f.hits.Load()-h)
	}
	clk.add(6 * time.Second)
	res("broken.example")
	if f.hits.Load() != h+2 {
		t.Fatal("failure cached past FailureTTL")
	}
	if n := r.Clear("a.example."); n != 1 {
		t.Fatalf("Clear = %d", n)
	}
	st := r.Stats()
	if st.CacheHits == 0 || st.CacheMisses == 0 || st.Failures == 0 {
		t.Fatalf("stats %+v", st)
	}
}

// The TTLs handed out are capped at MaxTTL, as unbound's cache-max-ttl
// caps them, on the miss, on a cache hit and in the fast path's wire
// template: a cached entry dies after MaxTTL, so a client told more
// would keep the answer longer than the node does. A TTL with its top
// bit set is 0 (RFC 2181 §8): passed on, not cached.
func TestServedTTLsCappedAtMaxTTL(t *testing.T) {
	f := &fake{}
	clk := &clock{now: time.Unix(1000, 0)}
	r := New(Config{Servers: []string{serve(t, f)}, Now: clk.Now, MaxTTL: time.Hour})
	ctx := context.Background()
	m, err := r.Resolve(ctx, "long.example", dns.TypeA, dns.ClassINET)
	if err != nil || m.Answer[0].Header().Ttl != 3600 {
		t.Fatalf("miss: %v %v; want TTL 3600", m, err)
	}
	clk.add(10 * time.Second)
	m, err = r.Resolve(ctx, "long.example", dns.TypeA, dns.ClassINET)
	if err != nil || m.Answer[0].Header().Ttl != 3590 || f.hits.Load() != 1 {
		t.Fatalf("hit: %v %v (hits %d); want TTL 3590 from the cache", m, err, f.hits.Load())
	}
	wk, _ := WireKey("long.example.", dns.TypeA)
	tpl, ok := r.Template([]byte(wk), clk.Now())
	if !ok || len(tpl.TTLs) != 1 || tpl.TTLs[0] != 3600 {
		t.Fatalf("template: %v %+v; want one TTL of 3600", ok, tpl)
	}
	for range 2 {
		m, err = r.Resolve(ctx, "msb.example", dns.TypeA, dns.ClassINET)
		if err != nil || m.Answer[0].Header().Ttl != 0 {
			t.Fatalf("TTL with the top bit set: %v %v; want 0", m, err)
		}
	}
	if f.hits.Load() != 3 {
		t.Fatalf("hits %d, want 3: a TTL of 0 is not cached", f.hits.Load())
	}
}

// A CNAME whose target has no record of the type (NODATA) or does not
// exist (NXDOMAIN) is cached for the shortest of the CNAME's TTL and the
// negative TTL, min(SOA TTL, MINIMUM) (RFC 2308 §5), as unbound caches
// it: a NODATA behind a day-long CNAME lived a day, not the target
// zone's 30 s, and a short CNAME outlived its TTL behind an NXDOMAIN.
func TestCNAMEToNegativeCachedForShortestTTL(t *testing.T) {
	for _, tt := range []struct {
		name  string
		qtype uint16
		ttl   time.Duration
	}{{"cname-nodata.example", dns.TypeAAAA, 30 * time.Second}, {"cname-nx.example", dns.TypeA, 10 * time.Second}} {
		t.Run(tt.name, func(t *testing.T) {
			f := &fake{}
			clk := &clock{now: time.Unix(1000, 0)}
			r := New(Config{Servers: []string{serve(t, f)}, Now: clk.Now})
			res := func() {
				t.Helper()
				if _, err := r.Resolve(context.Background(), tt.name, tt.qtype, dns.ClassINET); err != nil {
					t.Fatal(err)
				}
			}
			res()
			clk.add(tt.ttl - time.Second)
			res()
			if f.hits.Load() != 1 {
				t.Fatalf("hits %d before %v; want 1 (cached)", f.hits.Load(), tt.ttl)
			}
			clk.add(2 * time.Second)
			res()
			if f.hits.Load() != 2 {
				t.Fatalf("hits %d after %v; want 2 (expired)", f.hits.Load(), tt.ttl)
			}
		})
	}
}

func TestFailover(t *testing.T) {
	good := &fake{}
	bad := &fake{refuse: true}
	r := New(Config{Servers: []string{serve(t, bad), serve(t, good)}})
	m, err := r.Resolve(context.Background(), "a.example", dns.TypeA, dns.ClassINET)
	if err != nil || len(m.Answer) != 2 || bad.hits.Load() != 1 || good.hits.Load() != 1 {
		t.Fatalf("failover: %v %v (bad %d good %d)", m, err, bad.hits.Load(), good.hits.Load())
	}
	if _, err := New(Config{}).Resolve(context.Background(), "a.example", dns.TypeA, dns.ClassINET); !errors.Is(err, ErrNoServers) {
		t.Fatalf("no servers: %v", err)
	}
}

// An upstream that answers FORMERR, NOTIMP or BADVERS speaks of our
// query, not of the name: the next server is asked, as after SERVFAIL
// or REFUSED, and the client never gets that RCODE as if its own query
// were malformed (unbound answers SERVFAIL when no server does better).
func TestFailoverOnRcodesAboutTheQuery(t *testing.T) {
	for _, rcode := range []int{dns.RcodeFormatError, dns.RcodeNotImplemented, dns.RcodeBadVers} {
		t.Run(strconv.Itoa(rcode), func(t *testing.T) {
			bad := &fake{rcode: rcode, edns: true}
			good := &fake{}
			r := New(Config{Servers: []string{serve(t, bad), serve(t, good)}})
			m, err := r.Resolve(context.Background(), "a.example", dns.TypeA, dns.ClassINET)
			if err != nil || m.Rcode != dns.RcodeSuccess || len(m.Answer) != 2 || good.hits.Load() != 1 {
				t.Fatalf("got %v %v (good server asked %d times); want the good server's answer", m, err, good.hits.Load())
			}
			only := New(Config{Servers: []string{serve(t, bad)}})
			if m, err := only.Resolve(context.Background(), "a.example", dns.TypeA, dns.ClassINET); !errors.Is(err, ErrFailed) {
				t.Fatalf("only that server: %v %v; want ErrFailed (SERVFAIL)", m, err)
			}
		})
	}
}

func TestLRUBound(t *testing.T) {
	f := &fake{}
	r := New(Config{Servers: []string{serve(t, f)}, CacheSize: 2})
	for _, n := range []string{"a.example", "b.example", "c.example", "a.example"} {
		r.Resolve(context.Background(), n, dns.TypeA, dns.ClassINET)
	}
	if f.hits.Load() != 4 || r.Stats().CacheEntries != 2 {
		t.Fatalf("hits %d entries %d, want 4 and 2 (a evicted)", f.hits.Load(), r.Stats().CacheEntries)
	}
}

func TestConcurrentMissesShareOneQuery(t *testing.T) {
	f := &fake{gate: make(chan struct{})}
	r := New(Config{Servers: []string{serve(t, f)}, Timeout: 5 * time.Second})
	var wg sync.WaitGroup
	errs := make(chan error, 10)
	for i := 0; i < 10; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := r.Resolve(context.Background(), "a.example", dns.TypeA, dns.ClassINET)
			errs <- err
		}()
	}
	deadline := time.Now().Add(5 * time.Second)
	tick := time.NewTicker(time.Millisecond)
	for f.hits.Load() == 0 && time.Now().Before(deadline) {
		<-tick.C // poll for the first query to arrive
	}
	tick.Stop()
	close(f.gate)
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if f.hits.Load() != 1 {
		t.Fatalf("hits %d, want 1", f.hits.Load())
	}
}

func TestSystemServers(t *testing.T) {
	p := filepath.Join(t.TempDir(), "resolv.conf")
	os.WriteFile(p, []byte("nameserver 127.0.0.1\nnameserver 10.0.0.53\nnameserver ::1\n"), 0o600)
	got, err := SystemServers(p, []string{"0.0.0.0:53"})
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"10.0.0.53:53"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("SystemServers = %q, want %q", got, want)
	}
	for _, self := range []string{":53", "[::]:53", "localhost:53"} {
		got, _ := SystemServers(p, []string{self})
		if len(got) >= 3 || contains(got, "127.0.0.1:53") {
			t.Fatalf("self %s: %q still lists the node itself", self, got)
		}
	}
	got, _ = SystemServers(p, []string{"127.0.0.1:7753"})
	if len(got) != 3 {
		t.Fatalf("different port filtered: %q", got)
	}
	// A listener on every address is also reached at the host's own
	// interface addresses.
	if addrs, _ := net.InterfaceAddrs(); len(addrs) > 0 {
		for _, a := range addrs {
			n, ok := a.(*net.IPNet)
			if !ok || n.IP.IsLoopback() || n.IP.To4() == nil {
				continue
			}
			own := n.IP.String() + ":53"
			if !IsSelf(own, []string{":53"}) || IsSelf(own, []string{"127.0.0.1:53"}) {
				t.Fatalf("IsSelf(%s) wrong for listeners :53 / 127.0.0.1:53", own)
			}
			break
		}
	}
	if _, err := SystemServers(filepath.Join(t.TempDir(), "none"), nil); err == nil {
		t.Fatal("missing file accepted")
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// waitHits polls f until it has answered n queries.
func waitHits(t *testing.T, f *fake, n int64) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for f.hits.Load() < n {
		if time.Now().After(deadline) {
			t.Fatalf("upstream hits %d, want %d", f.hits.Load(), n)
		}
		time.Sleep(time.Millisecond) // polling interval
	}
}

// An answer in flight when the name is cleared is not cached, and a
// question asked after the clear does not join the query sent before it.
func TestClearDuringFlight(t *testing.T) {
	resolve := func(r *Resolver) <-chan error {
		done := make(chan error, 1)
		go func() {
			_, err := r.Resolve(context.Background(), "a.example", dns.TypeA, dns.ClassINET)
			done <- err
		}()
		return done
	}
	// gated is a fake whose answers wait for release; a failing test
	// releases it too, so the server can shut down.
	gated := func(t *testing.T) (*fake, *Resolver, func()) {
		f := &fake{gate: make(chan struct{})}
		var once sync.Once
		release := func() { once.Do(func() { close(f.gate) }) }
		r := New(Config{Servers: []string{serve(t, f)}, Timeout: 5 * time.Second})
		t.Cleanup(release) // runs before serve's Shutdown
		return f, r, release
	}
	t.Run("not cached", func(t *testing.T) {
		f, r, release := gated(t)
		first := resolve(r)
		waitHits(t, f, 1)
		r.Clear("A.example")
		release()
		if err := <-first; err != nil {
			t.Fatal(err)
		}
		if err := <-resolve(r); err != nil {
			t.Fatal(err)
		}
		if f.hits.Load() != 2 {
			t.Fatalf("hits %d, want 2: the answer fetched before the clear was cached", f.hits.Load())
		}
	})
	t.Run("not joined", func(t *testing.T) {
		f, r, release := gated(t)
		first := resolve(r)
		waitHits(t, f, 1)
		r.Purge()
		second := resolve(r)
		waitHits(t, f, 2) // a query of its own
		release()
		for _, c := range []<-chan error{first, second} {
			if err := <-c; err != nil {
				t.Fatal(err)
			}
		}
		if err := <-resolve(r); err != nil { // the second answer is cached
			t.Fatal(err)
		}
		if f.hits.Load() != 2 {
			t.Fatalf("hits %d, want 2", f.hits.Load())
		}
	})
}

// Datagrams that are not the answer to our question — too short to
// parse, garbage, the query itself echoed (QR clear), or a response
// with our id for another name — are what an off-path attacker sprays
// at our port in the upstream's name. They are ignored and the real
// answer that follows is taken (RFC 5452 §9.1, as unbound and Knot
// Resolver do); miekg/dns's client gave up at the first datagram that
// did not parse, so one spoofed packet made the server look dead (and
// the failure was cached).
func TestJunkBeforeTheAnswerIgnored(t *testing.T) {
	pc := udpUpstream(t, func(q *dns.Msg, raw []byte) [][]byte {
		other := new(dns.Msg).SetReply(q)
		other.Question[0].Name = "evil.example."
		other.Answer = []dns.RR{&dns.A{Hdr: dns.RR_Header{Name: "evil.example.", Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: 100}, A: net.IPv4(203, 0, 113, 66)}}
		good := new(dns.Msg).SetReply(q)
		good.Answer = []dns.RR{&dns.A{Hdr: dns.RR_Header{Name: q.Question[0].Name, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: 100}, A: net.IPv4(192, 0, 2, 1)}}
		out := [][]byte{{1, 2, 3}, append(raw[:2:2], make([]byte, 30)...)} // a runt; our id, then garbage
		for _, m := range []*dns.Msg{q.Copy(), other, good} {              // the query echoed, another name, the answer
			b, _ := m.Pack()
			out = append(out, b)
		}
		return out
	})
	r := New(Config{Servers: []string{pc.LocalAddr().String()}, Timeout: 2 * time.Second})
	m, err := r.Resolve(context.Background(), "a.example", dns.TypeA, dns.ClassINET)
	if err != nil || len(m.Answer) != 1 || m.Answer[0].(*dns.A).A.String() != "192.0.2.1" {
		t.Fatalf("got %v %v; want the real answer, 192.0.2.1", m, err)
	}
}

// An answer over UDP larger than the size the query asked for (a server
// that ignores EDNS's) arrives cut and cannot be read: it is asked again
// over TCP at once, as a truncated one is, not waited on until the
// timeout.
func TestOversizeUDPAnswerAskedOverTCP(t *testing.T) {
	big := func(q *dns.Msg) *dns.Msg {
		m := new(dns.Msg).SetReply(q)
		for i := range 8 {
			m.Answer = append(m.Answer, &dns.TXT{Hdr: dns.RR_Header{Name: q.Question[0].Name, Rrtype: dns.TypeTXT, Class: dns.ClassINET, Ttl: 60},
				Txt: []string{strings.Repeat(string(rune('a'+i)), 250)}})
		}
		return m
	}
	pc := udpUpstream(t, func(q *dns.Msg, _ []byte) [][]byte {
		b, _ := big(q).Pack() // over 2,000 bytes, whatever the query asked
		return [][]byte{b}
	})
	ln, err := net.Listen("tcp", pc.LocalAddr().String())
	if err != nil {
		t.Fatalf("TCP on the UDP port: %v", err)
	}
	srv := &dns.Server{Listener: ln, Handler: dns.HandlerFunc(func(w dns.ResponseWriter, q *dns.Msg) { _ = w.WriteMsg(big(q)) })}
	go func() { _ = srv.ActivateAndServe() }()
	t.Cleanup(func() { _ = srv.Shutdown() })
	r := New(Config{Servers: []string{pc.LocalAddr().String()}, Timeout: 5 * time.Second})
	start := time.Now()
	m, err := r.Resolve(context.Background(), "big.example", dns.TypeTXT, dns.ClassINET)
	if err != nil || len(m.Answer) != 8 {
		t.Fatalf("got %v %v; want the 8 TXT records over TCP", m, err)
	}
	if el := time.Since(start); el > 4*time.Second {
		t.Fatalf("answered after %v: the oversize datagram was waited past", el)
	}
}

// udpUpstream is a UDP upstream on 127.0.0.1 that answers each query it
// can parse with the datagrams answer gives (raw: the query as it came),
// in order.
func udpUpstream(t *testing.T, answer func(q *dns.Msg, raw []byte) [][]byte) net.PacketConn {
	t.Helper()
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pc.Close() })
	go func() {
		buf := make([]byte, 2048)
		for {
			n, from, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			q := new(dns.Msg)
			if q.Unpack(buf[:n]) != nil {
				continue
			}
			for _, b := range answer(q, buf[:n]) {
				_, _ = pc.WriteTo(b, from)
			}
		}
	}()
	return pc
}

// The SOA of a negative answer is handed out with its TTL capped at its
// MINIMUM (RFC 2308 §3, as unbound does): a client takes the negative
// TTL as min(SOA TTL, MINIMUM) and the MINIMUM is never counted down,
// so a SOA of TTL 600 and MINIMUM 30 served from a cache 20 s old told
// the client to keep the NXDOMAIN 30 s more, past the 10 s the node
// itself keeps it. On the miss, on a hit and in the wire template.
func TestNegativeSOATTLCappedAtMinimum(t *testing.T) {
	f := &fake{}
	clk := &clock{now: time.Unix(1000, 0)}
	r := New(Config{Servers: []string{serve(t, f)}, Now: clk.Now})
	soaTTL := func(m *dns.Msg) uint32 {
		t.Helper()
		if len(m.Ns) != 1 || m.Ns[0].Header().Rrtype != dns.TypeSOA {
			t.Fatalf("authority %v, want one SOA", m.Ns)
		}
		return m.Ns[0].Header().Ttl
	}
	cases := []struct {
		name      string
		miss, hit uint32 // the SOA's TTL on the miss and 10 s later
	}{{"nx.example", 30, 20}, {"nodata.example", 20, 10}}
	resolve := func(name string) *dns.Msg {
		t.Helper()
		m, err := r.Resolve(context.Background(), name, dns.TypeA, dns.ClassINET)
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	for _, tt := range cases {
		if got := soaTTL(resolve(tt.name)); got != tt.miss {
			t.Fatalf("%s on the miss: SOA TTL %d, want %d", tt.name, got, tt.miss)
		}
	}
	clk.add(10 * time.Second)
	for _, tt := range cases {
		if got := soaTTL(resolve(tt.name)); got != tt.hit {
			t.Fatalf("%s from the cache: SOA TTL %d, want %d", tt.name, got, tt.hit)
		}
	}
	wk, _ := WireKey("nx.example.", dns.TypeA)
	tpl, ok := r.Template([]byte(wk), clk.Now())
	if !ok || len(tpl.TTLs) != 1 || tpl.TTLs[0] != 30 {
		t.Fatalf("template: %v %+v; want the SOA's TTL stored as 30", ok, tpl)
	}
	if f.hits.Load() != 2 {
		t.Fatalf("hits %d, want 2", f.hits.Load())
	}
}

// A CNAME whose target has no record of the type and no SOA (a NODATA
// at the end of a chain, without the SOA that would give it a negative
// TTL) is not cached, as a NODATA without SOA is not (RFC 2308 §5): it
// was kept for the CNAME's hour as if it were an answer. The CNAME
// itself, asked for, is one.
func TestCNAMEToNodataWithoutSOANotCached(t *testing.T) {
	f := &fake{}
	r := New(Config{Servers: []string{serve(t, f)}})
	for range 2 {
		m, err := r.Resolve(context.Background(), "cname-nosoa.example", dns.TypeA, dns.ClassINET)
		if err != nil || len(m.Answer) != 1 {
			t.Fatalf("%v %v; want the CNAME", m, err)
		}
	}
	if f.hits.Load() != 2 {
		t.Fatalf("hits %d, want 2: a NODATA behind a CNAME without SOA was cached", f.hits.Load())
	}
	for range 2 {
		if _, err := r.Resolve(context.Background(), "cname-nosoa.example", dns.TypeCNAME, dns.ClassINET); err != nil {
			t.Fatal(err)
		}
	}
	if f.hits.Load() != 3 {
		t.Fatalf("hits %d, want 3: the CNAME asked for is an answer, cached", f.hits.Load())
	}
}

// A failure remembered for FailureTTL was the old servers' failure: the
// servers set after it (the operator replacing a dead upstream) are asked
// at once, also for a name whose failure on the old list ends after the
// change. They were SERVFAIL until the failure expired.
func TestNewServersForgetFailures(t *testing.T) {
	bad := &fake{refuse: true}
	good := &fake{}
	r := New(Config{Servers: []string{serve(t, bad)}, FailureTTL: time.Hour})
	ctx := context.Background()
	if _, err := r.Resolve(ctx, "a.example", dns.TypeA, dns.ClassINET); !errors.Is(err, ErrFailed) {
		t.Fatalf("on the refusing server: %v, want ErrFailed", err)
	}
	// A question in flight on the old list when it is replaced.
	slow := &fake{refuse: true, gate: make(chan struct{})}
	r.SetServers([]string{serve(t, slow)})
	done := make(chan error, 1)
	go func() {
		_, err := r.Resolve(ctx, "b.example", dns.TypeA, dns.ClassINET)
		done <- err
	}()
	waitHits(t, slow, 1)
	r.SetServers([]string{serve(t, good)})
	close(slow.gate)
	if err := <-done; !errors.Is(err, ErrFailed) {
		t.Fatalf("in flight on the old list: %v, want ErrFailed", err)
	}
	for _, name := range []string{"a.example", "b.example"} {
		if m, err := r.Resolve(ctx, name, dns.TypeA, dns.ClassINET); err != nil || len(m.Answer) != 2 {
			t.Fatalf("%s after the servers changed: %v %v, want the new server's answer", name, m, err)
		}
	}
	if good.hits.Load() != 2 {
		t.Fatalf("new server asked %d times, want 2", good.hits.Load())
	}
}

// A failure that came of one asker's own short deadline (PublicLookup,
// a diagnostic) is not remembered as the servers': the upstream was only
// slow for that asker. It was cached for FailureTTL, and every asker of
// the name got SERVFAIL, also one that had joined the query in flight.
func TestAskersDeadlineIsNotAFailure(t *testing.T) {
	f := &fake{gate: make(chan struct{})}
	var once sync.Once
	release := func() { once.Do(func() { close(f.gate) }) }
	r := New(Config{Servers: []string{serve(t, f)}, Timeout: 5 * time.Second, FailureTTL: time.Hour})
	t.Cleanup(release) // runs before serve's Shutdown

	short := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		defer cancel()
		_, err := r.Resolve(ctx, "a.example", dns.TypeA, dns.ClassINET)
		short <- err
	}()
	waitHits(t, f, 1)
	joined := make(chan error, 1)
	go func() {
		_, err := r.Resolve(context.Background(), "a.example", dns.TypeA, dns.ClassINET)
		joined <- err
	}()
	deadline := time.Now().Add(5 * time.Second)
	for r.Stats().CacheMisses < 2 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond) // polling interval: the second asker joins (or, on a slow machine, asks itself)
	}
	if err := <-short; err == nil {
		t.Fatal("the asker with the short deadline got an answer from a server that did not answer")
	}
	release()
	if err := <-joined; err != nil {
		t.Fatalf("the asker that joined the short one: %v, want the answer", err)
	}
	if m, err := r.Resolve(context.Background(), "a.example", dns.TypeA, dns.ClassINET); err != nil || len(m.Answer) != 2 {
		t.Fatalf("after the short asker: %v %v, want the answer", m, err)
	}
}
