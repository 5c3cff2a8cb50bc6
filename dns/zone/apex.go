package zone

import (
	"net"
	"strings"

	"github.com/miekg/dns"
)

// The zones the node serves as an authoritative server, and their apex
// data.
//
//   - p2p. — the namespace of the ledger. Its apex answers SOA and NS;
//     a name under it nobody claimed is NXDOMAIN, an empty non-terminal
//     (b.p2p when only a.b.p2p is claimed) NODATA, both with the SOA of
//     p2p.
//   - every internal domain and every resolved p2p domain answered from
//     the ledger: a zone of its own, cut below p2p. (as one server
//     holding parent and child answers from the child). Its apex answers
//     SOA and NS; its A/AAAA answers the name and every name below it;
//     every other question NODATA with its SOA.
//   - local records are in a zone of ours only when their name is inside
//     one of the above (txt.site.p2p, anything under p2p.): then their
//     answers are authoritative and their NODATA carries that zone's
//     SOA. Any other local name (nas.home) is the operator's own data in
//     no zone we hold: answered without AA, its NODATA without SOA, so a
//     resolver treats it as it would a forwarder's answer (RFC 2308 §5
//     allows no negative caching without SOA, and none is claimed).
//
// Every zone's NS is NSName, one name for the server whatever the zone
// (as a provider's name servers serve every customer zone). Its address
// records (in-domain glue) are the DNS server's own listen address
// (Options.NSAddrs), in the p2p. zone. NSName is a name under p2p., so
// a claim for "ns.p2p" that resolves takes the name over (the ledger's
// answer wins, as for any other p2p name); resolvers configured with a
// stub zone use their configured address and never need the glue.

// NSName is the name server of every zone the node serves.
const NSName = "ns." + P2PZone

// nsKey is NSName's table key.
const nsKey = "\x02ns\x03p2p\x00"

// p2pKey is P2PZone's table key.
const p2pKey = "\x03p2p\x00"

// addZoneNodes adds the apex of p2p. and, unless a domain of that name
// answers from the view, the address node of NSName.
func (t *Table) addZoneNodes() {
	apex := &node{name: P2PZone, key: p2pKey, kind: KindZone, rrs: map[uint16][]dns.RR{
		dns.TypeSOA: {t.soa(P2PZone, t.serial())},
		dns.TypeNS:  {t.ns(P2PZone)},
	}}
	if t.nodes[p2pKey] == nil {
		t.nodes[p2pKey] = apex
		t.fresh = append(t.fresh, apex)
	}
	if t.nodes[nsKey] == nil {
		ns := &node{name: NSName, key: nsKey, kind: KindZone, rrs: map[uint16][]dns.RR{}}
		for _, ip := range t.nsAddrs {
			ip = ip.Unmap()
			switch {
			case ip.Is4():
				b := ip.As4()
				ns.rrs[dns.TypeA] = append(ns.rrs[dns.TypeA], &dns.A{Hdr: dns.RR_Header{Name: NSName, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: t.ttl}, A: net.IP(b[:])})
			case ip.Is6():
				b := ip.As16()
				ns.rrs[dns.TypeAAAA] = append(ns.rrs[dns.TypeAAAA], &dns.AAAA{Hdr: dns.RR_Header{Name: NSName, Rrtype: dns.TypeAAAA, Class: dns.ClassINET, Ttl: t.ttl}, AAAA: net.IP(b[:])})
			}
		}
		t.nodes[nsKey] = ns
		t.fresh = append(t.fresh, ns)
	}
}

// ns is the NS record of zone.
func (t *Table) ns(zone string) dns.RR {
	return &dns.NS{Hdr: dns.RR_Header{Name: zone, Rrtype: dns.TypeNS, Class: dns.ClassINET, Ttl: t.ttl}, Ns: NSName}
}

// glue is the address records of NSName for the additional section of
// an answer from zone: only inside p2p. (in-domain glue).
func (t *Table) glue(zone string) []dns.RR {
	if zone != P2PZone {
		return nil
	}
	n := t.nodes[nsKey]
	if n == nil || n.kind != KindZone {
		return nil
	}
	return append(append([]dns.RR(nil), n.rrs[dns.TypeA]...), n.rrs[dns.TypeAAAA]...)
}

// setZones gives each local node the zone of ours it is in, and collects
// the empty non-terminals under p2p. (and whether any name is deep enough
// to make one), and with wildcards those of every name. It writes only the table's own fresh local nodes: those
// a Rebuild takes from the table before are never local.
func (t *Table) setZones() {
	for _, n := range t.nodes {
		if n.kind == KindLocal {
			n.zone = t.zoneOf(n.key)
		}
		t.deep = t.deep || isDeep(n.key)
		t.addENTs(n.key, false)
	}
	for k, n := range t.wild {
		n.zone = t.zoneOf(k)
		t.deep = true      // "*.<k>" is at least three labels deep
		t.addENTs(k, true) // "*.<k>" exists, so k does
	}
}

// isDeep reports whether key is under p2p. with at least two labels
// before it (a.b.p2p): only such a name has an ancestor under p2p. that
// may be an empty non-terminal.
func isDeep(key string) bool {
	return isP2P([]byte(key)) && key[1+int(key[0]):] != p2pKey
}

// zoneOf is the zone of ours that holds key: the nearest internal or p2p
// domain answered from the view at or above it, else p2p. for a name
// under it, else "".
func (t *Table) zoneOf(key string) string {
	for p := 0; p < len(key) && key[p] != 0; p += 1 + int(key[p]) {
		if n := t.parents[key[p:]]; n != nil {
			if n.kind == KindInternal || n.kind == KindP2P {
				return n.name
			}
			break // a domain that goes upstream: p2p. holds it
		}
	}
	if isP2P([]byte(key)) || key == p2pKey {
		return P2PZone
	}
	return ""
}

// addENTs records the ancestors of key under p2p. that have no node of
// their own (key itself too when self is true), up to the first that
// has one; with wildcards, those of names outside p2p. too (up to the
// top-level domain), which a wildcard above them must not answer (cover).
func (t *Table) addENTs(key string, self bool) {
	if !isP2P([]byte(key)) && t.wild == nil {
		return
	}
	p := 0
	if !self {
		p = 1 + int(key[0])
	}
	for ; p < len(key) && key[p] != 0 && key[p:] != p2pKey; p += 1 + int(key[p]) {
		k := key[p:]
		if t.nodes[k] != nil {
			return
		}
		if t.ents == nil {
			t.ents = map[string]struct{}{}
		}
		t.ents[k] = struct{}{}
	}
}

// isENT reports whether key is an empty non-terminal: under p2p., or
// anywhere when the table has wildcards.
func (t *Table) isENT(key []byte) bool {
	if t.ents == nil {
		return false
	}
	_, ok := t.ents[string(key)]
	return ok
}

// entP2P is the answer for an empty non-terminal under p2p.: NODATA.
func (t *Table) entP2P() Result {
	return Result{Authoritative: true, Ns: []dns.RR{t.soa(P2PZone, t.serial())}}
}

// apexAnswer adds to res what the apex of zone (an internal or p2p
// domain, at serial) answers for qtype beyond its addresses: SOA, NS,
// both for ANY.
func (t *Table) apexAnswer(res *Result, zone, qname string, qtype uint16, serial uint32) {
	if qtype == dns.TypeSOA || qtype == dns.TypeANY {
		rr := t.soa(zone, serial)
		rr.Header().Name = qname
		res.Answer = append(res.Answer, rr)
	}
	if qtype == dns.TypeNS || qtype == dns.TypeANY {
		rr := t.ns(zone)
		rr.Header().Name = qname
		res.Answer = append(res.Answer, rr)
	}
}

// isApex reports whether qname is n's own name (any case).
func isApex(n *node, qname string) bool {
	return strings.EqualFold(dns.Fqdn(qname), n.name)
}
