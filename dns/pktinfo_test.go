package dns

import (
	"fmt"
	"net"
	"net/netip"
	"testing"

	"github.com/miekg/dns"
)

// With the server bound to 0.0.0.0, a UDP reply leaves from the address
// the query was sent to: a client whose socket is connected to
// 127.0.0.2 (and so drops datagrams from any other source) gets its
// answer, on the fast path and the slow path, batched or not.
func TestReplyFromQueriedAddress(t *testing.T) {
	if !havePktinfo {
		t.Skip("replies from the queried address are wired up on Linux only")
	}
	if c, err := net.ListenPacket("udp", "127.0.0.2:0"); err != nil {
		t.Skipf("127.0.0.2 is not usable here (Linux routes all of 127.0.0.0/8 to lo): %v", err)
	} else {
		c.Close()
	}
	for _, single := range []bool{false, true} {
		t.Run(fmt.Sprintf("singleReads=%v", single), func(t *testing.T) {
			pub, local := testSources(t)
			s := newTestServer(t, testConfig{Config: Config{Addr: "0.0.0.0:0", Upstreams: []string{deadUpstream(t)}}, singleReads: single}, pub, local)
			_, port, _ := net.SplitHostPort(s.Addr())
			for _, dst := range []string{"127.0.0.1", "127.0.0.2"} {
				for _, src := range []string{"127.0.0.3", "127.0.0.4"} {
					addr := net.JoinHostPort(dst, port)
					if m := askFrom(t, "udp", netip.MustParseAddr(src), addr, "a.local.", dns.TypeA); len(m.Answer) == 0 {
						t.Fatalf("fast path via %s from %s: %v", dst, src, m)
					}
					// Slow path: a name only the (dead) upstream knows.
					if m := askFrom(t, "udp", netip.MustParseAddr(src), addr, "nope.example.", dns.TypeA); m.Rcode != dns.RcodeServerFailure {
						t.Fatalf("slow path via %s from %s: %v", dst, src, m)
					}
				}
			}
		})
	}
}

// Bound to [::] (dual stack), replies reach clients on ::1 and, through
// IPv4-mapped addresses, on 127.0.0.1 and 127.0.0.2.
func TestReplyFromQueriedAddressIPv6(t *testing.T) {
	if !havePktinfo {
		t.Skip("replies from the queried address are wired up on Linux only")
	}
	if c, err := net.ListenPacket("udp", "[::1]:0"); err != nil {
		t.Skipf("no IPv6 loopback here: %v", err)
	} else {
		c.Close()
	}
	pub, local := testSources(t)
	s := newTestServer(t, testConfig{Config: Config{Addr: "[::]:0", Upstreams: []string{deadUpstream(t)}}}, pub, local)
	_, port, _ := net.SplitHostPort(s.Addr())
	for _, tt := range []struct{ dst, src string }{{"::1", "::1"}, {"127.0.0.1", "127.0.0.3"}, {"127.0.0.2", "127.0.0.3"}} {
		if m := askFrom(t, "udp", netip.MustParseAddr(tt.src), net.JoinHostPort(tt.dst, port), "a.local.", dns.TypeA); len(m.Answer) == 0 {
			t.Fatalf("via %s from %s: %v", tt.dst, tt.src, m)
		}
	}
}
