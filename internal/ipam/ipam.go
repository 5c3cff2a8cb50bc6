// Package ipam assigns each domain a stable local IPv4 address from the
// configured subnets. It is a pure type: the owner (the ledger actor)
// persists assignments and subnets.
//
// The default subnet lives on the loopback range (127.77.0.0/16), so a
// tunnel client can listen on a domain's address without privileges on
// Linux, where all of 127.0.0.0/8 is routed to lo.
package ipam

import (
	"encoding/binary"
	"fmt"
	"net/netip"
	"sort"
	"strconv"
	"strings"

	"peerdns/messages"
)

// DefaultBase is the default SUBNET_BASE.
const DefaultBase = "127.77.0.0/16"

// DefaultStartIndex is the default INITIAL_IP_INDEX: .0.0 is the network
// and .0.1 is left for the node itself.
const DefaultStartIndex = 2

// Subnet is one configured range.
type Subnet struct {
	Base       netip.Addr
	CIDR       int
	StartIndex int
	Name       string
}

func (s Subnet) prefix() netip.Prefix { return netip.PrefixFrom(s.Base, s.CIDR).Masked() }

// size is the number of addresses in the subnet.
func (s Subnet) size() int { return 1 << (32 - s.CIDR) }

// Available is how many addresses the subnet hands out: from StartIndex up
// to size-2 (the last address is the broadcast address).
func (s Subnet) Available() int {
	n := s.size() - 1 - s.StartIndex
	if n < 0 {
		return 0
	}
	return n
}

// HandsOut reports whether ip is one of the Available addresses.
func (s Subnet) HandsOut(ip netip.Addr) bool {
	if !s.prefix().Contains(ip) {
		return false
	}
	i := int(binary.BigEndian.Uint32(ip.AsSlice()) - binary.BigEndian.Uint32(s.prefix().Addr().AsSlice()))
	return i >= s.StartIndex && i <= s.size()-2
}

func (s Subnet) addr(index int) netip.Addr {
	base := binary.BigEndian.Uint32(s.prefix().Addr().AsSlice())
	var b [4]byte
	binary.BigEndian.PutUint32(b[:], base+uint32(index))
	return netip.AddrFrom4(b)
}

// DefaultSubnets is the subnet derived from a SUBNET_BASE setting
// ("a.b.c.d/n", or a bare address meaning /16) and INITIAL_IP_INDEX.
func DefaultSubnets(base string, start int) ([]Subnet, error) {
	if base == "" {
		base = DefaultBase
	}
	prefix := base
	if !strings.Contains(prefix, "/") {
		prefix += "/16"
	}
	p, err := netip.ParsePrefix(prefix)
	if err != nil || !p.Addr().Is4() {
		return nil, fmt.Errorf("SUBNET_BASE %q is not an IPv4 address or prefix (e.g. 127.77.0.0/16)", base)
	}
	if p.Bits() < 1 {
		// The cidr rule of Validate (1 to 32): a /0 is every address.
		return nil, fmt.Errorf("SUBNET_BASE %q: the prefix length must be between 1 and 32", base)
	}
	if start <= 0 {
		start = DefaultStartIndex
	}
	sub := Subnet{Base: p.Masked().Addr(), CIDR: p.Bits(), StartIndex: start, Name: "Subnet 1"}
	// The rule of Validate: a subnet that hands out no address would
	// leave every domain without a local IP.
	if last := sub.size() - 2; start > last {
		if last < DefaultStartIndex {
			return nil, fmt.Errorf("SUBNET_BASE %q: a /%d subnet has too few addresses to hand out", base, sub.CIDR)
		}
		return nil, fmt.Errorf("INITIAL_IP_INDEX %d is past the end of SUBNET_BASE %q (at most %d)", start, base, last)
	}
	return []Subnet{sub}, nil
}

// MaxSubnets bounds a subnet list.
const MaxSubnets = 256

// Validate checks subnets as the spec requires and returns one message per
// problem (empty when valid): at most one per subnet, so a list of
// MaxSubnets at most answers in at most that many lines. Names default
// to "Subnet N".
func Validate(in []messages.Subnet) ([]Subnet, []string) {
	var errs []string
	var out []Subnet
	if len(in) == 0 {
		return nil, []string{"at least one subnet is required"}
	}
	if len(in) > MaxSubnets {
		return nil, []string{fmt.Sprintf("%d subnets: at most %d are allowed", len(in), MaxSubnets)}
	}
	for i, s := range in {
		where := fmt.Sprintf("subnets[%d]", i)
		base, err := netip.ParseAddr(s.Base)
		if err != nil || !base.Is4() {
			errs = append(errs, fmt.Sprintf("%s.base %q is not a valid IPv4 address", where, s.Base))
			continue
		}
		if s.CIDR < 1 || s.CIDR > 32 {
			errs = append(errs, fmt.Sprintf("%s.cidr %d must be between 1 and 32", where, s.CIDR))
			continue
		}
		sub := Subnet{Base: netip.PrefixFrom(base, s.CIDR).Masked().Addr(), CIDR: s.CIDR, StartIndex: s.StartIndex, Name: s.Name}
		if max := sub.size() - 2; s.StartIndex < 1 || s.StartIndex > max {
			if max < 1 {
				errs = append(errs, fmt.Sprintf("%s: a /%d subnet has no usable addresses", where, s.CIDR))
			} else {
				errs = append(errs, fmt.Sprintf("%s.startIndex %d must be between 1 and %d", where, s.StartIndex, max))
			}
			continue
		}
		if sub.Name == "" {
			sub.Name = "Subnet " + strconv.Itoa(i+1)
		}
		out = append(out, sub)
	}
	for j := range out {
		for i := 0; i < j; i++ {
			if out[i].prefix().Overlaps(out[j].prefix()) {
				errs = append(errs, fmt.Sprintf("subnet %s overlaps subnet %s", out[i].prefix(), out[j].prefix()))
				break // one line per subnet
			}
		}
	}
	return out, errs
}

// Pool is the set of subnets and the current assignments.
type Pool struct {
	subnets []Subnet
	byName  map[string]netip.Addr
	used    map[netip.Addr]string
	// next[i] is an index of subnet i below which every address is taken,
	// so allocating n domains costs O(n), not O(n²).
	next []int
}

// New makes a pool over subnets with existing assignments (domain → IP).
func New(subnets []Subnet, assigned map[string]netip.Addr) *Pool {
	p := &Pool{subnets: subnets, byName: map[string]netip.Addr{}, used: map[netip.Addr]string{}, next: make([]int, len(subnets))}
	for i, s := range subnets {
		p.next[i] = s.StartIndex
	}
	for d, ip := range assigned {
		p.byName[d] = ip
		p.used[ip] = d
	}
	return p
}

// Lookup returns the IP of domain.
func (p *Pool) Lookup(domain string) (netip.Addr, bool) {
	ip, ok := p.byName[domain]
	return ip, ok
}

// Assign returns domain's IP, allocating the first free address when it
// has none. fresh says whether it was allocated now (to be persisted).
func (p *Pool) Assign(domain string) (ip netip.Addr, fresh bool, err error) {
	if ip, ok := p.byName[domain]; ok {
		return ip, false, nil
	}
	for si, s := range p.subnets {
		for i := p.next[si]; i <= s.size()-2; i++ {
			a := s.addr(i)
			if _, taken := p.used[a]; !taken {
				p.byName[domain] = a
				p.used[a] = domain
				p.next[si] = i + 1
				return a, true, nil
			}
		}
		p.next[si] = s.size() - 1
	}
	return netip.Addr{}, false, fmt.Errorf("no free address left in %d subnet(s)", len(p.subnets))
}

// Release frees domain's address. An address below its subnet's
// StartIndex (kept from an earlier subnet setting) is never handed out
// again.
func (p *Pool) Release(domain string) {
	ip, ok := p.byName[domain]
	if !ok {
		return
	}
	delete(p.used, ip)
	delete(p.byName, domain)
	for si, s := range p.subnets {
		if s.prefix().Contains(ip) {
			base := binary.BigEndian.Uint32(s.prefix().Addr().AsSlice())
			if i := int(binary.BigEndian.Uint32(ip.AsSlice()) - base); i >= s.StartIndex && i < p.next[si] {
				p.next[si] = i
			}
		}
	}
}

// Assignments lists domain → IP sorted by domain.
func (p *Pool) Assignments() []messages.Interface {
	out := make([]messages.Interface, 0, len(p.byName))
	for d, ip := range p.byName {
		out = append(out, messages.Interface{Domain: d, IP: ip.String()})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Domain < out[j].Domain })
	return out
}

// Describe returns the subnets with capacity counts for the API: of the
// Available addresses (StartIndex to the one before broadcast), how many
// are Used and how many Remaining to hand out. An address outside that
// range (below StartIndex, kept from an earlier setting) is in neither.
func (p *Pool) Describe() []messages.Subnet {
	out := make([]messages.Subnet, 0, len(p.subnets))
	for i, s := range p.subnets {
		used := 0
		for ip := range p.used {
			if s.HandsOut(ip) {
				used++
			}
		}
		out = append(out, messages.Subnet{
			Base: s.Base.String(), CIDR: s.CIDR, StartIndex: s.StartIndex, Name: s.Name, Index: i,
			Available: s.Available(), Used: used, Remaining: s.Available() - used,
		})
	}
	return out
}
