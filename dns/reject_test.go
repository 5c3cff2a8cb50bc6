package dns

import (
	"net"
	"testing"

	"github.com/miekg/dns"
)

// rejectCase is a query the node does not answer as asked, and what its
// reply carries: the rcode, the question (when it parses) and an OPT
// (when the whole query parses and has one), as Knot writes them.
type rejectCase struct {
	name     string
	pkt      []byte
	rcode    int
	question bool
	opt      bool
	answered bool // the reply has answer records (an ignored option)
}

func rejectCases() []rejectCase {
	q := question("site.p2p.", dns.TypeA, dns.ClassINET)
	optWith := func(opts ...byte) []byte {
		return append([]byte{0, 0, 41, 4, 0xd0, 0, 0, 0, 0, byte(len(opts) >> 8), byte(len(opts))}, opts...)
	}
	opt := optWith()
	pkt := func(opcode int, ar uint16, tail ...[]byte) []byte {
		b := append(header(0x4242, uint16(opcode)<<11|flagRD, 1, 0, 0, ar), q...)
		for _, p := range tail {
			b = append(b, p...)
		}
		return b
	}
	return []rejectCase{
		// Opcodes other than QUERY (2 STATUS, 3 unassigned, 6 DSO, 15).
		{"opcode 2", pkt(2, 0), dns.RcodeNotImplemented, true, false, false},
		{"opcode 2 with OPT", pkt(2, 1, opt), dns.RcodeNotImplemented, true, true, false},
		{"opcode 3 with OPT", pkt(3, 1, opt), dns.RcodeNotImplemented, true, true, false},
		{"opcode 6 with OPT", pkt(6, 1, opt), dns.RcodeNotImplemented, true, true, false},
		{"opcode 15 with OPT", pkt(15, 1, opt), dns.RcodeNotImplemented, true, true, false},
		{"opcode 3, no question", header(0x4242, 3<<11, 0, 0, 0, 0), dns.RcodeNotImplemented, false, false, false},
		{"opcode 3, bytes after the OPT", pkt(3, 1, opt, []byte{1, 2}), dns.RcodeFormatError, true, false, false},
		// Known EDNS options the node does not act on, malformed: ignored.
		{"client subnet, 2 bytes", pkt(0, 1, optWith(0, 8, 0, 2, 0, 1)), dns.RcodeSuccess, true, true, true},
		{"client subnet, family 3", pkt(0, 1, optWith(0, 8, 0, 5, 0, 3, 8, 0, 10)), dns.RcodeSuccess, true, true, true},
		{"client subnet, prefix 33", pkt(0, 1, optWith(0, 8, 0, 9, 0, 1, 33, 0, 10, 0, 0, 0, 0)), dns.RcodeSuccess, true, true, true},
		{"tcp keepalive, 1 byte", pkt(0, 1, optWith(0, 11, 0, 1, 5)), dns.RcodeSuccess, true, true, true},
		{"expire, 2 bytes", pkt(0, 1, optWith(0, 9, 0, 2, 5, 5)), dns.RcodeSuccess, true, true, true},
		// A question that parses, an additional section that does not.
		{"OPT RDATA past the end", pkt(0, 1, []byte{0, 0, 41, 4, 0xd0, 0, 0, 0, 0, 0, 9, 0, 8}), dns.RcodeFormatError, true, false, false},
		{"OPT option past its RDATA", pkt(0, 1, optWith(0, 8, 0, 9, 0, 1)), dns.RcodeFormatError, true, false, false},
		{"a record cut short", pkt(0, 1, []byte{0, 0, 1, 0, 1, 0, 0}), dns.RcodeFormatError, true, false, false},
		{"a name with a reserved label type", pkt(0, 1, []byte{0x40, 1, 2}), dns.RcodeFormatError, true, false, false},
		{"OPT then a cut record", pkt(0, 2, opt, []byte{0xc0}), dns.RcodeFormatError, true, false, false},
		{"ARCOUNT 3, one OPT", pkt(0, 3, opt), dns.RcodeFormatError, true, false, false},
		{"OPT in the answer section", append(header(0x4242, 0, 1, 1, 0, 1), append(q, opt...)...), dns.RcodeFormatError, true, false, false},
		// No question, an OPT: FORMERR with the OPT.
		{"no question, OPT", append(header(0x4242, 0, 0, 0, 0, 1), opt...), dns.RcodeFormatError, false, true, false},
	}
}

// checkReject checks reply b to tc from who.
func checkReject(t *testing.T, who string, tc rejectCase, b []byte) {
	t.Helper()
	var m dns.Msg
	if err := m.Unpack(b); err != nil {
		t.Fatalf("%s: reply does not unpack: %v (%x)", who, err, b)
	}
	wantOp := int(tc.pkt[2]>>3) & 0xF
	if m.Id != 0x4242 || !m.Response || m.Opcode != wantOp || m.Rcode != tc.rcode {
		t.Errorf("%s: id %#x qr %v opcode %d rcode %s, want 0x4242, true, %d, %s", who, m.Id, m.Response, m.Opcode,
			dns.RcodeToString[m.Rcode], wantOp, dns.RcodeToString[tc.rcode])
	}
	if got := len(m.Question) == 1 && m.Question[0].Name == "site.p2p." && m.Question[0].Qtype == dns.TypeA; got != tc.question || len(m.Question) > 1 {
		t.Errorf("%s: question %v, want it: %v", who, m.Question, tc.question)
	}
	if got := m.IsEdns0() != nil; got != tc.opt {
		t.Errorf("%s: OPT %v, want %v", who, m.IsEdns0(), tc.opt)
	}
	if got := len(m.Answer) > 0; got != tc.answered {
		t.Errorf("%s: %d answers, want some: %v", who, len(m.Answer), tc.answered)
	}
}

// FORMERR and NOTIMP carry the question when it parses and an OPT when
// the whole query parses with one; malformed options the node does not
// act on are ignored. Raw bytes over UDP and TCP.
func TestRejectsCarryQuestionAndOPT(t *testing.T) {
	pub, local := knotSources(t)
	s := newTestServer(t, testConfig{Config: Config{Upstreams: []string{deadUpstream(t)}}}, pub, local)
	for _, tc := range rejectCases() {
		for _, proto := range []string{"udp", "tcp"} {
			t.Run(tc.name+"/"+proto, func(t *testing.T) {
				checkReject(t, "node", tc, exchangeRaw(t, proto, s.Addr(), tc.pkt))
			})
		}
	}
}

// The same queries get the same replies from Knot.
func TestRejectsLikeKnot(t *testing.T) {
	pub, local := knotSources(t)
	s := newTestServer(t, testConfig{Config: Config{Upstreams: []string{deadUpstream(t)}}}, pub, local)
	host, _, _ := net.SplitHostPort(s.Addr())
	knot := startKnot(t, knotZones(host))
	for _, tc := range rejectCases() {
		for _, proto := range []string{"udp", "tcp"} {
			t.Run(tc.name+"/"+proto, func(t *testing.T) {
				checkReject(t, "node", tc, exchangeRaw(t, proto, s.Addr(), tc.pkt))
				checkReject(t, "knot", tc, exchangeRaw(t, proto, knot, tc.pkt))
			})
		}
	}
}
