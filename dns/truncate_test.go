package dns

import (
	"net"
	"testing"

	"github.com/miekg/dns"
)

// An answer whose additional records do not all fit the client's UDP
// size is sent without them and without TC (RFC 2181 §9: TC is not set
// merely because extra information was left out), as Knot and unbound
// do; TC would send every such client to TCP for data it does not need.
// Answer records that do not fit still set TC.
func TestNoTCForAdditionalOnly(t *testing.T) {
	h := dns.HandlerFunc(func(w dns.ResponseWriter, req *dns.Msg) {
		m := new(dns.Msg).SetReply(req)
		m.RecursionAvailable = true
		q := req.Question[0]
		switch q.Name {
		case "mx.example.":
			for i := 0; i < 2; i++ {
				m.Answer = append(m.Answer, &dns.MX{Hdr: dns.RR_Header{Name: q.Name, Rrtype: dns.TypeMX, Class: dns.ClassINET, Ttl: 300},
					Preference: uint16(10 * i), Mx: "mail" + string(rune('a'+i)) + ".example."})
			}
			for i := 0; i < 40; i++ {
				m.Extra = append(m.Extra, &dns.A{Hdr: dns.RR_Header{Name: "maila.example.", Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: 300},
					A: net.IPv4(192, 0, 2, byte(i+1))})
			}
		case "many.example.":
			for i := 0; i < 60; i++ {
				m.Answer = append(m.Answer, &dns.A{Hdr: dns.RR_Header{Name: q.Name, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: 300},
					A: net.IPv4(192, 0, 2, byte(i+1))})
			}
		}
		m.Compress = true
		w.WriteMsg(m)
	})
	pc, ln := listenPair(t)
	for _, srv := range []*dns.Server{{PacketConn: pc, Handler: h}, {Listener: ln, Handler: h}} {
		started := make(chan struct{})
		srv.NotifyStartedFunc = func() { close(started) }
		go srv.ActivateAndServe()
		<-started
		t.Cleanup(func() { srv.Shutdown() })
	}
	pub, local := testSources(t)
	s := newTestServer(t, testConfig{Config: Config{Upstreams: []string{pc.LocalAddr().String()}}}, pub, local)
	for _, edns := range []bool{false, true} {
		m := ask(t, "udp", s.Addr(), "mx.example.", dns.TypeMX, edns)
		if m.Truncated || len(m.Answer) != 2 {
			t.Errorf("mx.example. MX (edns %v): want both MX records without TC, got TC=%v with %d answers, %d additional",
				edns, m.Truncated, len(m.Answer), len(m.Extra))
		}
		if edns && m.IsEdns0() == nil {
			t.Errorf("mx.example. MX: the OPT record was left out")
		}
		m = ask(t, "udp", s.Addr(), "many.example.", dns.TypeA, edns)
		if !edns && (!m.Truncated || len(m.Answer) == 60) {
			t.Errorf("many.example. A (edns %v): want TC without the whole RRset, got TC=%v with %d answers", edns, m.Truncated, len(m.Answer))
		}
	}
}
