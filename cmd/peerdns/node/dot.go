package node

import (
	"crypto/tls"
	"fmt"
	"net"
	"net/netip"
	"strings"
)

// startDoT serves DNS over TLS on cfg.DoTAddr (off when empty) with the
// admin domain's certificate from the node's CA, whatever the SNI: a DoT
// client is configured with the node's address and, to verify it, the
// admin domain as its authentication name (RFC 8310 §8).
func (n *Node) startDoT() error {
	if n.cfg.DoTAddr == "" {
		return nil
	}
	domain := strings.ToLower(n.cfg.AdminDomain)
	cfg := &tls.Config{
		MinVersion: tls.VersionTLS12, // RFC 8310 §9 (RFC 7525)
		GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) {
			var ip netip.Addr
			if s := n.pub.Load(); s != nil {
				ip = s.Internal[domain]
			}
			return n.ca.Certificate(domain, ip)
		},
	}
	if err := n.dns.ServeTLS(n.cfg.DoTAddr, cfg); err != nil {
		return fmt.Errorf("dns over tls: %w", err)
	}
	if a, err := net.ResolveTCPAddr("tcp", n.dns.TLSAddr()); err == nil {
		n.announce("dot", a)
	}
	return nil
}
