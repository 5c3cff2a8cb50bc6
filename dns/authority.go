package dns

import (
	"net"
	"net/netip"
)

// listenAddrs is the address of zone.NSName, the name server of the
// zones the node serves: the host of the listen address when it is one
// specific address; none when it is every address (0.0.0.0, [::], ":53")
// or a host name, since no single address then reaches this server from
// everywhere (the NS record is still answered, without glue).
func listenAddrs(addr string) []netip.Addr {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return nil
	}
	ip, err := netip.ParseAddr(host)
	if err != nil || ip.IsUnspecified() || ip.Zone() != "" {
		return nil
	}
	return []netip.Addr{ip.Unmap()}
}
