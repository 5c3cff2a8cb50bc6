// Package portmap asks the node's router to forward its peer port, with
// NAT-PMP (RFC 6886), so peers outside can dial the node without hole
// punching or a relay.
//
// It owns: finding the gateway (the default route's, read from the
// routing table by github.com/jackpal/gateway), asking it for a mapping
// of the peer port for UDP (QUIC) and, when the node listens on TCP too,
// for TCP on the same external port (both through
// github.com/jackpal/go-nat-pmp, which encodes and decodes the protocol:
// nothing here parses packets by hand), renewing the mapping at half the
// lifetime the router granted, deleting it on Close, and publishing what
// it holds (messages.PortMapping) for the peers supervisor, which
// advertises the external address beside observed and --advertise-addr
// ones and shows it in /api/status and the invite diagnostics.
//
// Why NAT-PMP. It is what miniupnpd (the UPnP/NAT-PMP daemon of
// OpenWrt, pfSense, and most Linux-based home routers) and Apple's
// routers answer, its client is one small, well-kept library, and PCP's
// servers (miniupnpd among them) answer NAT-PMP requests too. A router
// that speaks only PCP answers with version 2, which the library reports
// as an error: the node then shows "unavailable" with that reason. UPnP
// IGD (SSDP discovery, SOAP over HTTP) is not used: discovery by
// multicast cannot be restricted to the gateway's answer as simply, and
// the routers that offer it almost always offer NAT-PMP as well.
//
// Defaults, as Tailscale and Syncthing do: on, unless PORT_MAP=false, or
// the peer address is bound to loopback (no router can forward to it;
// this also keeps tests on 127.0.0.1 from talking to the host's router).
// Asked lifetime 2 h (RFC 6886 §3.3 recommends 7200 s); the router may
// grant less, and the mapping is renewed at half of what it granted.
//
// Cost when there is no router to answer: one small UDP request per try,
// each bounded by Config.Timeout (a gateway that refuses, with an ICMP
// port-unreachable, fails the try at once); three quick tries, then one
// Info line and a quiet retry every Config.Retry (15 min), so a router
// that is rebooted or a laptop moved to another network is found again.
//
// Security:
//   - A response is trusted only from the gateway: the library sends from
//     a UDP socket connected to gateway:5351 (the kernel drops datagrams
//     from anywhere else) and checks the sender again.
//   - Only the node's own peer port is ever mapped: the internal port is
//     Config.Port and nothing else, and a response naming another
//     internal port is refused. The request's source address is the
//     node's own (the bound address when one is given), and the router
//     maps to the address the request came from.
//   - Tries are bounded (Config.Tries quick ones, then one per
//     Config.Retry; renewals while a mapping lives follow its lifetime).
//   - The external address is advertised only when it is public: a
//     private, shared (100.64/10), loopback or link-local one (a router
//     behind another NAT) is shown but not advertised.
//
// It must never: map a port other than the peer port, act on an answer
// from anyone but the gateway, or block the node's start or stop beyond
// one request's Timeout.
package portmap
