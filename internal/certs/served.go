package certs

import (
	"net/netip"
	"strings"

	"golang.org/x/net/publicsuffix"

	"peerdns/messages"
)

// Served is what the node serves, as the scope of its root CA reads it.
// The composition root gathers it (the published view, the local
// records, the ledger's subnets); Scope turns it into what a new root is
// constrained to:
//
//   - DNS: Suffixes as they are (the p2p suffix, the admin and profile
//     domains), every internal domain, and the suffix of every local
//     record (RecordSuffix). p2p domains claimed outside .p2p are not
//     covered: such a name is also public, and a root that could sign
//     for it is what the constraints are there to prevent; the edge
//     serves them over HTTP only.
//   - IP: the configured subnets, each internal domain's address, and
//     Addrs (the admin and edge listeners' addresses, known before the
//     ledger publishes its first view: the first root is made at start).
type Served struct {
	Suffixes []string
	Addrs    []netip.Addr
	// Internal are the internal domains and their addresses (the view's).
	Internal map[string]netip.Addr
	// Records are the local records (their names ask for suffixes).
	Records []messages.LocalRecord
	// Subnets are the configured subnets (nil when the ledger did not
	// answer in time: the scope then lacks them, which Missing shows).
	Subnets []messages.Subnet
}

// Scope is the normalized scope of what is served.
func (s Served) Scope() Scope {
	out := Scope{Suffixes: append([]string(nil), s.Suffixes...)}
	host := func(ip netip.Addr) {
		if ip.IsValid() {
			out.Ranges = append(out.Ranges, netip.PrefixFrom(ip.Unmap(), ip.Unmap().BitLen()))
		}
	}
	for _, ip := range s.Addrs {
		host(ip)
	}
	for name, ip := range s.Internal {
		out.Suffixes = append(out.Suffixes, name)
		host(ip)
	}
	for _, rec := range s.Records {
		if sfx := RecordSuffix(rec.Name); sfx != "" {
			out.Suffixes = append(out.Suffixes, sfx)
		}
	}
	for _, sub := range s.Subnets {
		if a, err := netip.ParseAddr(sub.Base); err == nil {
			out.Ranges = append(out.Ranges, netip.PrefixFrom(a, sub.CIDR).Masked())
		}
	}
	return out.Normalize()
}

// RecordSuffix is the suffix a local record name asks the root to cover:
// the name without its first label (nas.home → home, www.dev.lan →
// dev.lan), or the name itself when that parent is empty or a public
// suffix (example.com → example.com, never com; me.github.io →
// me.github.io, never github.io: the public suffix list of
// golang.org/x/net/publicsuffix tells, its ICANN and private rules
// alike). A wildcard's "*." is dropped first; "" for an empty name.
func RecordSuffix(name string) string {
	name = strings.Trim(strings.ToLower(strings.TrimSpace(name)), ".")
	name = strings.TrimPrefix(name, "*.")
	if name == "" || name == "*" {
		return ""
	}
	_, parent, ok := strings.Cut(name, ".")
	if !ok || parent == "" {
		return name
	}
	// A parent of one label that no rule lists (home, lan) gets the
	// list's default rule, not an ICANN one: it is the suffix. Any
	// listed rule, ICANN or private, names a public suffix.
	if ps, icann := publicsuffix.PublicSuffix(parent); ps == parent && (icann || strings.Contains(parent, ".")) {
		return name
	}
	return parent
}
