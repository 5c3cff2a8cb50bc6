package vif

import (
	"errors"
	"net"
	"net/netip"
	"os"
	"syscall"

	"github.com/vishvananda/netlink"
)

// errPermission matches the kernel's refusal without CAP_NET_ADMIN.
var errPermission = os.ErrPermission

// FixCommand is the command that lets the node's binary manage its
// interface (and bind ports below 1024) without running as root.
const FixCommand = "sudo setcap cap_net_admin,cap_net_bind_service=+ep $(command -v peerdns)"

// privilegeAdvice follows a permission error.
const privilegeAdvice = "putting a domain's address on an interface needs CAP_NET_ADMIN: run the node as root, " +
	"or allow its binary once with `" + FixCommand + "`"

type linuxSystem struct{}

func newSystem() system { return linuxSystem{} }

func (linuxSystem) link(name string) (netlink.Link, error) { return netlink.LinkByName(name) }

func (s linuxSystem) ensure(name string) (made bool, _ error) {
	l, err := s.link(name)
	if err != nil {
		var nf netlink.LinkNotFoundError
		if !errors.As(err, &nf) {
			return false, perm(err)
		}
		err := netlink.LinkAdd(&netlink.Dummy{LinkAttrs: netlink.LinkAttrs{Name: name}})
		if errors.Is(err, syscall.EOPNOTSUPP) {
			// A kernel built without the dummy driver (some VM and
			// container kernels): a bridge with no ports does the same
			// job, as docker0 does with no containers: its addresses are
			// local whatever its carrier.
			err = netlink.LinkAdd(&netlink.Bridge{LinkAttrs: netlink.LinkAttrs{Name: name}})
		}
		if err != nil && !errors.Is(err, syscall.EEXIST) {
			return false, perm(err)
		}
		made = err == nil
		if l, err = s.link(name); err != nil {
			return made, perm(err)
		}
	}
	switch l.(type) {
	case *netlink.Dummy, *netlink.Bridge:
	default:
		return made, errors.New("a link of that name exists and is neither a dummy link nor a bridge")
	}
	return made, perm(netlink.LinkSetUp(l))
}

// listAddrs lists the host addresses (/32, /128) on the link, those add
// puts there; not the IPv6 link-local one the kernel gives it.
func (s linuxSystem) listAddrs(name string) ([]netip.Addr, error) {
	l, err := s.link(name)
	if err != nil {
		return nil, perm(err)
	}
	list, err := netlink.AddrList(l, netlink.FAMILY_ALL)
	if err != nil {
		return nil, perm(err)
	}
	var out []netip.Addr
	for _, a := range list {
		ip, ok := netip.AddrFromSlice(a.IP)
		if ones, bits := a.Mask.Size(); !ok || ones != bits {
			continue
		}
		if ip = ip.Unmap(); Needs(ip) && !ip.IsLinkLocalUnicast() {
			out = append(out, ip)
		}
	}
	return out, nil
}

func hostNet(a netip.Addr) *netlink.Addr {
	return &netlink.Addr{IPNet: &net.IPNet{IP: net.IP(a.AsSlice()), Mask: net.CIDRMask(a.BitLen(), a.BitLen())}}
}

func (s linuxSystem) add(name string, a netip.Addr) error {
	l, err := s.link(name)
	if err != nil {
		return perm(err)
	}
	if err := netlink.AddrAdd(l, hostNet(a)); err != nil && !errors.Is(err, syscall.EEXIST) {
		return perm(err)
	}
	return nil
}

func (s linuxSystem) del(name string, a netip.Addr) error {
	l, err := s.link(name)
	if err != nil {
		return perm(err)
	}
	if err := netlink.AddrDel(l, hostNet(a)); err != nil && !errors.Is(err, syscall.EADDRNOTAVAIL) {
		return perm(err)
	}
	return nil
}

// remove deletes the link; its addresses go with it.
func (s linuxSystem) remove(name string, _ []netip.Addr) error {
	l, err := s.link(name)
	if err != nil {
		var nf netlink.LinkNotFoundError
		if errors.As(err, &nf) {
			return nil
		}
		return perm(err)
	}
	return perm(netlink.LinkDel(l))
}

// perm makes EPERM from netlink match os.ErrPermission.
func perm(err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, syscall.EPERM) || errors.Is(err, syscall.EACCES) {
		return &os.SyscallError{Syscall: "netlink", Err: syscall.EPERM}
	}
	return err
}
