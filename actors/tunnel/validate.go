package tunnel

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/netip"
	"strings"
	"unicode"
	"unicode/utf8"

	"peerdns/messages"
)

// defaultHost is the target host of a server created without one.
const defaultHost = "127.0.0.1"

// maxSeedLen bounds a server's key seed.
const maxSeedLen = 1024

func badf(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{messages.ErrBadTunnel}, args...)...)
}

func checkPort(p int) error {
	if p < 1 || p > 65535 {
		return badf("port %d is out of range (1-65535)", p)
	}
	return nil
}

// validHostname reports whether s is a DNS name: dot-separated labels of
// letters, digits and inner hyphens, each 1-63 bytes, 253 in all.
func validHostname(s string) bool {
	s = strings.TrimSuffix(s, ".")
	if s == "" || len(s) > 253 {
		return false
	}
	for _, l := range strings.Split(s, ".") {
		if l == "" || len(l) > 63 || l[0] == '-' || l[len(l)-1] == '-' {
			return false
		}
		for i := 0; i < len(l); i++ {
			c := l[i]
			if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
				return false
			}
		}
	}
	return true
}

// normDomain lowercases a domain and drops a trailing dot.
func normDomain(d string) string {
	return strings.TrimSuffix(strings.ToLower(strings.TrimSpace(d)), ".")
}

// normServerOpts checks and normalises a tunnel-create body. Nothing is
// created when it fails (ErrBadTunnel).
func normServerOpts(o messages.TunnelServerOpts) (messages.TunnelServerOpts, error) {
	o.Name = strings.TrimSpace(o.Name)
	o.Host = strings.TrimSpace(o.Host)
	if o.Host == "" {
		o.Host = defaultHost
	}
	if err := checkPort(o.Port); err != nil {
		return o, err
	}
	if a, err := netip.ParseAddr(strings.Trim(o.Host, "[]")); err == nil {
		o.Host = a.String()
	} else if !validHostname(o.Host) {
		return o, badf("host %q is neither an IP address nor a host name", o.Host)
	}
	if len(o.Key) > maxSeedLen {
		return o, badf("key is longer than %d bytes", maxSeedLen)
	}
	if o.Domain != "" {
		o.Domain = normDomain(o.Domain)
		if !validHostname(o.Domain) {
			return o, badf("domain %q is not a domain name", o.Domain)
		}
		if o.Secure {
			// The claim's hash is the URL every peer reads: for a secure
			// server that is the secret itself.
			return o, badf("a secure server cannot claim a domain: the claim would publish its secret")
		}
	}
	return o, nil
}

// maxServerName bounds a server's name, in bytes.
const maxServerName = 128

// checkServerName checks the name of a server being created: a label
// for listings (the panel, `peerdns tunnels`), so at most maxServerName
// bytes of printable text, spaces included. A server stored before
// this check keeps its name and runs: normServerOpts, which the start
// also runs on stored servers, does not look at it.
func checkServerName(name string) error {
	if len(name) > maxServerName {
		return badf("name is longer than %d bytes", maxServerName)
	}
	if i := strings.IndexFunc(name, func(r rune) bool { return !unicode.IsPrint(r) }); i >= 0 {
		r, _ := utf8.DecodeRuneInString(name[i:])
		return badf("name %q has %q: use printable characters", name, r)
	}
	return nil
}

// normClientOpts checks and normalises a tunnel-client-create body
// (ownership of the domain is checked against the view separately).
func normClientOpts(o messages.TunnelClientOpts) (messages.TunnelClientOpts, clientKey, error) {
	o.Domain = normDomain(o.Domain)
	o.ServiceName = strings.TrimSpace(o.ServiceName)
	o.Protocol = strings.ToLower(strings.TrimSpace(o.Protocol))
	switch {
	case o.Domain == "":
		return o, clientKey{}, badf("domain is required")
	case strings.TrimSpace(o.Key) == "":
		return o, clientKey{}, badf("key is required")
	case o.Port == 0:
		return o, clientKey{}, badf("port is required")
	}
	if !validHostname(o.Domain) {
		return o, clientKey{}, badf("domain %q is not a domain name", o.Domain)
	}
	if err := checkPort(o.Port); err != nil {
		return o, clientKey{}, err
	}
	k, err := parseClientKey(o.Key)
	if err != nil {
		return o, clientKey{}, err
	}
	o.Key = urlScheme + k.Plain
	switch o.Protocol {
	case "", "tcp":
		o.Protocol = "tcp"
	case "udp":
	default:
		return o, clientKey{}, badf("protocol %q is neither tcp nor udp", o.Protocol)
	}
	if o.ServiceName != "" && !validServiceName(o.ServiceName) {
		return o, clientKey{}, badf("serviceName %q: use 1-63 letters, digits, '-', '_' or '.'", o.ServiceName)
	}
	return o, k, nil
}

func validServiceName(s string) bool {
	if len(s) > 63 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.') {
			return false
		}
	}
	return s != ""
}

// newID makes a server or client id: 16 hex digits.
func newID() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
