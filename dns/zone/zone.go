// Package zone compiles the node's own DNS data — internal domains, local
// records and resolved p2p domains — into an immutable Table: a map from
// the lowercased wire-format name to a node holding its records and the
// answers for the common query types already packed in wire format.
//
// A Table is built once per change (by the DNS server, off the
// publishers' goroutines) and read without locks by every socket reader. Fast answers a query packet
// straight from those bytes with no allocation; Resolve is the general
// path that miekg/dns handlers use for everything else.
package zone

import (
	"peerdns/messages"

	"maps"
	"net/netip"
	"slices"
	"strings"
	"sync/atomic"

	"github.com/miekg/dns"

	"peerdns/internal/view"
)

// DefaultTTL is the TTL of answers for internal and p2p domains: short,
// because a domain's resolution can change at any vote.
const DefaultTTL = 30

// MaxChase bounds how many CNAMEs Resolve follows inside local data.
const MaxChase = 8

// Kind says where a node's answers come from.
type Kind uint8

// Node kinds, in answer-order precedence.
const (
	KindInternal   Kind = iota + 1 // internal domain: the address from the view
	KindLocal                      // local records (exact name only)
	KindP2P                        // resolved p2p domain, preference p2p
	KindPublic                     // resolved p2p domain whose preference is public: upstream
	KindUnresolved                 // p2p domain in tie, insufficient_quorum, ...: upstream, SERVFAIL when it has no public data
	KindZone                       // zone data of p2p. itself: its apex (SOA, NS) and its name server's address (apex.go)
)

func (k Kind) String() string {
	switch k {
	case KindInternal:
		return "internal"
	case KindLocal:
		return "local"
	case KindP2P:
		return "p2p"
	case KindPublic:
		return "public"
	case KindUnresolved:
		return "unresolved"
	case KindZone:
		return "zone"
	}
	return "none"
}

// Options tune a Table.
type Options struct {
	TTL     uint32   // TTL of internal and p2p answers; 0 means DefaultTTL
	Touches *Touches // reports answered p2p domains; nil: none
	// NSAddrs are the addresses of NSName (the name server of every zone
	// the node holds): the DNS server's own listen address when it is a
	// specific one; none when it listens on every address (apex.go).
	NSAddrs []netip.Addr
}

// Table is the compiled data at one version. Never modified after Build.
type Table struct {
	ViewVersion  uint64 // Version of the view snapshot it was built from (0: none)
	LocalVersion uint64 // Version of the local records snapshot it was built from (0: none)

	view  *view.Snapshot // the snapshots it was built from (BuiltFrom)
	local *messages.LocalSnapshot

	nodes   map[string]*node // exact names, key: lowercased wire name
	parents map[string]*node // internal and p2p nodes, which also answer their subdomains
	// wild holds the local wildcard records: key is the wire name of the
	// wildcard's parent ("*.dev.lan" → dev.lan); nil when there are none,
	// so lookups without wildcards pay one nil check (see cover).
	wild map[string]*node
	nx   *Answer // pre-packed NXDOMAIN for unclaimed .p2p names (negative.go)
	// ents are the empty non-terminals under p2p. (a.b.p2p claimed, b.p2p
	// not): NODATA, not NXDOMAIN (RFC 8020), answered with entAns.
	ents    map[string]struct{}
	entAns  *Answer
	nsAddrs []netip.Addr
	ttl     uint32
	buf     []byte   // scratch for packing during Build; nil afterwards
	touches *Touches // nil: answers are not reported

	// deep: a name three labels deep or more under p2p. (isDeep) is in
	// nodes or wild, so there may be empty non-terminals.
	deep  bool
	fresh []*node // nodes made by this build, to pack; nil afterwards
}

type node struct {
	name     string // lowercased FQDN with trailing dot
	key      string // its key in the table's maps (Key)
	kind     Kind
	ip4, ip6 netip.Addr
	rrs      map[uint16][]dns.RR // local records of class IN
	ch       map[uint16][]dns.RR // local records of class CH
	fallback *node               // local nodes: what answers types they lack (exact p2p or nearest parent)

	fast  [nslots]*Answer    // pre-packed answers by slot, nil: slow path
	other map[uint16]*Answer // pre-packed answers of OTHER local types

	wild bool // a wildcard (RFC 4592): its records are owned by the name asked
	// zone is the FQDN of the zone the node holds that contains a local
	// node (an internal or p2p domain, else p2p.), "" for none: then its
	// answers are not authoritative (apex.go).
	zone string
	// serial is the table's serial when the node was built: its SOA's
	// for an internal or p2p domain (negative.go).
	serial uint32
	// apexSOA and apexNS answer SOA and NS for the exact name of an
	// internal or p2p domain (its zone's apex); its subdomains get the
	// NODATA of fast[] for those types.
	apexSOA, apexNS *Answer
	domain          string        // p2p nodes: the view's name, reported by touch
	seen            atomic.Uint32 // p2p nodes: the Touches epoch last reported
}

const nslots = 10

// slot maps the query types answered on the fast path to an array index.
func slot(qtype uint16) int {
	switch qtype {
	case dns.TypeA:
		return 0
	case dns.TypeNS:
		return 1
	case dns.TypeCNAME:
		return 2
	case dns.TypeSOA:
		return 3
	case dns.TypePTR:
		return 4
	case dns.TypeMX:
		return 5
	case dns.TypeTXT:
		return 6
	case dns.TypeAAAA:
		return 7
	case dns.TypeSRV:
		return 8
	case dns.TypeCAA:
		return 9
	}
	return -1
}

var slotTypes = [nslots]uint16{dns.TypeA, dns.TypeNS, dns.TypeCNAME, dns.TypeSOA, dns.TypePTR, dns.TypeMX, dns.TypeTXT, dns.TypeAAAA, dns.TypeSRV, dns.TypeCAA}

// Key is the lookup key of a name: its wire format, lowercased. ok is
// false for names that do not pack (too long, empty labels).
func Key(name string) (string, bool) {
	var buf [256]byte
	n, err := dns.PackDomainName(dns.Fqdn(name), buf[:], 0, nil, false)
	if err != nil {
		return "", false
	}
	lowerWire(buf[:n])
	return string(buf[:n]), true
}

// lowerWire lowercases ASCII letters in a wire name in place (length
// bytes are at most 63, so they are never in 'A'..'Z').
func lowerWire(b []byte) {
	for i, c := range b {
		if 'A' <= c && c <= 'Z' {
			b[i] = c + 32
		}
	}
}

// Build compiles a table. Either snapshot may be nil.
func Build(v *view.Snapshot, l *messages.LocalSnapshot, o Options) *Table {
	return Rebuild(nil, v, l, o)
}

// Rebuild compiles a table like Build, taking from prev (the table in
// use; nil for none) the nodes of the p2p domains whose view entry is the
// same *view.Domain as in prev's view, as they are, packed answers and
// all. The ledger publishes a view by copying the previous map and
// replacing only the entries that changed, and published entries are
// never modified, so the same pointer is the same domain. Nothing is
// reused when the local records (and with them the version preferences),
// the internal domains or the options differ. A reused node keeps the SOA
// serial (the view version) of the table that packed it: a domain's zone
// serial then moves when that domain changes, as a zone's serial should,
// not at every vote elsewhere.
//
// When it reuses, it also does not visit the unchanged domains: it copies
// prev's maps whole (maps.Clone copies a map's groups as they are, with
// no hashing or probing) and patches the names the view says changed
// (view.Snapshot.Changed). Local records are compiled anew every time, as
// a full build does (their answers may follow a CNAME into any changed
// domain); the empty non-terminals under p2p. are found again only when a
// name three labels deep (a.b.p2p) is in the table or changed. A burst of
// claims publishes views a few names apart: a compile of thousands of
// domains is then a few map copies and the changed names, not a node and
// three map entries per domain (BenchmarkRebuildP2P).
func Rebuild(prev *Table, v *view.Snapshot, l *messages.LocalSnapshot, o Options) *Table {
	t := &Table{ttl: o.TTL, view: v, local: l, touches: o.Touches, nsAddrs: o.NSAddrs}
	if t.ttl == 0 {
		t.ttl = DefaultTTL
	}
	reuse := prev != nil && prev.view != nil && v != nil && prev.local == l && prev.ttl == t.ttl && prev.touches == o.Touches &&
		slices.Equal(prev.nsAddrs, o.NSAddrs) && maps.Equal(prev.view.Internal, v.Internal)
	var prefs map[string]string
	local := l != nil && len(l.Records) > 0
	if l != nil {
		t.LocalVersion = l.Version
		prefs = l.Prefs
	}
	if v != nil {
		t.ViewVersion = v.Version
	}
	ents := true // find the empty non-terminals and local zones again
	switch {
	case reuse:
		keys := t.patchDomains(prev, v, prefs)
		if local {
			t.nodes = maps.Clone(t.parents)
			break
		}
		// Without local records the exact names are the domains and the
		// zone nodes: patch prev's the same way, the zone nodes anew.
		t.nodes = maps.Clone(prev.nodes)
		for _, k := range []string{p2pKey, nsKey} {
			if n := t.nodes[k]; n != nil && n.kind == KindZone {
				delete(t.nodes, k)
			}
		}
		deep := prev.deep
		for _, k := range keys {
			if n := t.parents[k]; n != nil {
				t.nodes[k] = n
			} else {
				delete(t.nodes, k)
			}
			deep = deep || isDeep(k)
		}
		ents = deep
	default:
		t.addDomains(v, prefs)
	}
	t.addZoneNodes()
	if local {
		t.addLocal(l)
	}
	if ents {
		t.setZones()
	}
	// Records are all in: pack the new nodes (a local node's answers may
	// follow a CNAME into any other node, so this comes last).
	serial := t.serial()
	for _, n := range t.fresh {
		n.serial = serial
	}
	for _, n := range t.fresh {
		t.precompute(n)
	}
	t.nx = t.packResult(t.nxP2P(), "")
	t.entAns = t.packResult(t.entP2P(), "")
	t.buf, t.fresh = nil, nil
	return t
}

// addDomains fills parents and nodes from every domain of v:
// the p2p domains and, replacing any of the same name, the internal ones.
func (t *Table) addDomains(v *view.Snapshot, prefs map[string]string) {
	// Sized up front: grown entry by entry, the two maps' rehashing was a
	// third of a compile of thousands of domains.
	size := 16
	if v != nil {
		size += len(v.Domains) + len(v.Internal)
	}
	if t.local != nil {
		size += len(t.local.Records)
	}
	t.nodes, t.parents = make(map[string]*node, size), make(map[string]*node, size)
	if v != nil {
		for name, d := range v.Domains {
			k, ok := Key(name)
			if !ok {
				continue
			}
			if n, ok := p2pNode(name, k, d, prefs); ok {
				t.parents[n.key] = n
				t.fresh = append(t.fresh, n)
			}
		}
		// Internal domains come first in the answer order: they replace
		// a p2p domain of the same name.
		for name, ip := range v.Internal {
			k, ok := Key(name)
			if !ok {
				continue
			}
			n := &node{name: strings.ToLower(dns.Fqdn(name)), key: k, kind: KindInternal}
			setIP(n, ip)
			t.parents[k] = n
			t.fresh = append(t.fresh, n)
		}
	}
	for k, n := range t.parents {
		t.nodes[k] = n
	}
}

// patchDomains makes parents prev's with the domains v changed since
// prev's view taken out and put in again (internal domains are the same
// in both: Rebuild checks). A domain's node is found by its key: the
// view's names are the ledger's normalized ones, one per key. It returns
// the keys it touched.
func (t *Table) patchDomains(prev *Table, v *view.Snapshot, prefs map[string]string) []string {
	changed := v.Changed(prev.view)
	t.parents = maps.Clone(prev.parents)
	keys := make([]string, 0, len(changed))
	for _, name := range changed {
		k, ok := Key(name)
		if !ok {
			continue
		}
		keys = append(keys, k)
		if old := t.parents[k]; old != nil && old.kind == KindInternal {
			continue // internal domains answer for the name
		}
		delete(t.parents, k)
		if n, ok := p2pNode(name, k, v.Domains[name], prefs); ok {
			t.parents[k] = n
			t.fresh = append(t.fresh, n)
		}
	}
	return keys
}

// p2pNode is the node of the view's domain d (nil: none) named name,
// of key k (Key(name)); false when there is none.
func p2pNode(name, k string, d *view.Domain, prefs map[string]string) (*node, bool) {
	if d == nil {
		return nil, false
	}
	n := &node{name: strings.ToLower(dns.Fqdn(name)), key: k}
	answerable := (d.Status == "resolved" || d.Status == "conflict") && d.IP.IsValid()
	switch {
	case !answerable:
		n.kind = KindUnresolved
	case prefs[strings.ToLower(name)] == messages.VersionPublic:
		n.kind = KindPublic
	default:
		n.kind = KindP2P
		n.domain = name
		setIP(n, d.IP)
	}
	return n, true
}

// addLocal adds the nodes of the local records: a name of its own, or
// records on top of a p2p domain's name (which answers the types they
// lack); wildcards apart. Internal domains answer before local records.
func (t *Table) addLocal(l *messages.LocalSnapshot) {
	for _, r := range l.Records {
		if base, ok := messages.WildcardBase(r.Name); ok {
			t.addWildcard(base, r)
			continue
		}
		k, ok := Key(r.Name)
		if !ok {
			continue
		}
		n := t.nodes[k]
		if n != nil && n.kind == KindInternal {
			continue
		}
		if n == nil || n.kind != KindLocal {
			fb := n
			if fb == nil {
				fb = t.parentOf(k)
			}
			n = &node{name: messages.FQDN(r.Name), key: k, kind: KindLocal, rrs: map[uint16][]dns.RR{}, ch: map[uint16][]dns.RR{}, fallback: fb}
			t.nodes[k] = n
			t.fresh = append(t.fresh, n)
		}
		rr, err := r.RR()
		if err != nil {
			continue // validated on write; a record that no longer packs is skipped
		}
		n.add(r, rr)
	}
}

// add puts rr, the record r, in n's RRset of its class and type. An
// RRset answers with one TTL (RFC 2181 §5.2), the smallest of its
// records': records written with different TTLs are lowered to it.
func (n *node) add(r messages.LocalRecord, rr dns.RR) {
	m := n.rrs
	if r.Qclass() == dns.ClassCHAOS {
		m = n.ch
	}
	t := rr.Header().Rrtype
	set := append(m[t], rr)
	ttl := rr.Header().Ttl
	for _, x := range set {
		ttl = min(ttl, x.Header().Ttl)
	}
	for _, x := range set {
		x.Header().Ttl = ttl
	}
	m[t] = set
}

// BuiltFrom reports whether t was built from exactly these snapshots
// (false for a nil t). The DNS server uses it to notice that a publisher
// stored something newer than its table.
func (t *Table) BuiltFrom(v *view.Snapshot, l *messages.LocalSnapshot) bool {
	return t != nil && t.view == v && t.local == l
}

func setIP(n *node, ip netip.Addr) {
	ip = ip.Unmap()
	if ip.Is4() {
		n.ip4 = ip
	} else if ip.Is6() {
		n.ip6 = ip
	}
}

// addWildcard adds the record r owned by "*.<base>" to its wildcard node.
func (t *Table) addWildcard(base string, r messages.LocalRecord) {
	k, ok := Key(base)
	if !ok {
		return
	}
	if t.wild == nil {
		t.wild = map[string]*node{}
	}
	n := t.wild[k]
	if n == nil {
		fb := t.parents[k]
		if fb == nil {
			fb = t.parentOf(k)
		}
		n = &node{name: messages.FQDN(r.Name), key: k, kind: KindLocal, wild: true, rrs: map[uint16][]dns.RR{}, ch: map[uint16][]dns.RR{}, fallback: fb}
		t.wild[k] = n
		t.fresh = append(t.fresh, n)
	}
	rr, err := r.RR()
	if err != nil {
		return
	}
	n.add(r, rr)
}

// cover is the node answering key when it is not an exact name: going up
// from the nearest ancestor, the first internal or p2p domain, or the
// first wildcard "*.<ancestor>" — unless a name of the table, or an
// empty non-terminal (the parent of one), is key itself or lies in
// between (RFC 4592 §2.2.2, §3.3.1: a wildcard only covers names that
// do not exist, below the closest existing ancestor). So an exact name
// always beats a wildcard, a more specific wildcard beats a less
// specific one, and at one level an internal or p2p domain beats a
// wildcard under it. No allocation.
func (t *Table) cover(key []byte) *node {
	wild := t.wild != nil && !t.isENT(key)
	for p := 0; p < len(key) && key[p] != 0; {
		p += 1 + int(key[p])
		if p >= len(key) {
			break
		}
		if n := t.parents[string(key[p:])]; n != nil {
			return n
		}
		if wild {
			if n := t.wild[string(key[p:])]; n != nil {
				return n
			}
			if t.nodes[string(key[p:])] != nil || t.isENT(key[p:]) {
				wild = false // the closest encloser exists: no wildcard above applies
			}
		}
	}
	return nil
}

// parentOf is the nearest strict parent of key in parents, or nil.
func (t *Table) parentOf(key string) *node {
	for p := 0; p < len(key) && key[p] != 0; {
		p += 1 + int(key[p])
		if p >= len(key) {
			break
		}
		if n := t.parents[key[p:]]; n != nil {
			return n
		}
	}
	return nil
}

// find returns the node for key: the exact name, else the nearest parent
// internal or p2p domain.
func (t *Table) find(key string) *node {
	if n := t.nodes[key]; n != nil {
		return n
	}
	return t.cover([]byte(key))
}

// Len is the number of exact names in the table.
func (t *Table) Len() int { return len(t.nodes) }

// Source names what answers name ("none" when upstream does).
func (t *Table) Source(name string) Kind {
	k, ok := Key(name)
	if !ok {
		return 0
	}
	if n := t.find(k); n != nil {
		return n.kind
	}
	return 0
}
