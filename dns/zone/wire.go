package zone

import (
	"encoding/binary"
	"strings"

	"github.com/miekg/dns"
)

// Answer is a response body packed in wire format: every resource record
// after the question section, with owner names equal to the question
// written as a pointer to offset 12 (where the question's name starts in
// any response), so one Answer serves every spelling of the name and
// every subdomain of a p2p domain.
type Answer struct {
	Flags uint16 // AA and RCODE bits of the header
	An    uint16 // ANCOUNT
	Ns    uint16 // NSCOUNT (the SOA of a negative answer, RFC 2308)
	Ar    uint16 // ARCOUNT before our OPT (glue of an NS answer)
	Body  []byte
}

// Header flag bits (RFC 1035 §4.1.1).
const (
	flagQR = 0x8000
	flagAA = 0x0400
	flagTC = 0x0200
	flagRD = 0x0100
	flagRA = 0x0080
	flagZ  = 0x0040
	flagCD = 0x0010
)

func (t *Table) precompute(n *node) {
	if n.kind == KindP2P || n.kind == KindInternal {
		// An address node answers A and AAAA from its address and every
		// other type (and A or AAAA without such an address) with the same
		// NODATA, the node's SOA in authority: the question is copied from
		// the query, so one packed NODATA serves every such slot. Packing
		// it once instead of eight times made a compile of 1,000 domains
		// ~4x cheaper (a burst of claims compiles the table many times).
		nodata := t.pack(n, dns.TypeMX)
		for i, qt := range slotTypes {
			if (qt == dns.TypeA && n.ip4.IsValid()) || (qt == dns.TypeAAAA && n.ip6.IsValid()) {
				n.fast[i] = t.pack(n, qt)
			} else {
				n.fast[i] = nodata
			}
		}
		// The domain's own name is its zone's apex (apex.go).
		n.apexSOA, n.apexNS = t.pack(n, dns.TypeSOA), t.pack(n, dns.TypeNS)
		return
	}
	for i, qt := range slotTypes {
		n.fast[i] = t.pack(n, qt)
	}
	for qt := range n.rrs {
		if slot(qt) < 0 {
			if n.other == nil {
				n.other = map[uint16]*Answer{}
			}
			n.other[qt] = t.pack(n, qt)
		}
	}
}

// pack answers (n.name, qt) at build time; nil when the answer needs
// upstream (the slow path does that).
func (t *Table) pack(n *node, qt uint16) *Answer {
	res := t.answer(n, n.name, qt, 0)
	if res.Upstream {
		return nil
	}
	return t.packResult(res, n.name)
}

// packResult packs res: answer records owned by owner as a pointer to
// the question, every other owner name (and every authority record, such
// as a parent's SOA, whose owner is not the question's) in full.
func (t *Table) packResult(res Result, owner string) *Answer {
	a := &Answer{Flags: uint16(res.Rcode & 0xF)}
	if res.Authoritative {
		a.Flags |= flagAA
	}
	if t.buf == nil {
		t.buf = make([]byte, dns.MaxMsgSize)
	}
	buf := t.buf
	for i, sec := range [][]dns.RR{res.Answer, res.Ns, res.Extra} {
		for _, rr := range sec {
			off := len(a.Body)
			if i == 0 && strings.EqualFold(rr.Header().Name, owner) {
				a.Body = append(a.Body, 0xC0, 12)
			} else {
				m, err := dns.PackDomainName(rr.Header().Name, buf, 0, nil, false)
				if err != nil {
					return nil
				}
				a.Body = append(a.Body, buf[:m]...)
			}
			// Pack the record owned by the root (one zero byte) and keep
			// type, class, TTL, RDLENGTH and RDATA.
			c := dns.Copy(rr)
			c.Header().Name = "."
			m, err := dns.PackRR(c, buf, 0, nil, false)
			if err != nil || len(a.Body)+m > dns.MaxMsgSize {
				a.Body = a.Body[:off]
				return nil
			}
			a.Body = append(a.Body, buf[1:m]...)
			switch i {
			case 0:
				a.An++
			case 1:
				a.Ns++
			default:
				a.Ar++
			}
		}
	}
	a.Body = append([]byte(nil), a.Body...) // exact size, shared by all readers
	return a
}

// MinUDPSize is the payload every DNS client accepts (RFC 1035 §4.2.1).
const MinUDPSize = 512

// Query is a plain query as Parse read it from the packet.
type Query struct {
	Key    [256]byte // the question's name in wire format, lowercased
	KeyLen int
	QEnd   int    // offset just past the question
	Qtype  uint16 // the question's type (class is IN)
	Flags  uint16 // the query's header flags
	Limit  int    // largest answer the client takes
	EDNS   bool   // the query has a version 0 OPT record (bare, or with one COOKIE option)
	DO     bool   // its DO bit
	Miss   bool   // set by Answer: the name is not in the table at all

	// CookieOff and CookieLen locate the data of the query's COOKIE
	// option (RFC 7873; 8 or 16–40 bytes) in the packet; CookieLen is 0
	// without one. A query with a cookie is only answered when the caller
	// set OutCookie (the client cookie and our server cookie, dns/cookie)
	// and CookieOut: Write then adds it to the OPT record.
	CookieOff, CookieLen int
	OutCookie            [24]byte
	CookieOut            bool

	Kind Kind // set by Answer when it wrote an answer: the source of the name that answered
}

// Parse checks that req is a plain query — QR=0, OPCODE=QUERY, TC=0,
// Z=0, one question of class IN with an uncompressed name, no answer or
// authority records, at most an OPT that is bare or holds one
// well-formed COOKIE option — and reads it into q. maxSize is
// the server's limit for the transport. Parse never allocates.
func Parse(req []byte, maxSize int, q *Query) bool {
	if len(req) < 17 {
		return false
	}
	flags := binary.BigEndian.Uint16(req[2:])
	if flags&(flagQR|0x7800|flagTC|flagZ|0x000F) != 0 {
		return false
	}
	if binary.BigEndian.Uint16(req[4:]) != 1 || binary.BigEndian.Uint16(req[6:]) != 0 || binary.BigEndian.Uint16(req[8:]) != 0 {
		return false
	}
	ar := binary.BigEndian.Uint16(req[10:])
	if ar > 1 {
		return false
	}
	kn, off := 0, 12
	for {
		if off >= len(req) {
			return false
		}
		l := int(req[off])
		if l == 0 {
			q.Key[kn] = 0
			kn++
			off++
			break
		}
		if l > 63 || off+1+l > len(req) || kn+1+l >= 255 {
			return false // compression pointer, extended label or too long
		}
		q.Key[kn] = byte(l)
		for i := 1; i <= l; i++ {
			c := req[off+i]
			if 'A' <= c && c <= 'Z' {
				c += 32
			}
			q.Key[kn+i] = c
		}
		kn += 1 + l
		off += 1 + l
	}
	qend := off + 4
	if qend > len(req) {
		return false
	}
	if binary.BigEndian.Uint16(req[off+2:]) != dns.ClassINET {
		return false
	}
	q.KeyLen, q.QEnd, q.Qtype, q.Flags = kn, qend, binary.BigEndian.Uint16(req[off:]), flags
	q.Limit, q.EDNS, q.DO, q.Miss = maxSize, false, false, false
	q.CookieOff, q.CookieLen, q.CookieOut = 0, 0, false
	if ar == 1 {
		p := qend
		if len(req) < p+11 || req[p] != 0 || binary.BigEndian.Uint16(req[p+1:]) != dns.TypeOPT {
			return false
		}
		if req[p+5] != 0 || req[p+6] != 0 {
			return false // extended RCODE or EDNS version (BADVERS)
		}
		if rdlen := int(binary.BigEndian.Uint16(req[p+9:])); len(req) != p+11+rdlen {
			return false
		} else if rdlen > 0 {
			// One option, a COOKIE of a valid length; a malformed one
			// gets FORMERR on the slow path (RFC 7873 §5.2.2).
			if rdlen < 4 || binary.BigEndian.Uint16(req[p+11:]) != dns.EDNS0COOKIE {
				return false
			}
			ol := int(binary.BigEndian.Uint16(req[p+13:]))
			if 4+ol != rdlen || (ol != 8 && (ol < 16 || ol > 40)) {
				return false
			}
			q.CookieOff, q.CookieLen = p+15, ol
		}
		q.EDNS, q.DO = true, req[p+7]&0x80 != 0
		if sz := int(binary.BigEndian.Uint16(req[p+3:])); sz < q.Limit {
			q.Limit = max(sz, MinUDPSize)
		}
	} else {
		if len(req) != qend {
			return false
		}
		q.Limit = min(q.Limit, MinUDPSize)
	}
	return true
}

// Fast answers the query packet req into out from pre-packed answers and
// returns the response length, or 0 when the query is not for the fast
// path (anything unusual, a name not in the table, an answer that needs
// upstream or does not fit). maxSize is the server's limit for this
// transport (its EDNS UDP size for UDP); out must be at least that long.
// Fast never allocates.
func (t *Table) Fast(req, out []byte, maxSize int, ednsSize uint16) int {
	var q Query
	if !Parse(req, maxSize, &q) {
		return 0
	}
	return t.Answer(req, &q, out, ednsSize)
}

// Answer writes the pre-packed answer to the parsed query q, or returns
// 0 (and sets q.Miss when no name of the table covers the question).
func (t *Table) Answer(req []byte, q *Query, out []byte, ednsSize uint16) int {
	if q.CookieLen > 0 && !q.CookieOut {
		return 0 // the table makes no cookies (the server does)
	}
	key := q.Key[:q.KeyLen]
	n := t.nodes[string(key)]
	exact := n != nil
	if n == nil {
		if n = t.cover(key); n == nil {
			// (Common types only: the slow path owns the odd ones, e.g.
			// FORMERR for OPT, REFUSED for AXFR.)
			if t.nx != nil && slot(q.Qtype) >= 0 && isP2P(key) {
				// An unclaimed .p2p name: NXDOMAIN with the SOA (RFC
				// 2308), or NODATA for an empty non-terminal (RFC 8020).
				q.Kind = KindP2P
				a := t.nx
				if t.isENT(key) {
					a = t.entAns
				}
				return Write(req, q, out, a.Flags, a.An, a.Ns, a.Ar, a.Body, ednsSize)
			}
			q.Miss = true
			return 0
		}
	}
	t.touch(n)
	var a *Answer
	if s := slot(q.Qtype); s >= 0 {
		a = n.fast[s]
		if exact && n.apexSOA != nil {
			switch q.Qtype {
			case dns.TypeSOA:
				a = n.apexSOA
			case dns.TypeNS:
				a = n.apexNS
			}
		}
	} else if n.other != nil {
		a = n.other[q.Qtype]
	}
	if a == nil {
		return 0
	}
	q.Kind = n.kind
	return Write(req, q, out, a.Flags, a.An, a.Ns, a.Ar, a.Body, ednsSize)
}

// Write builds a response to q in out: the query's ID, RD and CD, QR and
// RA set, the given flag bits (AA, RCODE) and section counts, the query's
// own question bytes, body (every record after the question), and an OPT
// record when the query had one (with q.OutCookie when q.CookieOut). It
// returns 0 when the result would exceed q.Limit or out.
func Write(req []byte, q *Query, out []byte, flags, an, ns, ar uint16, body []byte, ednsSize uint16) int {
	total := q.QEnd + len(body)
	if q.EDNS {
		total += 11
		if q.CookieOut {
			total += 4 + len(q.OutCookie)
		}
	}
	if total > q.Limit || total > len(out) {
		return 0 // the slow path truncates
	}
	copy(out, req[:q.QEnd])
	binary.BigEndian.PutUint16(out[2:], flagQR|flagRA|q.Flags&(flagRD|flagCD)|flags)
	binary.BigEndian.PutUint16(out[6:], an)
	binary.BigEndian.PutUint16(out[8:], ns)
	w := q.QEnd + copy(out[q.QEnd:], body)
	if q.EDNS {
		binary.BigEndian.PutUint16(out[10:], ar+1)
		out[w] = 0
		binary.BigEndian.PutUint16(out[w+1:], dns.TypeOPT)
		binary.BigEndian.PutUint16(out[w+3:], ednsSize)
		out[w+5], out[w+6] = 0, 0
		out[w+7] = 0
		if q.DO {
			out[w+7] = 0x80 // RFC 3225 §3: copy DO
		}
		out[w+8] = 0
		binary.BigEndian.PutUint16(out[w+9:], 0)
		w += 11
		if q.CookieOut {
			binary.BigEndian.PutUint16(out[w-2:], uint16(4+len(q.OutCookie)))
			binary.BigEndian.PutUint16(out[w:], dns.EDNS0COOKIE)
			binary.BigEndian.PutUint16(out[w+2:], uint16(len(q.OutCookie)))
			w += 4 + copy(out[w+4:], q.OutCookie[:])
		}
	} else {
		binary.BigEndian.PutUint16(out[10:], ar)
	}
	return w
}
