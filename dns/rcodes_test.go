package dns

import (
	"testing"

	"github.com/miekg/dns"
)

// Answers are counted by RCODE on the fast path (UDP), the slow path and
// TCP alike.
func TestAnswersByRcode(t *testing.T) {
	pub, local := testSources(t)
	s := newTestServer(t, testConfig{Config: Config{Upstreams: []string{deadUpstream(t)}}}, pub, local)
	for _, q := range []struct {
		proto, name string
		qtype       uint16
	}{
		{"udp", "site.p2p.", dns.TypeA},    // fast NOERROR
		{"udp", "nobody.p2p.", dns.TypeA},  // fast NXDOMAIN
		{"udp", "a.local.", dns.TypeANY},   // slow NOERROR
		{"tcp", "nobody.p2p.", dns.TypeA},  // TCP NXDOMAIN
		{"udp", "site.p2p.", dns.TypeAXFR}, // slow REFUSED
		{"tcp", "pub.example.", dns.TypeA}, // dead upstream: SERVFAIL
	} {
		ask(t, q.proto, s.Addr(), q.name, q.qtype, false)
	}
	got := s.AnswersByRcode()
	want := map[string]int64{"NOERROR": 2, "NXDOMAIN": 2, "REFUSED": 1, "SERVFAIL": 1}
	for k, n := range want {
		if got[k] != n {
			t.Errorf("%s: %d, want %d (all: %v)", k, got[k], n, got)
		}
	}
	if len(got) != len(want) {
		t.Errorf("counted %v, want %v", got, want)
	}
}
