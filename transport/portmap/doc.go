// Package portmap asks the node's router to forward its peer port, with
// NAT-PMP (RFC 6886) or else UPnP IGD, so peers outside can dial the
// node without hole punching or a relay.
//
// It owns: finding the gateway (the default route's, read from the
// routing table by github.com/jackpal/gateway), asking it for a mapping
// of the peer port for UDP (QUIC) and, when the node listens on TCP too,
// for TCP on the same external port, renewing the mapping at half its
// lifetime, deleting it on Close, and publishing what it holds
// (messages.PortMapping) for the peers supervisor, which advertises the
// external address beside observed and --advertise-addr ones and shows
// it in /api/status and the invite diagnostics. The protocols are spoken
// by libraries that encode and decode them (nothing here parses packets
// or XML by hand): github.com/jackpal/go-nat-pmp and
// github.com/huin/goupnp.
//
// Protocols, in order. NAT-PMP first: one datagram to the gateway, an
// answer or an ICMP refusal at once; it is what miniupnpd (the daemon of
// OpenWrt, pfSense and most Linux-based home routers) and Apple's routers
// answer, and PCP servers (miniupnpd among them) answer NAT-PMP requests
// too. A router that speaks only PCP answers with version 2, which the
// library reports as an error. Then UPnP IGD (upnp.go), which most
// consumer routers offer, often alone: an SSDP search (2 s), the device
// description and SOAP calls to its WANIPConnection service (v2, else
// v1). UPnP asks for the peer port as the external port too; when the
// router answers that another mapping holds it (ConflictInMappingEntry,
// 718: another node behind the same router on the same port), it lets
// the router pick one (AddAnyPortMapping, IGDv2) or else asks for up to
// eight random ones of 1024-65535 (IGDv1), as miniupnpc's and
// Tailscale's clients do, and TCP is asked for on the port UDP got; a
// NAT-PMP router picks one itself. A renewal asks for the port it holds.
// A renewal uses the protocol that made the mapping. A renewal that
// finds another gateway (the machine moved to another network) maps the
// port there and deletes the old router's mapping; when the new router
// maps nothing, the old mapping is given up at once (deleted if its
// router still answers, no longer published nor advertised), since it
// leads nowhere from the new network.
//
// Defaults, as Tailscale and Syncthing do: on, unless PORT_MAP=false, or
// the peer address is bound to loopback (no router can forward to it;
// this also keeps tests on 127.0.0.1 from talking to the host's router).
// Asked lifetime 2 h (RFC 6886 §3.3 recommends 7200 s); a NAT-PMP router
// may grant less, and the mapping is renewed at half of what it granted
// (a router that says it grants more is taken at what was asked).
// A UPnP router that takes only permanent leases (error 725) gets one;
// it is renewed on the same schedule and deleted on Close.
//
// Cost when there is no router to answer: per try, one small NAT-PMP
// request bounded by Config.Timeout (a gateway that refuses, with an
// ICMP port-unreachable, fails it at once) and one SSDP search (2 s);
// three quick tries, then one Info line and a quiet retry every
// Config.Retry (15 min), so a router that is rebooted or a laptop moved
// to another network is found again. A gateway on loopback (there is
// none in real networks) gets no SSDP search, which would go out on the
// host's network.
//
// Security:
//   - A response is trusted only from the gateway: the NAT-PMP library
//     sends from a UDP socket connected to gateway:5351 (the kernel drops
//     datagrams from anywhere else) and checks the sender again; of the
//     SSDP answers (anyone on the LAN may send one) only a device whose
//     description URL is on the gateway's address is used, so every
//     HTTP/SOAP request goes to the gateway alone.
//   - Only the node's own peer port is ever mapped: the internal port is
//     Config.Port and nothing else, and a NAT-PMP response naming another
//     internal port is refused. The internal client is the node's own
//     address (the bound one, or the source address towards the
//     gateway); NAT-PMP routers map to where the request came from.
//   - What it cannot stop: a host on the LAN that forges the gateway's
//     source address can make the node believe, and advertise, a wrong
//     external address, as a wrong --advertise-addr would. Peers then
//     dial it and fail the handshake (they check the node's key); the
//     node's other addresses still work.
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
