package dns

import (
	"encoding/binary"
	"fmt"
	"net/netip"
	"strings"
)

// DefaultRecursionAllow is the recursion ACL used when
// Config.RecursionAllow is nil: loopback and the private ranges (RFC 1918,
// the shared address space of RFC 6598, IPv6 unique local and link-local
// addresses). Everyone else gets answers from the node's own data only.
func DefaultRecursionAllow() []netip.Prefix {
	return []netip.Prefix{
		netip.MustParsePrefix("127.0.0.0/8"),
		netip.MustParsePrefix("::1/128"),
		netip.MustParsePrefix("10.0.0.0/8"),
		netip.MustParsePrefix("172.16.0.0/12"),
		netip.MustParsePrefix("192.168.0.0/16"),
		netip.MustParsePrefix("100.64.0.0/10"),
		netip.MustParsePrefix("fc00::/7"),
		netip.MustParsePrefix("fe80::/10"),
	}
}

// ParsePrefixes reads a recursion ACL as an operator writes it in a flag
// or an environment variable: networks (CIDR) or single addresses,
// separated by commas and/or spaces, e.g.
// "127.0.0.0/8, ::1, 192.0.2.0/24". Host bits are cleared. "" is nil (the
// default list); "none" is an empty list (recursion for nobody: the node
// answers from its own data only). "0.0.0.0/0,::/0" allows everyone,
// which makes an open resolver: only do that behind a firewall.
func ParsePrefixes(s string) ([]netip.Prefix, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return nil, nil
	}
	if strings.EqualFold(s, "none") {
		return []netip.Prefix{}, nil
	}
	var out []netip.Prefix
	for _, f := range strings.FieldsFunc(s, func(r rune) bool { return r == ',' || r == ' ' || r == '\t' }) {
		var p netip.Prefix
		if strings.Contains(f, "/") {
			var err error
			if p, err = netip.ParsePrefix(f); err != nil {
				return nil, fmt.Errorf("recursion ACL: %q is not a network (want e.g. 192.168.0.0/16 or fd00::/8)", f)
			}
		} else {
			a, err := netip.ParseAddr(f)
			if err != nil || a.Zone() != "" {
				return nil, fmt.Errorf("recursion ACL: %q is not an address or a network", f)
			}
			p = netip.PrefixFrom(a, a.BitLen())
		}
		out = append(out, p.Masked())
	}
	return out, nil
}

// acl is a recursion ACL compiled for the answer path: IPv4 networks as
// masked integers (a loopback client matches the first entry of the
// default list in a couple of instructions), IPv6 ones as prefixes. It
// never allocates.
type acl struct {
	v4 []net4
	v6 []netip.Prefix
}

type net4 struct{ base, mask uint32 }

func newACL(ps []netip.Prefix) *acl {
	a := &acl{}
	for _, p := range ps {
		addr, bits := p.Addr(), p.Bits()
		if addr.Is4In6() && bits >= 96 { // ::ffff:a.b.c.d/n is an IPv4 network
			addr, bits = addr.Unmap(), bits-96
		}
		if addr.Is4() {
			b := addr.As4()
			mask := uint32(0)
			if bits > 0 {
				mask = ^uint32(0) << (32 - bits)
			}
			a.v4 = append(a.v4, net4{base: binary.BigEndian.Uint32(b[:]) & mask, mask: mask})
			continue
		}
		a.v6 = append(a.v6, netip.PrefixFrom(addr, bits).Masked())
	}
	return a
}

// contains reports whether the client ip is in the ACL. IPv4-mapped IPv6
// sources (a dual-stack socket) count as IPv4; zones are ignored.
func (a *acl) contains(ip netip.Addr) bool {
	ip = ip.Unmap()
	if ip.Is4() {
		b := ip.As4()
		x := binary.BigEndian.Uint32(b[:])
		for _, n := range a.v4 {
			if x&n.mask == n.base {
				return true
			}
		}
		return false
	}
	ip = ip.WithZone("")
	for _, p := range a.v6 {
		if p.Contains(ip) {
			return true
		}
	}
	return false
}

// coversAll reports whether the ACL holds every IPv4 and IPv6 address.
func (a *acl) coversAll() bool {
	all4 := false
	for _, n := range a.v4 {
		if n.mask == 0 {
			all4 = true
		}
	}
	for _, p := range a.v6 {
		if p.Bits() == 0 && all4 {
			return true
		}
	}
	return false
}

// coversLoopback reports whether every loopback source that can reach a
// socket bound to the loopback address local is in the ACL.
func (a *acl) coversLoopback(local netip.Addr) bool {
	local = local.Unmap()
	if local.Is4() {
		for _, n := range a.v4 {
			if n.mask <= 0xFF000000 && 0x7F000000&n.mask == n.base {
				return true // a network holding 127.0.0.0/8
			}
		}
		return false
	}
	return a.contains(netip.IPv6Loopback())
}
