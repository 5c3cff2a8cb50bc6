package dns

import (
	"fmt"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/miekg/dns"

	"peerdns/dns/zone"
)

type testClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *testClock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *testClock) add(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// TestCachedAnswersFastPath: once an upstream answer is cached, the fast
// path answers it from the wire template exactly as the slow path would
// (records, TTLs counted down, flags, OPT), and leaves alone what it must.
func TestCachedAnswersFastPath(t *testing.T) {
	up := startUpstream(t)
	pub, local := testSources(t)
	clk := &testClock{now: time.Unix(1_000_000, 0)}
	s := newTestServer(t, testConfig{Config: Config{Upstreams: []string{up.addr}, Now: clk.Now}}, pub, local)

	type qcase struct {
		name  string
		qtype uint16
		edns  bool
		do    bool
		fast  bool
	}
	cases := []qcase{
		{"pub.example.", dns.TypeA, false, false, true},
		{"PUB.Example.", dns.TypeA, true, true, true},
		{"pub.example.", dns.TypeAAAA, true, false, true}, // NODATA with SOA
		{"gone.example.", dns.TypeA, false, false, true},  // NXDOMAIN with SOA
		{"big.example.", dns.TypeTXT, true, false, false}, // does not fit: slow path truncates
		{"pubpref.p2p.", dns.TypeA, false, false, false},  // a p2p domain with preference public: the table decides
		{"tie.p2p.", dns.TypeA, false, false, false},      // unresolved p2p: SERVFAIL rule on the slow path
	}
	pack := func(c qcase) []byte {
		m := new(dns.Msg).SetQuestion(c.name, c.qtype)
		m.Id = 777
		if c.edns {
			m.SetEdns0(1232, c.do)
		}
		b, err := m.Pack()
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	// Fill the cache through the real server.
	for _, c := range cases {
		ask(t, "udp", s.Addr(), c.name, c.qtype, c.edns)
	}
	out := make([]byte, 1232)
	for _, step := range []time.Duration{0, 10 * time.Second} {
		clk.add(step)
		for _, c := range cases {
			t.Run(fmt.Sprintf("%s/%s/edns=%v/+%v", c.name, dns.TypeToString[c.qtype], c.edns, step), func(t *testing.T) {
				req := pack(c)
				var q zone.Query
				n := s.fast(s.Table(), req, &q, out, 1232, loopback, &shard{})
				if (n > 0) != c.fast {
					t.Fatalf("fast path answered = %v, want %v", n > 0, c.fast)
				}
				if n == 0 {
					return
				}
				var fm, sm dns.Msg
				if err := fm.Unpack(out[:n]); err != nil {
					t.Fatalf("fast answer does not unpack: %v", err)
				}
				if err := sm.Unpack(slowReply(s, req)); err != nil {
					t.Fatal(err)
				}
				fm.Compress, sm.Compress = false, false
				// Owner names may differ in case: the template points
				// them at the client's question, the slow path keeps the
				// upstream's spelling (names compare case-insensitively).
				if fm.Question[0] != sm.Question[0] || !strings.EqualFold(fm.String(), sm.String()) {
					t.Fatalf("fast and slow differ:\nfast:\n%v\nslow:\n%v", &fm, &sm)
				}
				if step > 0 && len(fm.Answer)+len(fm.Ns) > 0 {
					var rr dns.RR
					if len(fm.Answer) > 0 {
						rr = fm.Answer[0]
					} else {
						rr = fm.Ns[0]
					}
					// (A negative answer's SOA, TTL 600 and MINIMUM 60, is
					// handed out with its TTL capped at the MINIMUM.)
					if want := map[string]uint32{"A": 290, "SOA": 50}[dns.TypeToString[rr.Header().Rrtype]]; rr.Header().Ttl != want {
						t.Fatalf("TTL after 10s = %d, want %d", rr.Header().Ttl, want)
					}
				}
			})
		}
	}
	// Expired entries are not served from the template; cleared names
	// neither.
	clk.add(time.Hour)
	var q zone.Query
	if n := s.fast(s.Table(), pack(cases[0]), &q, out, 1232, loopback, &shard{}); n != 0 {
		t.Fatal("expired template answered")
	}
	ask(t, "udp", s.Addr(), "pub.example.", dns.TypeA, false) // refresh
	if n := s.fast(s.Table(), pack(cases[0]), &q, out, 1232, loopback, &shard{}); n == 0 {
		t.Fatal("refreshed entry not on the fast path")
	}
	if _, err := s.ClearCache("pub.example"); err != nil {
		t.Fatal(err)
	}
	if n := s.fast(s.Table(), pack(cases[0]), &q, out, 1232, loopback, &shard{}); n != 0 {
		t.Fatal("cleared name still answered from its template")
	}
	// Over the wire, the second ask of a cached name is a fast answer.
	ask(t, "udp", s.Addr(), "pub.example.", dns.TypeA, false)
	before := s.Stats().FastAnswers
	m := ask(t, "udp", s.Addr(), "Pub.Example.", dns.TypeA, true)
	if got := rdata(m); !reflect.DeepEqual(got, []string{"A 203.0.113.7"}) || m.Question[0].Name != "Pub.Example." || m.Answer[0].Header().Name != "Pub.Example." {
		t.Fatalf("cached answer over UDP: %v", m)
	}
	if s.Stats().FastAnswers != before+1 {
		t.Fatal("cached answer did not take the fast path")
	}
}

func TestCachedAnswerAllocs(t *testing.T) {
	up := startUpstream(t)
	s := newTestServer(t, testConfig{Config: Config{Upstreams: []string{up.addr}}}, nil, nil)
	ask(t, "udp", s.Addr(), "pub.example.", dns.TypeA, false)
	req, _ := new(dns.Msg).SetQuestion("pub.example.", dns.TypeA).Pack()
	out := make([]byte, 1232)
	var q zone.Query
	tab := s.Table()
	sh := &shard{}
	allocs := testing.AllocsPerRun(200, func() {
		if s.fast(tab, req, &q, out, 1232, loopback, sh) == 0 {
			t.Fatal("not answered from the cache")
		}
	})
	if allocs != 0 {
		t.Fatalf("cached fast answer allocates %v times, want 0", allocs)
	}
}
