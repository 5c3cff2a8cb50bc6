package zone

import (
	"net"
	"strings"

	"github.com/miekg/dns"
)

// Result is what the node's own data says about one question.
type Result struct {
	Kind          Kind // which source answered (0: none, go upstream)
	Rcode         int
	Authoritative bool
	Answer        []dns.RR // owner names already set to the question's name
	Ns            []dns.RR // authority: the SOA of a negative answer (negative.go)
	Extra         []dns.RR // additional: the name server's address with an NS answer of p2p. (apex.go)

	// Upstream asks the caller to resolve (UpstreamName, qtype) upstream
	// and append that answer to Answer (Answer may hold a CNAME chain
	// that left local data).
	Upstream     bool
	UpstreamName string
	// ServfailOnNegative: the name is a p2p domain the ledger has not
	// resolved; a negative public answer becomes SERVFAIL (see README).
	ServfailOnNegative bool
}

// Resolve answers (qname, qtype, qclass) from the table. qname is any
// case, with or without the trailing dot.
func (t *Table) Resolve(qname string, qtype, qclass uint16) Result {
	qname = dns.Fqdn(qname)
	k, ok := Key(qname)
	if !ok {
		return Result{Rcode: dns.RcodeRefused}
	}
	n := t.find(k)
	if n != nil {
		t.touch(n)
	}
	switch qclass {
	case dns.ClassINET, dns.ClassANY:
		return t.answer(n, qname, qtype, 0)
	case dns.ClassCHAOS:
		if n == nil || n.kind != KindLocal || len(n.ch) == 0 {
			return Result{Rcode: dns.RcodeRefused}
		}
		res := Result{Kind: KindLocal, Authoritative: true}
		own := appendOwned
		if n.wild {
			own = appendAs
		}
		if qtype == dns.TypeANY {
			for _, rrs := range n.ch {
				res.Answer = own(res.Answer, rrs, qname)
			}
		} else {
			res.Answer = own(res.Answer, n.ch[qtype], qname)
		}
		return res
	}
	return Result{Rcode: dns.RcodeRefused}
}

func (t *Table) answer(n *node, qname string, qtype uint16, depth int) Result {
	if n == nil {
		if k, ok := Key(qname); ok && isP2P([]byte(k)) {
			if t.isENT([]byte(k)) {
				return t.entP2P()
			}
			return t.nxP2P()
		}
		return Result{Upstream: true, UpstreamName: qname}
	}
	res := Result{Kind: n.kind}
	switch n.kind {
	case KindZone:
		res.Authoritative = true
		if qtype == dns.TypeANY {
			for _, typ := range sortedTypes(n.rrs) {
				res.Answer = appendOwned(res.Answer, n.rrs[typ], qname)
			}
		} else {
			res.Answer = appendOwned(res.Answer, n.rrs[qtype], qname)
		}
		if len(res.Answer) == 0 {
			res.Ns = []dns.RR{t.soa(P2PZone, t.serial())}
		} else if qtype == dns.TypeNS || qtype == dns.TypeANY {
			res.Extra = t.glue(n.name)
		}
		return res
	case KindPublic:
		res.Upstream, res.UpstreamName = true, qname
		return res
	case KindUnresolved:
		res.Upstream, res.UpstreamName, res.ServfailOnNegative = true, qname, true
		return res
	case KindInternal, KindP2P:
		res.Authoritative = true
		if qtype == dns.TypeDS && isApex(n, qname) {
			// The DS RRset of a zone cut is the parent's (RFC 4034 §5,
			// RFC 4035 §3.1.4.1): its NODATA carries the parent zone's
			// SOA, as Knot answers when it serves both.
			if parent := t.zoneOf(n.key[1+int(n.key[0]):]); parent != "" {
				res.Ns = []dns.RR{t.soa(parent, t.zoneSerial(parent))}
				return res
			}
		}
		if (qtype == dns.TypeA || qtype == dns.TypeANY) && n.ip4.IsValid() {
			b := n.ip4.As4()
			res.Answer = append(res.Answer, &dns.A{Hdr: dns.RR_Header{Name: qname, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: t.ttl}, A: net.IP(b[:])})
		}
		if (qtype == dns.TypeAAAA || qtype == dns.TypeANY) && n.ip6.IsValid() {
			b := n.ip6.As16()
			res.Answer = append(res.Answer, &dns.AAAA{Hdr: dns.RR_Header{Name: qname, Rrtype: dns.TypeAAAA, Class: dns.ClassINET, Ttl: t.ttl}, AAAA: net.IP(b[:])})
		}
		if isApex(n, qname) {
			t.apexAnswer(&res, n.name, qname, qtype, n.serial)
		}
		if len(res.Answer) == 0 {
			res.Ns = []dns.RR{t.soa(n.name, n.serial)} // NODATA (RFC 2308 §2.2)
		}
		return res
	}
	// Local records (a wildcard's are owned by the name asked, RFC 4592
	// §3.4.3): authoritative only inside a zone of ours (apex.go).
	res.Authoritative = n.zone != ""
	own := appendOwned
	if n.wild {
		own = appendAs
	}
	// ANY matches the CNAME RRset itself: no chain to follow (RFC 1034
	// §4.3.2 step 3a; Knot and BIND answer the CNAME alone).
	if c := n.rrs[dns.TypeCNAME]; len(c) > 0 && qtype != dns.TypeCNAME && qtype != dns.TypeANY {
		res.Answer = own(res.Answer, c[:1], qname)
		if depth >= MaxChase {
			return res
		}
		target := c[0].(*dns.CNAME).Target
		k, ok := Key(target)
		if !ok {
			return res
		}
		sub := t.answer(t.find(k), target, qtype, depth+1)
		for i, rr := range sub.Answer {
			if strings.EqualFold(rr.Header().Name, qname) {
				// The chain came back to this name: a loop, given once
				// (each record once, as Knot answers; RFC 1034 §3.6.2).
				sub.Answer = sub.Answer[:i]
				break
			}
		}
		res.Answer = append(res.Answer, sub.Answer...)
		res.Ns = sub.Ns
		res.Rcode = sub.Rcode
		res.Upstream, res.UpstreamName, res.ServfailOnNegative = sub.Upstream, sub.UpstreamName, sub.ServfailOnNegative
		return res
	}
	if qtype == dns.TypeANY {
		for _, typ := range sortedTypes(n.rrs) {
			res.Answer = own(res.Answer, n.rrs[typ], qname)
		}
		if len(res.Answer) > 0 && n.fallback != nil && len(n.rrs[dns.TypeCNAME]) == 0 {
			// The types the fallback answers for this name (its address,
			// at the apex SOA and NS) are the name's too, as a question
			// for one of them finds; a CNAME stands alone.
			if fb := t.answer(n.fallback, qname, qtype, depth); !fb.Upstream {
				for _, rr := range fb.Answer {
					if len(n.rrs[rr.Header().Rrtype]) == 0 {
						res.Answer = append(res.Answer, rr)
					}
				}
				res.Extra = fb.Extra
			}
		}
		if len(res.Answer) > 0 || n.fallback == nil {
			return res
		}
	} else if rrs := n.rrs[qtype]; len(rrs) > 0 {
		res.Answer = own(res.Answer, rrs, qname)
		return res
	}
	if n.fallback != nil {
		// Its NODATA too: its SOA is that of the zone holding the
		// question, which for DS at an apex is the parent's (RFC 4035
		// §3.1.4.1), not the zone of the local records.
		fb := t.answer(n.fallback, qname, qtype, depth)
		if fb.Upstream || len(fb.Answer) > 0 || len(fb.Ns) > 0 {
			fb.Authoritative = fb.Authoritative && res.Authoritative
			return fb
		}
	}
	if n.zone != "" && len(res.Answer) == 0 {
		res.Ns = []dns.RR{t.soa(n.zone, t.zoneSerial(n.zone))}
	}
	return res // NODATA: the name exists locally
}

// appendOwned appends copies of rrs owned by qname (the question's case,
// so 0x20-randomising resolvers see their own spelling).
func appendOwned(dst, rrs []dns.RR, qname string) []dns.RR {
	for _, rr := range rrs {
		if strings.EqualFold(rr.Header().Name, qname) && rr.Header().Name != qname {
			rr = dns.Copy(rr)
			rr.Header().Name = qname
		}
		dst = append(dst, rr)
	}
	return dst
}

// appendAs appends copies of rrs owned by qname, whatever their owner
// (the records of a wildcard).
func appendAs(dst, rrs []dns.RR, qname string) []dns.RR {
	for _, rr := range rrs {
		rr = dns.Copy(rr)
		rr.Header().Name = qname
		dst = append(dst, rr)
	}
	return dst
}

func sortedTypes(m map[uint16][]dns.RR) []uint16 {
	out := make([]uint16, 0, len(m))
	for t := range m {
		out = append(out, t)
	}
	for i := 1; i < len(out); i++ {
		for j := i; j > 0 && out[j] < out[j-1]; j-- {
			out[j], out[j-1] = out[j-1], out[j]
		}
	}
	return out
}
