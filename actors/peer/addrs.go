package peer

import (
	"net"
	"net/netip"
	"sort"
	"strconv"
)

// advertised lists the addresses peers can dial us at. A wildcard bind
// (0.0.0.0, ::) is expanded to the host's interface addresses, loopback
// last, because peers on other hosts cannot use 0.0.0.0.
func advertised(bound net.Addr) []string {
	ua, ok := bound.(*net.UDPAddr)
	if !ok {
		return []string{bound.String()}
	}
	if !ua.IP.IsUnspecified() {
		return []string{ua.String()}
	}
	port := strconv.Itoa(ua.Port)
	var out, loop []string
	ifAddrs, err := net.InterfaceAddrs()
	if err != nil {
		return []string{net.JoinHostPort("127.0.0.1", port)}
	}
	for _, a := range ifAddrs {
		pfx, err := netip.ParsePrefix(a.String())
		if err != nil {
			continue
		}
		ip := pfx.Addr()
		if ip.IsLinkLocalUnicast() || ip.IsMulticast() || (ua.IP.To4() != nil && !ip.Is4()) {
			continue
		}
		s := net.JoinHostPort(ip.String(), port)
		if ip.IsLoopback() {
			loop = append(loop, s)
		} else {
			out = append(out, s)
		}
	}
	sort.Strings(out)
	return append(out, loop...)
}

// validAddr reports whether s is a dialable host:port (IP literal or name).
func validAddr(s string) bool {
	host, port, err := net.SplitHostPort(s)
	if err != nil || host == "" || len(s) > 255 {
		return false
	}
	p, err := strconv.Atoi(port)
	if err != nil || p <= 0 || p > 65535 {
		return false
	}
	if ip, err := netip.ParseAddr(host); err == nil {
		return !ip.IsUnspecified() && !ip.IsMulticast()
	}
	return true
}

// mergeAddrs adds b to a without duplicates, keeping at most max.
func mergeAddrs(a []string, b []string, max int) ([]string, bool) {
	changed := false
	seen := make(map[string]bool, len(a))
	for _, s := range a {
		seen[s] = true
	}
	for _, s := range b {
		if len(a) >= max {
			break
		}
		if !seen[s] && validAddr(s) {
			a = append(a, s)
			seen[s] = true
			changed = true
		}
	}
	return a, changed
}
