package dns

import (
	"context"
	"encoding/binary"
	"errors"
	"net/netip"
	"strings"

	"github.com/miekg/dns"

	"peerdns/dns/upstream"
	"peerdns/dns/zone"
)

// accept screens a query by its header before exchange unpacks it:
// responses are ignored, opcodes other than QUERY not implemented, and
// counts no query has are malformed (one question; authority holds at
// most an IXFR query's SOA; additional an OPT and at most one more).
func accept(dh dns.Header) dns.MsgAcceptAction {
	if dh.Bits&flagQR != 0 {
		return dns.MsgIgnore // a response: never answer (no reflection loops)
	}
	if int(dh.Bits>>11)&0xF != dns.OpcodeQuery {
		return dns.MsgRejectNotImplemented
	}
	if dh.Qdcount != 1 || dh.Ancount != 0 || dh.Nscount > 1 || dh.Arcount > 2 {
		return dns.MsgReject
	}
	return dns.MsgAccept
}

const (
	flagQR = 0x8000
	flagRD = 0x0100
)

// headerOnly is a reply with just a header: id, opcode and RD of the
// query, QR set, and rcode.
func headerOnly(raw []byte, rcode int) []byte {
	out := make([]byte, 12)
	copy(out, raw[:2])
	flags := binary.BigEndian.Uint16(raw[2:])
	binary.BigEndian.PutUint16(out[2:], flagQR|flags&(0x7800|flagRD)|uint16(rcode&0xF))
	return out
}

// handleRaw is the UDP slow path: checks, unpack, answer, pack. nil means
// no reply (not a query, or not even a header). recurse says whether the
// client gets recursion.
func (s *Server) handleRaw(ctx context.Context, raw []byte, recurse bool, client netip.Addr) ([]byte, bool) {
	b, _, proven := s.exchange(ctx, raw, false, recurse, client)
	return b, proven
}

// exchange answers the query in raw: the packed reply, and the reply as
// a message when it is more than a bare header, and whether the query
// carried a valid server cookie. stream is true for transports without
// the UDP size limit (DoH, DoT: 64 KiB).
func (s *Server) exchange(ctx context.Context, raw []byte, stream, recurse bool, client netip.Addr) ([]byte, *dns.Msg, bool) {
	if len(raw) < 12 {
		s.slowCnt.dropped.Add(1)
		return nil, nil, false
	}
	var dh dns.Header
	dh.Id = binary.BigEndian.Uint16(raw)
	dh.Bits = binary.BigEndian.Uint16(raw[2:])
	dh.Qdcount = binary.BigEndian.Uint16(raw[4:])
	dh.Ancount = binary.BigEndian.Uint16(raw[6:])
	dh.Nscount = binary.BigEndian.Uint16(raw[8:])
	dh.Arcount = binary.BigEndian.Uint16(raw[10:])
	switch accept(dh) {
	case dns.MsgIgnore:
		s.slowCnt.dropped.Add(1)
		return nil, nil, false
	case dns.MsgRejectNotImplemented:
		b, m := s.reject(raw, dh, dns.RcodeNotImplemented)
		return b, m, false
	case dns.MsgReject:
		if dh.Qdcount == 0 && dh.Ancount == 0 && dh.Nscount == 0 && dh.Arcount == 1 {
			if b, m, ok := s.cookieOnly(raw, dh, stream, recurse, client); ok {
				return b, m, false
			}
		}
		b, m := s.reject(raw, dh, dns.RcodeFormatError)
		return b, m, false
	}
	req, err := unpackQuery(raw, dh)
	if err != nil {
		b, m := s.reject(raw, dh, dns.RcodeFormatError)
		return b, m, false
	}
	var resp *dns.Msg
	proven := false
	if whole(raw, int(dh.Nscount)+int(dh.Arcount)) {
		resp, proven = s.answer(ctx, req, stream, recurse, client)
	} else {
		// Bytes after the last record, or fewer records than the
		// header counts: miekg/dns reads the message as if they were not
		// there; Knot and BIND answer FORMERR, and so do we (with the
		// question, as they do). A compressed question name too
		// (Knot drops it; the fast path leaves it to this one).
		resp = new(dns.Msg)
		resp.SetReply(req)
		resp.RecursionAvailable = recurse
		s.fail(resp, req, dns.RcodeFormatError)
	}
	b, err := resp.Pack()
	if err != nil {
		s.logError("dns pack reply", err)
		s.slowCnt.servfail.Add(1)
		return headerOnly(raw, dns.RcodeServerFailure), nil, false
	}
	return b, resp, proven
}

// cookieOnly answers a query without a question whose one record is an
// OPT (version 0) with a COOKIE option: a client asking for a server
// cookie (RFC 7873 §5.4), as BIND answers it: NOERROR with the client's
// cookie and a fresh server cookie, and nothing else (FORMERR for a
// malformed cookie, BADCOOKIE as answer gives it). false: not such a
// query, which is malformed.
func (s *Server) cookieOnly(raw []byte, dh dns.Header, stream, recurse bool, client netip.Addr) ([]byte, *dns.Msg, bool) {
	if !wellFormed(raw, dh) {
		return nil, nil, false
	}
	req, err := unpackQuery(raw, dh)
	if err != nil || len(req.Extra) != 1 {
		return nil, nil, false
	}
	opt, ok := req.Extra[0].(*dns.OPT)
	if !ok || opt.Version() != 0 {
		return nil, nil, false
	}
	st := s.readCookie(opt, client.Unmap())
	if !st.present && !st.malformed {
		return nil, nil, false
	}
	resp := new(dns.Msg)
	resp.SetReply(req)
	resp.RecursionAvailable = recurse
	switch {
	case st.malformed:
		s.fail(resp, req, dns.RcodeFormatError) // RFC 7873 §5.2.2
		resp = s.finish(resp, opt, dns.MaxMsgSize, nil)
	case st.bad && !stream && !recurse:
		s.fail(resp, req, dns.RcodeBadCookie)
		resp = s.finish(resp, opt, dns.MaxMsgSize, &st)
	default:
		s.slowCnt.answers.add(SourceNone, dns.RcodeSuccess)
		resp = s.finish(resp, opt, dns.MaxMsgSize, &st)
	}
	b, err := resp.Pack()
	if err != nil {
		return nil, nil, false
	}
	return b, resp, true
}

// whole reports whether raw, a query that accept let through (one
// question, no answer records), ends exactly after its question and n
// authority and additional records, and whether its question's name
// is uncompressed: it is the message's first name, so a pointer in it
// points into the header or forward (RFC 1035 §4.1.4 allows only a
// prior occurrence). Other names are only stepped over: a compression
// pointer ends one (Unpack has checked where they point).
func whole(raw []byte, n int) bool {
	off := skipName(raw, 12, false)
	if off < 0 {
		return false
	}
	off += 4
	for i := 0; i < n; i++ {
		off = skipName(raw, off, true)
		if off < 0 || off+10 > len(raw) {
			return false
		}
		off += 10 + int(binary.BigEndian.Uint16(raw[off+8:]))
	}
	return off == len(raw)
}

// skipName returns the offset after the name at off in b, or -1 when
// it runs past the end, has a label type other than a length or (when
// ptr) a pointer.
func skipName(b []byte, off int, ptr bool) int {
	for off >= 0 && off < len(b) {
		switch c := int(b[off]); {
		case c == 0:
			return off + 1
		case c&0xC0 == 0xC0 && ptr:
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

// answer builds the reply to a well-formed query: from the table, else
// upstream when the client gets recursion (recurse), else REFUSED;
// truncated to the client's UDP size (UDP) or 64 KiB (TCP). client is
// the client's address (its server cookie is made for it); proven says
// the query carried a valid server cookie (cookies.go).
func (s *Server) answer(ctx context.Context, req *dns.Msg, tcp, recurse bool, client netip.Addr) (_ *dns.Msg, proven bool) {
	resp := new(dns.Msg)
	resp.SetReply(req)
	resp.RecursionAvailable = recurse
	resp.CheckingDisabled = req.CheckingDisabled
	if len(req.Question) != 1 || len(req.Answer) != 0 || (len(req.Ns) != 0 && req.Question[0].Qtype != dns.TypeIXFR) {
		// (An IXFR query carries the client's SOA in authority, RFC
		// 1995 §3: it is refused below, like AXFR.)
		return s.fail(resp, req, dns.RcodeFormatError), false
	}
	// EDNS0 (RFC 6891): one OPT at most, version 0.
	var opt *dns.OPT
	for _, rr := range req.Extra {
		if o, ok := rr.(*dns.OPT); ok {
			if opt != nil {
				return s.fail(resp, req, dns.RcodeFormatError), false
			}
			opt = o
		}
	}
	limit := zone.MinUDPSize
	if opt != nil {
		if opt.Version() != 0 {
			resp.SetEdns0(s.cfg.UDPSize, opt.Do())
			s.slowCnt.formerr.Add(1)
			s.slowCnt.answers.add(SourceNone, dns.RcodeBadVers)
			resp.Rcode = dns.RcodeBadVers
			return resp, false
		}
		limit = max(min(int(opt.UDPSize()), int(s.cfg.UDPSize)), zone.MinUDPSize)
	}
	if tcp {
		limit = dns.MaxMsgSize
	}
	var ck *cookieState
	if opt != nil {
		st := s.readCookie(opt, client.Unmap())
		if st.malformed {
			return s.finish(s.fail(resp, req, dns.RcodeFormatError), opt, limit, nil), false // RFC 7873 §5.2.2
		}
		ck, proven = &st, st.proven
		if st.bad && !tcp && !recurse {
			// A server cookie that is not ours from a UDP client outside
			// the ACL: BADCOOKIE with a fresh one, no data (cookies.go).
			return s.finish(s.fail(resp, req, dns.RcodeBadCookie), opt, limit, ck), false
		}
	}
	q := req.Question[0]
	switch q.Qtype {
	case dns.TypeAXFR, dns.TypeIXFR:
		// We hold no zone to transfer.
		return s.finish(s.fail(resp, req, dns.RcodeRefused), opt, limit, ck), proven
	case dns.TypeOPT, dns.TypeTSIG, dns.TypeTKEY, 0:
		return s.finish(s.fail(resp, req, dns.RcodeFormatError), opt, limit, ck), proven
	}
	if q.Qclass == 0 {
		// Class 0 is reserved (RFC 6895 §3.2), and it is what miekg/dns
		// reads from a question cut before its class: either way the
		// question is malformed.
		return s.finish(s.fail(resp, req, dns.RcodeFormatError), opt, limit, ck), proven
	}
	t := s.current()
	res := t.Resolve(q.Name, q.Qtype, q.Qclass)
	if res.Upstream && !recurse {
		if len(res.Answer) == 0 {
			// Only recursion would answer this, and this client gets none
			// (RFC 5358: no open resolvers).
			s.slowCnt.recursionRefused.Add(1)
			return s.finish(s.fail(resp, req, dns.RcodeRefused), opt, limit, ck), proven
		}
		// A local CNAME that leaves our data: give what we hold, as an
		// authoritative server does; the client follows the chain itself.
		res.Upstream = false
	}
	resp.Authoritative = res.Authoritative
	resp.Rcode = res.Rcode
	resp.Answer = res.Answer
	resp.Ns = res.Ns
	resp.Extra = res.Extra
	if q.Qtype == dns.TypeANY && !tcp && len(res.Answer) > 1 && !res.Upstream {
		// ANY over UDP: one RRset of the name (RFC 8482 §4.1), the one
		// of the lowest type, as Knot answers; the rest would go to a
		// source nobody has proven.
		resp.Answer = leastRRset(res.Answer)
		if resp.Answer[0].Header().Rrtype != dns.TypeNS {
			resp.Extra = nil // glue is for an NS answer
		}
	}
	if res.Upstream {
		if q.Qclass != dns.ClassINET && q.Qclass != dns.ClassANY {
			return s.finish(s.fail(resp, req, dns.RcodeRefused), opt, limit, ck), proven
		}
		s.slowCnt.upstream.Add(1)
		m, err := s.up.Resolve(ctx, res.UpstreamName, q.Qtype, dns.ClassINET)
		switch {
		case err != nil:
			if !errors.Is(err, upstream.ErrNoServers) {
				s.logError("dns upstream", err)
			}
			resp.Answer = nil
			resp.Authoritative = false
			resp.Rcode = dns.RcodeServerFailure
		case res.ServfailOnNegative && (m.Rcode != dns.RcodeSuccess || len(m.Answer) == 0):
			resp.Answer = nil
			resp.Authoritative = false
			resp.Rcode = dns.RcodeServerFailure
		default:
			resp.Rcode = m.Rcode
			resp.Answer = append(resp.Answer, m.Answer...)
			if len(res.Answer) == 0 {
				resp.Authoritative = false
				resp.Ns = m.Ns
				resp.Extra = m.Extra
			}
		}
	}
	s.count(resp.Rcode)
	s.slowCnt.answers.add(resultSource(res), resp.Rcode)
	return s.finish(resp, opt, limit, ck), proven
}

// leastRRset is the RRset of the lowest type among the records of rrs
// owned by the first one's owner (the question's name; a CNAME chain's
// later names are left out).
func leastRRset(rrs []dns.RR) []dns.RR {
	owner, typ := rrs[0].Header().Name, rrs[0].Header().Rrtype
	for _, rr := range rrs[1:] {
		if h := rr.Header(); h.Rrtype < typ && strings.EqualFold(h.Name, owner) {
			typ = h.Rrtype
		}
	}
	var out []dns.RR
	for _, rr := range rrs {
		if h := rr.Header(); h.Rrtype == typ && strings.EqualFold(h.Name, owner) {
			out = append(out, rr)
		}
	}
	return out
}

func (s *Server) fail(resp, req *dns.Msg, rcode int) *dns.Msg {
	resp.Rcode = rcode
	resp.Answer, resp.Ns, resp.Extra = nil, nil, nil
	s.count(rcode)
	s.slowCnt.answers.add(SourceNone, rcode)
	return resp
}

func (s *Server) count(rcode int) {
	switch rcode {
	case dns.RcodeNameError:
		s.slowCnt.nxdomain.Add(1)
	case dns.RcodeServerFailure:
		s.slowCnt.servfail.Add(1)
	case dns.RcodeFormatError:
		s.slowCnt.formerr.Add(1)
	case dns.RcodeRefused:
		s.slowCnt.refused.Add(1)
	case dns.RcodeNotImplemented:
		s.slowCnt.notimp.Add(1)
	}
}

// finish adds our OPT when the query had one (with the reply's cookie,
// ck) and truncates to limit: TC is set when answer or authority records
// had to go; additional records that do not fit are left out without it
// (RFC 2181 §9), as Knot and unbound answer (miekg/dns's Truncate sets
// TC for those too). A truncated reply keeps only the whole RRsets that
// fit, and no authority records after an answer cut short (miekg/dns's
// Truncate keeps every record that fits, splitting an RRset).
func (s *Server) finish(resp *dns.Msg, opt *dns.OPT, limit int, ck *cookieState) *dns.Msg {
	if opt != nil {
		resp.SetEdns0(s.cfg.UDPSize, opt.Do())
		addCookie(resp, ck)
	}
	an, ns := resp.Answer, resp.Ns
	resp.Truncate(limit)
	if len(resp.Answer) == len(an) && len(resp.Ns) == len(ns) {
		resp.Truncated = false
		return resp
	}
	resp.Answer = wholeRRsets(an, len(resp.Answer))
	if len(resp.Answer) < len(an) {
		resp.Ns = nil
	} else {
		resp.Ns = wholeRRsets(ns, len(resp.Ns))
	}
	return resp
}

// wholeRRsets is rrs[:n] without the records of an RRset that rrs[n]
// (the first record left out) belongs to.
func wholeRRsets(rrs []dns.RR, n int) []dns.RR {
	if n >= len(rrs) {
		return rrs
	}
	cut := rrs[n].Header()
	for n > 0 {
		h := rrs[n-1].Header()
		if h.Rrtype != cut.Rrtype || h.Class != cut.Class || !strings.EqualFold(h.Name, cut.Name) {
			break
		}
		n--
	}
	return rrs[:n]
}
