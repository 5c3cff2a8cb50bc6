package dns

import (
	"context"
	"fmt"
	"log/slog"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"

	"peerdns/internal/testutil"
)

func newLoggedServer(t *testing.T, cfg Config, single bool) (*Server, *testutil.LogBuffer) {
	t.Helper()
	pub, local := testSources(t)
	logs := &testutil.LogBuffer{}
	cfg.Addr = "127.0.0.1:0"
	cfg.Upstreams = []string{deadUpstream(t)}
	cfg.UpstreamTimeout = 200 * time.Millisecond
	s, err := New(cfg, pub, local, slog.New(slog.NewTextHandler(logs, nil)))
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
		_ = s.Shutdown(ctx)
	})
	return s, logs
}

// The query log is off by default (nothing counted, nothing logged);
// on, it counts every answered query per client over UDP (fast and slow
// path) and TCP, and logs them on the server's logger.
func TestQueryLog(t *testing.T) {
	for _, single := range []bool{false, true} {
		t.Run(fmt.Sprintf("singleReads=%v", single), func(t *testing.T) {
			s, logs := newLoggedServer(t, Config{}, single)
			askFrom(t, "udp", netip.MustParseAddr("127.0.0.1"), s.Addr(), "a.local.", dns.TypeA)
			if c, _, _ := s.QueryClients(0); len(c) != 0 || strings.Contains(logs.String(), "msg=query") {
				t.Fatalf("query log off: clients %v, log %s", c, logs.String())
			}
			s.SetQueryLog(true)
			askFrom(t, "udp", netip.MustParseAddr("127.0.0.1"), s.Addr(), "a.local.", dns.TypeA)      // fast
			askFrom(t, "udp", netip.MustParseAddr("127.0.0.1"), s.Addr(), "txt.site.p2p.", dns.TypeA) // local under p2p, A: fallback to the p2p domain
			askFrom(t, "tcp", netip.MustParseAddr("127.0.0.1"), s.Addr(), "a.local.", dns.TypeA)      // tcp
			askFrom(t, "udp", netip.MustParseAddr("127.0.0.2"), s.Addr(), "nope.example.", dns.TypeA) // slow: dead upstream
			testutil.Eventually(t, 5*time.Second, func() error {
				c, _, _ := s.QueryClients(0)
				want := []ClientCount{{"127.0.0.1", 3}, {"127.0.0.2", 1}}
				if fmt.Sprint(c) != fmt.Sprint(want) {
					return fmt.Errorf("clients %v, want %v", c, want)
				}
				for _, l := range []string{"name=a.local. type=A rcode=NOERROR answers=2 client=127.0.0.1 path=fast",
					"path=tcp", "name=nope.example. type=A rcode=SERVFAIL answers=0 client=127.0.0.2 path=slow"} {
					if !strings.Contains(logs.String(), l) {
						return fmt.Errorf("log has no %q:\n%s", l, logs.String())
					}
				}
				return nil
			})
		})
	}
}

// More queries than the log's budget: every one is counted, at most
// QueryLogRate are logged in that second, and a line says how many were
// left out.
func TestQueryLogRateLimit(t *testing.T) {
	s, logs := newLoggedServer(t, Config{QueryLog: true}, false)
	const n = 2*QueryLogRate + 10 // under miekg/dns's 128 queries per TCP connection
	c := &dns.Client{Net: "tcp", Timeout: 3 * time.Second}
	conn, err := c.Dial(s.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	start := time.Now()
	for i := 0; i < n; i++ {
		q := new(dns.Msg)
		q.SetQuestion("a.local.", dns.TypeA)
		if _, _, err := c.ExchangeWithConn(q, conn); err != nil {
			t.Fatal(err)
		}
	}
	testutil.Eventually(t, 5*time.Second, func() error {
		if cl, _, _ := s.QueryClients(0); len(cl) != 1 || cl[0].Queries != n {
			return fmt.Errorf("clients %v, want 127.0.0.1: %d", cl, n)
		}
		if !strings.Contains(logs.String(), "lines left out") {
			return fmt.Errorf("no rate-limit line yet")
		}
		return nil
	})
	lines := strings.Count(logs.String(), "msg=query ")
	// The budget refills every second: the run may span a refill or two.
	if limit := QueryLogRate * (2 + int(time.Since(start)/time.Second)); lines > limit || lines < QueryLogRate {
		t.Fatalf("%d query lines for %d queries, want between %d and %d", lines, n, QueryLogRate, limit)
	}
}
