package certs

// Name constraints.
//
// A root that signs for any name is a master key to the web once a user
// trusts it: whoever steals DATA/ca/root-key.pem can intercept every site
// that user visits. So a new root carries X.509 name constraints (RFC
// 5280 §4.2.1.10, marked critical): it may only sign for the DNS
// suffixes the node serves and for its IP ranges (the Scope the node
// hands to OpenScoped), and browsers and TLS libraries refuse any leaf
// outside them even if it was signed with the root key. The root also
// carries the serverAuth extended key usage, so it cannot vouch for code,
// mail or client certificates either.
//
// Issuing follows the root's constraints: a DNS name outside them is
// refused (ErrOutsideScope, never a certificate), and a domain's local IP
// outside them is left out of the leaf (the name alone still verifies).
// A root made before constraints existed (no PermittedDNSDomains) keeps
// working as it did, for any valid name; regenerate-ca replaces it with
// a constrained one. The edge (http/proxy) asks for leaves of .p2p
// domains and of the admin, plugin and internal domains only, so a
// peer's claim of a public name gets no leaf from such a root either.
//
// When the node starts serving a new suffix (a local record under a new
// name, a plugin's internal domain, a new subnet), the root does not
// cover it until it is made again: Missing says what the current root
// lacks, and the node offers regenerate-ca (log line, GET
// /api/ca-status, the panel).

import (
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"sort"
	"strings"
)

// ErrOutsideScope: the root's name constraints do not allow the name.
var ErrOutsideScope = errors.New("outside the names the root CA may sign for")

// Scope is what a new root may sign for.
type Scope struct {
	// Suffixes are DNS names (lower case, no trailing or leading dot); a
	// suffix allows itself and every name below it.
	Suffixes []string
	// Ranges are the IP ranges a leaf's address may come from.
	Ranges []netip.Prefix
}

// Normalize lowers, dedupes and sorts the suffixes and drops the ones
// below another (p2p covers admin.p2p), and masks, dedupes and sorts the
// ranges, dropping the ones inside another.
func (s Scope) Normalize() Scope {
	var sfx []string
	for _, x := range s.Suffixes {
		x = strings.Trim(strings.ToLower(strings.TrimSpace(x)), ".")
		if x != "" {
			sfx = append(sfx, x)
		}
	}
	sort.Strings(sfx)
	sfx = slices.Compact(sfx)
	out := Scope{Suffixes: []string{}, Ranges: []netip.Prefix{}}
	for _, x := range sfx {
		if !underAny(x, sfx, true) {
			out.Suffixes = append(out.Suffixes, x)
		}
	}
	var rs []netip.Prefix
	for _, p := range s.Ranges {
		if p.IsValid() {
			rs = append(rs, netip.PrefixFrom(p.Addr().Unmap(), p.Bits()-unmapBits(p)).Masked())
		}
	}
	sort.Slice(rs, func(i, j int) bool {
		if c := rs[i].Addr().Compare(rs[j].Addr()); c != 0 {
			return c < 0
		}
		return rs[i].Bits() < rs[j].Bits()
	})
	rs = slices.Compact(rs)
	for i, p := range rs {
		inside := false
		for j, q := range rs {
			if i != j && q.Bits() < p.Bits() && q.Contains(p.Addr()) {
				inside = true
				break
			}
		}
		if !inside {
			out.Ranges = append(out.Ranges, p)
		}
	}
	return out
}

// unmapBits is how many bits an IPv4-mapped IPv6 prefix loses when it
// is turned into an IPv4 one.
func unmapBits(p netip.Prefix) int {
	if p.Addr().Is4In6() {
		return 96
	}
	return 0
}

// underAny reports whether name is one of suffixes or below one; with
// strict, name itself does not count.
func underAny(name string, suffixes []string, strict bool) bool {
	for _, s := range suffixes {
		if (!strict && name == s) || strings.HasSuffix(name, "."+s) {
			return true
		}
	}
	return false
}

// Constrained reports whether root carries name constraints.
func Constrained(root *x509.Certificate) bool {
	return len(root.PermittedDNSDomains) > 0 || len(root.PermittedIPRanges) > 0
}

// RootScope is the scope root's constraints allow (empty for a root
// without constraints).
func RootScope(root *x509.Certificate) Scope {
	s := Scope{Suffixes: []string{}, Ranges: []netip.Prefix{}}
	for _, d := range root.PermittedDNSDomains {
		s.Suffixes = append(s.Suffixes, strings.TrimPrefix(d, "."))
	}
	for _, n := range root.PermittedIPRanges {
		if a, ok := netip.AddrFromSlice(n.IP); ok {
			ones, _ := n.Mask.Size()
			s.Ranges = append(s.Ranges, netip.PrefixFrom(a.Unmap(), ones))
		}
	}
	return s
}

// AllowsName reports whether a leaf for name (and *.name) is within
// the DNS constraints of root. A root without DNS constraints allows
// every name, as crypto/x509 and browsers treat it.
func AllowsName(root *x509.Certificate, name string) bool {
	if len(root.PermittedDNSDomains) == 0 {
		return len(root.PermittedIPRanges) == 0 // IP constraints alone: DNS names unconstrained
	}
	name = strings.ToLower(name)
	for _, c := range root.PermittedDNSDomains {
		c = strings.ToLower(c)
		if strings.HasPrefix(c, ".") { // RFC 5280: a leading dot means below it only
			if strings.HasSuffix(name, c) {
				return true
			}
			continue
		}
		if name == c || strings.HasSuffix(name, "."+c) {
			return true
		}
	}
	return false
}

// AllowsIP reports whether ip is within root's IP constraints (every IP
// when it has none).
func AllowsIP(root *x509.Certificate, ip netip.Addr) bool {
	if len(root.PermittedIPRanges) == 0 {
		return true
	}
	nip := net.IP(ip.Unmap().AsSlice())
	for _, r := range root.PermittedIPRanges {
		if len(r.IP) == len(nip) && r.Contains(nip) {
			return true
		}
	}
	return false
}

// Missing is the part of want that root does not allow: suffixes and
// ranges a regenerated root would add. Empty for a root without
// constraints (it allows everything; Constrained tells it apart).
func Missing(root *x509.Certificate, want Scope) Scope {
	out := Scope{Suffixes: []string{}, Ranges: []netip.Prefix{}}
	if !Constrained(root) {
		return out
	}
	want = want.Normalize()
	for _, s := range want.Suffixes {
		if !AllowsName(root, s) {
			out.Suffixes = append(out.Suffixes, s)
		}
	}
	for _, p := range want.Ranges {
		if !rangeAllowed(root, p) {
			out.Ranges = append(out.Ranges, p)
		}
	}
	return out
}

// rangeAllowed: every address of p is within one of root's IP ranges.
func rangeAllowed(root *x509.Certificate, p netip.Prefix) bool {
	for _, r := range RootScope(root).Ranges {
		if r.Bits() <= p.Bits() && r.Contains(p.Addr()) {
			return true
		}
	}
	return false
}

// Empty reports whether s has neither suffixes nor ranges.
func (s Scope) Empty() bool { return len(s.Suffixes) == 0 && len(s.Ranges) == 0 }

// String is the scope in one line, e.g. "p2p, home, 127.77.0.0/16".
func (s Scope) String() string {
	parts := append([]string{}, s.Suffixes...)
	for _, p := range s.Ranges {
		parts = append(parts, p.String())
	}
	return strings.Join(parts, ", ")
}

// constrain writes s into a root template. Empty parts stay empty: a
// scope without ranges would otherwise leave IP addresses unconstrained,
// so then every IP is excluded instead.
func constrain(tpl *x509.Certificate, s Scope) {
	s = s.Normalize()
	tpl.PermittedDNSDomainsCritical = true
	tpl.PermittedDNSDomains = append([]string{}, s.Suffixes...)
	for _, p := range s.Ranges {
		tpl.PermittedIPRanges = append(tpl.PermittedIPRanges, &net.IPNet{
			IP: net.IP(p.Addr().AsSlice()), Mask: net.CIDRMask(p.Bits(), p.Addr().BitLen())})
	}
	if len(tpl.PermittedIPRanges) == 0 {
		tpl.ExcludedIPRanges = []*net.IPNet{
			{IP: net.IPv4zero.To4(), Mask: net.CIDRMask(0, 32)},
			{IP: net.IPv6zero, Mask: net.CIDRMask(0, 128)},
		}
	}
}

// outside is the error for a name root does not allow, with what would
// fix it when the node serves the name.
func outside(name string, root *x509.Certificate, scope func() Scope) error {
	allowed := RootScope(root)
	if scope != nil {
		if cur := scope().Normalize(); underAny(name, cur.Suffixes, false) {
			return fmt.Errorf("%w: %s: the root CA was made before this node served that name and may only sign for %s: "+
				"regenerate it (POST /api/regenerate-ca, or Certificates in the panel) and trust the new root", ErrOutsideScope, name, allowed)
		}
	}
	return fmt.Errorf("%w: %s: this node does not serve that name, and the root CA may only sign for %s", ErrOutsideScope, name, allowed)
}
