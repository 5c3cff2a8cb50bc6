package dns

import (
	"testing"

	"github.com/miekg/dns"
)

// Each question lands in its source's and rcode's counter, over UDP
// (fast path and slow path) and TCP, and upstream exchanges are timed.
func TestAnswerCountsBySourceAndRcode(t *testing.T) {
	up := startUpstream(t)
	pub, local := testSources(t)
	for _, single := range []bool{false, true} {
		s := newTestServer(t, testConfig{Config: Config{Upstreams: []string{up.addr}}, singleReads: single}, pub, local)
		type key struct {
			src   Source
			rcode int
		}
		want := map[key]int64{}
		for _, tt := range []struct {
			proto, name string
			qtype       uint16
			src         Source
			rcode       int
		}{
			{"udp", "site.p2p.", dns.TypeA, SourceP2P, dns.RcodeSuccess},
			{"udp", "unclaimed.p2p.", dns.TypeA, SourceP2P, dns.RcodeNameError},
			// The p2p zone's own apex (SOA, NS) and a NODATA at it: the p2p
			// zone's data, not "none" (answered before any data was read).
			{"udp", "p2p.", dns.TypeSOA, SourceP2P, dns.RcodeSuccess},
			{"tcp", "p2p.", dns.TypeNS, SourceP2P, dns.RcodeSuccess},
			{"udp", "p2p.", dns.TypeMX, SourceP2P, dns.RcodeSuccess},
			{"udp", "site.p2p.", dns.TypeSOA, SourceP2P, dns.RcodeSuccess},
			{"udp", "admin.p2p.", dns.TypeNS, SourceInternal, dns.RcodeSuccess},
			{"tcp", "unclaimed.p2p.", dns.TypeA, SourceP2P, dns.RcodeNameError},
			{"udp", "a.local.", dns.TypeA, SourceLocal, dns.RcodeSuccess},
			{"tcp", "txt.local.", dns.TypeTXT, SourceLocal, dns.RcodeSuccess},
			{"udp", "admin.p2p.", dns.TypeA, SourceInternal, dns.RcodeSuccess},
			{"udp", "pub.example.", dns.TypeA, SourceUpstream, dns.RcodeSuccess},
			{"udp", "pub.example.", dns.TypeA, SourceCache, dns.RcodeSuccess}, // now cached
			{"udp", "nothing.example.", dns.TypeA, SourceUpstream, dns.RcodeNameError},
			{"udp", "pub.example.", dns.TypeAXFR, SourceNone, dns.RcodeRefused},
		} {
			m := ask(t, tt.proto, s.Addr(), tt.name, tt.qtype, false)
			if m.Rcode != tt.rcode {
				t.Fatalf("%s %s %s: rcode %s, want %s", tt.proto, tt.name, dns.TypeToString[tt.qtype], dns.RcodeToString[m.Rcode], dns.RcodeToString[tt.rcode])
			}
			want[key{tt.src, tt.rcode}]++
		}
		// EDNS version 1: BADVERS (RFC 6891 §6.1.3), an extended rcode with
		// its own slot.
		bv := new(dns.Msg)
		bv.SetQuestion("a.local.", dns.TypeA)
		bv.SetEdns0(1232, false)
		bv.IsEdns0().SetVersion(1)
		m, _, err := new(dns.Client).Exchange(bv, s.Addr())
		if err != nil || m.Rcode != dns.RcodeBadVers {
			t.Fatalf("EDNS version 1: %v, rcode %v", err, m)
		}
		want[key{SourceNone, dns.RcodeBadVers}]++
		got := map[key]int64{}
		for _, c := range s.AnswerCounts() {
			got[key{c.Source, c.Rcode}] = c.Count
		}
		for k, n := range want {
			if got[k] != n {
				t.Errorf("singleReads=%v: answers{source=%s, rcode=%s} = %d, want %d (all: %v)", single, k.src, dns.RcodeToString[k.rcode], got[k], n, got)
			}
		}
		if len(got) != len(want) {
			t.Errorf("singleReads=%v: counted %v, want exactly %v", single, got, want)
		}
		lat := s.UpstreamLatency()
		if lat.Count < 2 || lat.Sum <= 0 || lat.Cumulative[5] > lat.Count {
			t.Errorf("upstream latency = %+v, want two exchanges or more", lat)
		}
	}
}
