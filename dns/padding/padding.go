// Package padding is EDNS(0) Padding (RFC 7830) on the wire: whether a
// query asks for it, and an answer padded to a multiple of Block bytes
// (RFC 8467 §4.1's recommended block for responses). DoH (http/doh) and
// DoT (dns's stream server) pad their answers to padded queries with it;
// both work on the packed messages, without unpacking them.
package padding

import "encoding/binary"

// Block is the block a padded answer's length is a multiple of
// (RFC 8467 §4.1).
const Block = 468

const (
	typeOPT    = 41 // the OPT pseudo-record (RFC 6891)
	optPadding = 12 // the EDNS(0) Padding option (RFC 7830)
)

// Padded reports whether the DNS message q's OPT record carries the
// Padding option.
func Padded(q []byte) bool {
	o := optRecord(q)
	if o < 0 {
		return false
	}
	opts := q[o+2 : o+2+int(binary.BigEndian.Uint16(q[o:]))]
	for len(opts) >= 4 {
		if binary.BigEndian.Uint16(opts) == optPadding {
			return true
		}
		n := 4 + int(binary.BigEndian.Uint16(opts[2:]))
		if n > len(opts) {
			return false
		}
		opts = opts[n:]
	}
	return false
}

// Pad adds a Padding option to the OPT record of the DNS message reply,
// making it a multiple of Block bytes long (zero octets, RFC 7830
// §3). reply is returned as it is when it has no OPT record, when that
// is not its last record, or when padding would take it past
// a DNS message's 65,535 bytes.
func Pad(reply []byte) []byte {
	o := optRecord(reply)
	if o < 0 || o+2+int(binary.BigEndian.Uint16(reply[o:])) != len(reply) {
		return reply
	}
	total := (len(reply) + 4 + Block - 1) / Block * Block
	if total > 65535 {
		return reply
	}
	out := make([]byte, total) // the padding octets stay zero
	copy(out, reply)
	n := total - len(reply) - 4
	binary.BigEndian.PutUint16(out[o:], binary.BigEndian.Uint16(reply[o:])+uint16(4+n))
	binary.BigEndian.PutUint16(out[len(reply):], optPadding)
	binary.BigEndian.PutUint16(out[len(reply)+2:], uint16(n))
	return out
}

// optRecord is the offset of the RDLENGTH field of the first OPT record
// in the additional section of the DNS message b, whose data b holds
// whole; -1 when b has none or ends before it.
func optRecord(b []byte) int {
	if len(b) < 12 {
		return -1
	}
	off := 12
	for range binary.BigEndian.Uint16(b[4:]) { // questions
		if off = skipName(b, off); off < 0 || off+4 > len(b) {
			return -1
		}
		off += 4
	}
	before := int(binary.BigEndian.Uint16(b[6:])) + int(binary.BigEndian.Uint16(b[8:])) // answer and authority
	for i := range before + int(binary.BigEndian.Uint16(b[10:])) {
		if off = skipName(b, off); off < 0 || off+10 > len(b) {
			return -1
		}
		end := off + 10 + int(binary.BigEndian.Uint16(b[off+8:]))
		if end > len(b) {
			return -1
		}
		if i >= before && binary.BigEndian.Uint16(b[off:]) == typeOPT {
			return off + 8
		}
		off = end
	}
	return -1
}

// skipName is the offset after the name at off in b (a compression
// pointer ends it), or -1 when it runs past b or has a reserved label
// type.
func skipName(b []byte, off int) int {
	for off < len(b) {
		switch c := int(b[off]); {
		case c == 0:
			return off + 1
		case c&0xC0 == 0xC0:
			if off+2 > len(b) {
				return -1
			}
			return off + 2
		case c&0xC0 != 0:
			return -1
		default:
			off += 1 + c
		}
	}
	return -1
}
