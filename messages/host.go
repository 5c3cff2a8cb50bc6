package messages

import (
	"errors"
	"fmt"
	"net/netip"
	"strconv"
	"strings"
)

// Host is a parsed Host header, origin authority or allowed-host entry.
type Host struct {
	Name string     // lower case, no trailing dot; IPs in netip's form
	IP   netip.Addr // valid when the name is an IP literal
	Port string     // canonical decimal, "" when absent
}

// ParseHost reads "name", "name:port", "1.2.3.4:port", "[::1]:port" as a
// Host header carries them. It is strict: anything a browser would not
// send (userinfo, paths, spaces, an unbracketed IPv6 address, a zone, a
// port out of range) is an error, so odd spellings never match an entry.
func ParseHost(s string) (Host, error) {
	var h Host
	if s == "" {
		return h, errors.New("empty")
	}
	name := s
	var port string
	hasPort := false
	if s[0] == '[' {
		end := strings.IndexByte(s, ']')
		if end < 0 {
			return h, errors.New("missing ]")
		}
		name = s[1:end]
		rest := s[end+1:]
		if rest != "" {
			if rest[0] != ':' {
				return h, errors.New("junk after ]")
			}
			port, hasPort = rest[1:], true
		}
		ip, err := netip.ParseAddr(name)
		if err != nil || !ip.Is6() || ip.Zone() != "" {
			return h, errors.New("bad IPv6 literal")
		}
		h.IP = ip.Unmap()
	} else {
		if i := strings.LastIndexByte(s, ':'); i >= 0 {
			name, port, hasPort = s[:i], s[i+1:], true
		}
		if strings.IndexByte(name, ':') >= 0 {
			return h, errors.New("IPv6 address without brackets")
		}
		name = strings.ToLower(strings.TrimSuffix(name, "."))
		if name == "" || len(name) > 253 {
			return h, errors.New("bad name length")
		}
		for i := 0; i < len(name); i++ {
			c := name[i]
			if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '.' || c == '_') {
				return h, fmt.Errorf("character %q in name", c)
			}
		}
		if ip, err := netip.ParseAddr(name); err == nil {
			h.IP = ip
		}
	}
	if h.IP.IsValid() {
		h.Name = h.IP.String()
	} else {
		h.Name = name
	}
	if hasPort && port != "" {
		if len(port) > 5 {
			return h, errors.New("bad port")
		}
		n, err := strconv.Atoi(port)
		if err != nil || n < 1 || n > 65535 || port[0] == '+' || port[0] == '-' {
			return h, errors.New("bad port")
		}
		h.Port = strconv.Itoa(n)
	}
	return h, nil
}

// CheckHosts validates a list of allowed-host entries ("name",
// "name:port", IP literals): the settings that hold such lists and the
// admin guard read them with ParseHost alike.
func CheckHosts(list []string) error {
	var errs []error
	for _, s := range list {
		if _, err := ParseHost(s); err != nil {
			errs = append(errs, fmt.Errorf("allowed host %q: %w", s, err))
		}
	}
	return errors.Join(errs...)
}
