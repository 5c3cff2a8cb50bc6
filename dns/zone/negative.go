package zone

import (
	"github.com/miekg/dns"
)

// Negative answers (RFC 2308). The node is the authority for the .p2p
// namespace (the ledger) and for each claimed and internal domain (the
// zones of apex.go), so its negative answers there carry a SOA in the
// authority section, which tells resolvers how long to cache them:
//
//   - NODATA for a type an internal or p2p domain (or a subdomain it
//     answers) has no record of: the domain's own SOA;
//   - a name under .p2p that no one has claimed: NXDOMAIN with the SOA of
//     "p2p." (these names no longer go upstream: nobody else answers
//     .p2p), or NODATA with it for an empty non-terminal (RFC 8020);
//   - NODATA of a local name inside one of those zones: that zone's SOA.
//
// The SOA's serial is the zone's: a p2p or internal domain's is the
// table's serial (serial) when its node was built, so a rebuild that
// keeps the node keeps its serial, and every answer from one zone (its
// SOA, its NODATA, ANY) names the same one; p2p.'s is the table's own
// (its apex and negative answers are built anew every time). The serial
// rises with every view or local-records version the node process
// publishes; it starts again when the node restarts (nobody transfers
// these zones: the serial is for the operator's eye, and a resolver's
// negative cache does not read it).
//
// The SOA's TTL and MINIMUM are the table's TTL (30 s by default: a vote
// can change the answer), so the negative TTL of §5, min(TTL, MINIMUM),
// is the same as a positive answer's. Local names outside those zones
// keep their NODATA without SOA, and without AA: they are the
// operator's names, in no zone we hold.

// P2PZone is the namespace the ledger owns.
const P2PZone = "p2p."

// serial is the SOA serial of what this table builds: it rises with
// either snapshot's version.
func (t *Table) serial() uint32 {
	return uint32(t.ViewVersion + t.LocalVersion)
}

// zoneSerial is the serial of zone (an FQDN), "p2p." or the name of a
// domain's node.
func (t *Table) zoneSerial(zone string) uint32 {
	if k, ok := Key(zone); ok && zone != P2PZone {
		if n := t.parents[k]; n != nil {
			return n.serial
		}
	}
	return t.serial()
}

// soa is the synthetic SOA of zone (an FQDN) at serial.
func (t *Table) soa(zone string, serial uint32) dns.RR {
	return &dns.SOA{
		Hdr:     dns.RR_Header{Name: zone, Rrtype: dns.TypeSOA, Class: dns.ClassINET, Ttl: t.ttl},
		Ns:      NSName, // the primary server: ours (apex.go)
		Mbox:    "hostmaster." + zone,
		Serial:  serial,
		Refresh: 3600,
		Retry:   600,
		Expire:  86400,
		Minttl:  t.ttl,
	}
}

// isP2P reports whether the wire name key is under .p2p (not .p2p
// itself, which is not a name anyone claims): its last label is "p2p".
// Walking the labels matters: a label may hold the bytes "\x03p2p".
func isP2P(key []byte) bool {
	for p := 0; p < len(key) && key[p] != 0; {
		next := p + 1 + int(key[p])
		if next < len(key) && key[next] == 0 {
			return p > 0 && string(key[p:]) == "\x03p2p\x00"
		}
		p = next
	}
	return false
}

// underP2P is isP2P for a presentation name (any case, FQDN, escapes
// allowed).
func underP2P(qname string) bool {
	k, ok := Key(qname)
	return ok && isP2P([]byte(k))
}

// nxP2P is the answer for an unclaimed name under .p2p.
func (t *Table) nxP2P() Result {
	return Result{Rcode: dns.RcodeNameError, Authoritative: true, Ns: []dns.RR{t.soa(P2PZone, t.serial())}}
}
