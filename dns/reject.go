package dns

import (
	"encoding/binary"

	"github.com/miekg/dns"
)

// reject is the reply to a query the node will not answer, FORMERR or
// NOTIMP, as Knot writes it: the header (id, opcode and RD of the query,
// QR, rcode), the question when the query has one that parses, and an OPT
// when the whole query parses and carries one (RFC 6891 §7: a responder
// that speaks EDNS includes an OPT in its reply to a query with one,
// errors included). A query with an unknown opcode whose records do not
// parse is FORMERR, as Knot answers: the message is read before its
// opcode is judged.
func (s *Server) reject(raw []byte, dh dns.Header, rcode int) ([]byte, *dns.Msg) {
	// The walk first: it allocates nothing, so a flood of junk costs no
	// unpack.
	parsed := wellFormed(raw, dh)
	var req *dns.Msg
	if parsed {
		var err error
		req, err = unpackQuery(raw, dh)
		parsed = err == nil
	}
	if rcode == dns.RcodeNotImplemented && !parsed {
		rcode = dns.RcodeFormatError
	}
	resp := new(dns.Msg)
	resp.Id = dh.Id
	resp.Response = true
	resp.Opcode = int(dh.Bits>>11) & 0xF
	resp.RecursionDesired = dh.Bits&flagRD != 0
	resp.Rcode = rcode
	s.count(rcode)
	s.slowCnt.answers.add(SourceNone, rcode)
	if q, ok := rawQuestion(raw, dh); ok {
		resp.Question = []dns.Question{q}
	}
	if parsed {
		if opt := onlyOPT(req); opt != nil {
			resp.SetEdns0(s.cfg.UDPSize, opt.Do())
		}
	}
	b, err := resp.Pack()
	if err != nil {
		// A question miekg/dns read but cannot write back: the bare
		// header says as much.
		return headerOnly(raw, rcode), nil
	}
	return b, resp
}

// onlyOPT is the query's OPT when its additional section holds exactly
// one (two are malformed: no OPT in the reply, as Knot answers).
func onlyOPT(m *dns.Msg) *dns.OPT {
	var opt *dns.OPT
	for _, rr := range m.Extra {
		if o, ok := rr.(*dns.OPT); ok {
			if opt != nil {
				return nil
			}
			opt = o
		}
	}
	return opt
}

// rawQuestion reads the question of a query with one (QDCOUNT 1) from
// raw: its name must be uncompressed (it is the message's first name)
// and its type and class present.
func rawQuestion(raw []byte, dh dns.Header) (dns.Question, bool) {
	if dh.Qdcount != 1 {
		return dns.Question{}, false
	}
	end := skipName(raw, 12, false)
	if end < 0 || end+4 > len(raw) {
		return dns.Question{}, false
	}
	name, _, err := dns.UnpackDomainName(raw, 12)
	if err != nil {
		return dns.Question{}, false
	}
	return dns.Question{Name: name, Qtype: binary.BigEndian.Uint16(raw[end:]), Qclass: binary.BigEndian.Uint16(raw[end+2:])}, true
}

// wellFormed reports whether raw ends exactly after the questions and
// records its header counts, and its first question's name is
// uncompressed (whole, for any counts).
func wellFormed(raw []byte, dh dns.Header) bool {
	off := 12
	for i := 0; i < int(dh.Qdcount); i++ {
		off = skipName(raw, off, i > 0)
		if off < 0 || off+4 > len(raw) {
			return false
		}
		off += 4
	}
	for i := 0; i < int(dh.Ancount)+int(dh.Nscount)+int(dh.Arcount); i++ {
		off = skipName(raw, off, true)
		if off < 0 || off+10 > len(raw) {
			return false
		}
		off += 10 + int(binary.BigEndian.Uint16(raw[off+8:]))
	}
	return off == len(raw)
}

// unpackQuery reads raw as miekg/dns does, except for EDNS options the
// node does not act on. miekg/dns refuses a message whose OPT holds a
// known option it cannot read (a client-subnet option of the wrong
// length or an unknown family, a keepalive or expire option of the wrong
// length, ...). The node acts on one option only, COOKIE; every other is
// ignored (RFC 6891 §6.1.2), whatever it holds, as Knot ignores them: so
// when the message does not unpack and its OPT is sound as a record
// (options that tile its RDATA), it is read again with only its COOKIE
// options. A record that is itself malformed stays an error.
func unpackQuery(raw []byte, dh dns.Header) (*dns.Msg, error) {
	m := new(dns.Msg)
	err := m.Unpack(raw)
	if err == nil {
		return m, nil
	}
	b, ok := keepCookies(raw, dh)
	if !ok {
		return nil, err
	}
	m = new(dns.Msg)
	if err := m.Unpack(b); err != nil {
		return nil, err
	}
	return m, nil
}

// keepCookies is raw with the options of its OPT record but COOKIE
// removed; false when raw holds no OPT whose options tile its RDATA, or
// its sections do not end where the message ends.
func keepCookies(raw []byte, dh dns.Header) ([]byte, bool) {
	if !wellFormed(raw, dh) {
		return nil, false
	}
	off := 12
	for i := 0; i < int(dh.Qdcount); i++ {
		off = skipName(raw, off, i > 0) + 4
	}
	for i := 0; i < int(dh.Ancount)+int(dh.Nscount)+int(dh.Arcount); i++ {
		start := skipName(raw, off, true)
		rdlen := int(binary.BigEndian.Uint16(raw[start+8:]))
		rdata := raw[start+10 : start+10+rdlen]
		if binary.BigEndian.Uint16(raw[start:]) != dns.TypeOPT {
			off = start + 10 + rdlen
			continue
		}
		kept := make([]byte, 0, rdlen)
		for o := 0; o < len(rdata); {
			if o+4 > len(rdata) {
				return nil, false
			}
			end := o + 4 + int(binary.BigEndian.Uint16(rdata[o+2:]))
			if end > len(rdata) {
				return nil, false
			}
			if binary.BigEndian.Uint16(rdata[o:]) == dns.EDNS0COOKIE {
				kept = append(kept, rdata[o:end]...)
			}
			o = end
		}
		out := make([]byte, 0, len(raw))
		out = append(out, raw[:start+8]...)
		out = binary.BigEndian.AppendUint16(out, uint16(len(kept)))
		out = append(out, kept...)
		return append(out, raw[start+10+rdlen:]...), true
	}
	return nil, false
}
