package dns

import (
	"encoding/binary"

	"github.com/miekg/dns"
)

// DoT padding (RFC 7830, RFC 8467): an answer over TLS to a query that
// carries the EDNS(0) Padding option is padded to a multiple of padBlock
// bytes, as unbound (pad-responses) and Knot pad theirs on encrypted
// transports; plain TCP and UDP answers are never padded (padding hides
// nothing there), and DoH pads its own (http/doh). Padded queries never
// take the stream fast path (zone.Parse accepts no option but COOKIE),
// so padding costs the fast path nothing.

// padBlock is the block length RFC 8467 §4.1 recommends for responses.
const padBlock = 468

// queryPadded reports whether the well-formed query raw has an OPT
// record holding the Padding option.
func queryPadded(raw []byte) bool {
	if len(raw) < 12 {
		return false
	}
	dh := dns.Header{Qdcount: binary.BigEndian.Uint16(raw[4:]), Ancount: binary.BigEndian.Uint16(raw[6:]),
		Nscount: binary.BigEndian.Uint16(raw[8:]), Arcount: binary.BigEndian.Uint16(raw[10:])}
	if !wellFormed(raw, dh) {
		return false
	}
	off := 12
	for i := 0; i < int(dh.Qdcount); i++ {
		off = skipName(raw, off, i > 0) + 4
	}
	for i := 0; i < int(dh.Ancount)+int(dh.Nscount)+int(dh.Arcount); i++ {
		start := skipName(raw, off, true)
		rdata := raw[start+10 : start+10+int(binary.BigEndian.Uint16(raw[start+8:]))]
		off = start + 10 + len(rdata)
		if binary.BigEndian.Uint16(raw[start:]) != dns.TypeOPT {
			continue
		}
		for len(rdata) >= 4 {
			if binary.BigEndian.Uint16(rdata) == dns.EDNS0PADDING {
				return true
			}
			n := 4 + int(binary.BigEndian.Uint16(rdata[2:]))
			if n > len(rdata) {
				return false
			}
			rdata = rdata[n:]
		}
	}
	return false
}

// padReply is the reply m, whose packed form is b, packed again with a
// Padding option that makes it a multiple of padBlock bytes (zero
// octets, RFC 7830 §3); b when m has no OPT record or the padded reply
// would not fit in a DNS message.
func padReply(m *dns.Msg, b []byte) []byte {
	opt := m.IsEdns0()
	if opt == nil {
		return b
	}
	total := (len(b) + 4 + padBlock - 1) / padBlock * padBlock
	if total > dns.MaxMsgSize {
		return b
	}
	opt.Option = append(opt.Option, &dns.EDNS0_PADDING{Padding: make([]byte, total-len(b)-4)})
	p, err := m.Pack()
	if err != nil {
		opt.Option = opt.Option[:len(opt.Option)-1]
		return b
	}
	return p
}
