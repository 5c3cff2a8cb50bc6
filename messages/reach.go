package messages

import (
	"fmt"
	"net/netip"
)

// --- reach: observed addresses, introductions, dial-back probes ---
//
// A peer learns the address its router gave it from the peers it talks to
// (Hello.Observed), asks a connected peer to introduce it to a peer it
// cannot dial (ConnectRequest), and the introducer tells both sides where
// to punch (Connect). Probe and ProbeReply find the kind of NAT a node is
// behind: the prober asks a peer to send a packet from a second UDP
// socket (does unsolicited traffic reach us?) and to say where our packet
// to that socket came from (does our router keep one mapping for every
// destination?).

// Reach envelope kinds.
const (
	// KindConnectRequest: ConnectRequest, "introduce me to Peer".
	KindConnectRequest = "connect-request"
	// KindConnect: Connect, "Peer wants to talk to you: dial it at Addrs now".
	KindConnect = "connect"
	// KindProbe: Probe, a NAT-type probe request.
	KindProbe = "probe"
	// KindProbeReply: ProbeReply, the prober's answer (sent twice: once
	// with the probe socket's port, once with what it saw).
	KindProbeReply = "probe-reply"
)

// MaxConnectAddrs bounds the addresses one Connect may name.
const MaxConnectAddrs = 8

// ConnectRequest asks the receiver, a peer connected to both, to
// introduce the sender to Peer.
type ConnectRequest struct {
	Peer string `cbor:"1,keyasint"`
}

// Connect tells the receiver that Peer is about to dial it and where to
// dial Peer at the same moment, from its one UDP socket. Observed is where
// the introducer sees Peer's own authenticated connection come from; Addrs
// are the addresses Peer put in its hello to the introducer. Only IP
// literals: a peer cannot make the receiver resolve a name.
type Connect struct {
	Peer     string   `cbor:"1,keyasint"`
	Observed string   `cbor:"2,keyasint,omitempty"`
	Addrs    []string `cbor:"3,keyasint,omitempty"`
}

// Probe asks the receiver to send one dial-back packet carrying Nonce
// from a fresh UDP socket of its own to the address it sees the sender
// at, then to tell the sender that socket's port (ProbeReply.Port) and,
// once the sender's packet to that port arrives, where it came from
// (ProbeReply.Seen).
type Probe struct {
	Nonce uint64 `cbor:"1,keyasint"`
}

// ProbeReply answers a Probe: Port is the receiver's probe socket (the
// first reply), Seen the source address of the packet that reached it
// from the prober ("" while none did; the second reply).
type ProbeReply struct {
	Nonce uint64 `cbor:"1,keyasint"`
	Port  int    `cbor:"2,keyasint,omitempty"`
	Seen  string `cbor:"3,keyasint,omitempty"`
}

// ProbeMagic opens a probe packet: a first byte of 0 has QUIC's fixed bit
// clear, so the QUIC endpoint hands the packet to non-QUIC readers. A
// probe packet is the magic and an 8-byte big-endian nonce.
const ProbeMagic = "\x00PDNPROBE"

// reachBodies counts the reach bodies set on e.
func (e *Envelope) reachBodies() int {
	n := 0
	for _, set := range []bool{e.ConnectRequest != nil, e.Connect != nil, e.Probe != nil, e.ProbeReply != nil} {
		if set {
			n++
		}
	}
	return n
}

// validateReach checks the shape of a reach envelope. ok is false when
// Kind is not a reach kind.
func (e *Envelope) validateReach() (ok bool, err error) {
	bad := func(why string) error { return fmt.Errorf("%w: %s: %s", ErrBadEnvelope, e.Kind, why) }
	switch e.Kind {
	case KindConnectRequest:
		if e.ConnectRequest == nil || e.ConnectRequest.Peer == "" {
			return true, bad("no peer")
		}
	case KindConnect:
		if e.Connect == nil || e.Connect.Peer == "" {
			return true, bad("no peer")
		}
		if len(e.Connect.Addrs) > MaxConnectAddrs {
			return true, bad("too many addresses")
		}
	case KindProbe:
		if e.Probe == nil {
			return true, bad("no body")
		}
	case KindProbeReply:
		if e.ProbeReply == nil {
			return true, bad("no body")
		}
	default:
		return false, nil
	}
	return true, nil
}

// PunchAddr reports whether s is an address a node may send punch or
// probe packets to: an IP literal with a port (no name to resolve), not
// unspecified, multicast or the IPv4 broadcast address.
func PunchAddr(s string) (netip.AddrPort, bool) {
	ap, err := netip.ParseAddrPort(s)
	if err != nil || ap.Port() == 0 {
		return netip.AddrPort{}, false
	}
	ip := ap.Addr().Unmap()
	if ip.IsUnspecified() || ip.IsMulticast() || ip == netip.AddrFrom4([4]byte{255, 255, 255, 255}) || ip.Zone() != "" {
		return netip.AddrPort{}, false
	}
	return netip.AddrPortFrom(ip, ap.Port()), true
}

// NAT kinds a node reports about itself (Reach.NAT).
const (
	NATUnknown             = "unknown"              // not enough evidence yet
	NATPublic              = "public"               // peers see our own interface address
	NATEndpointIndependent = "endpoint-independent" // one public mapping for every destination
	NATSymmetric           = "symmetric"            // a new mapping (port) per destination
	NATNoUDP               = "no-udp"               // UDP does not get through at all
)

// Reach is what a node believes about its own reachability: in
// /api/status ("reach") and the invite diagnostics' summary.
type Reach struct {
	// NAT is one of the NAT* kinds.
	NAT string `json:"nat"`
	// Advertised are the addresses put in hellos and invites: the
	// --advertise-addr ones, the router's port mapping, observed
	// addresses two peers agree on, then interface addresses.
	Advertised []string `json:"advertised"`
	// Manual are the --advertise-addr addresses.
	Manual []string `json:"manual"`
	// Observed lists each distinct address peers report seeing us at,
	// with how many connected peers report it.
	Observed []ObservedAddr `json:"observed"`
	// DialBack: a peer's packet from a socket we never sent to reached
	// us (nil: not probed yet).
	DialBack *bool `json:"dialBack"`
	// ProbedAt is when the last probe finished (unix ms, 0: never).
	ProbedAt int64 `json:"probedAt"`
	// Punches counts hole-punching attempts started, PunchedConnections
	// those that gave a connection; RefusedConnects counts connect
	// messages refused (sender not a writer, bad or unreported address,
	// over the rate limit).
	Punches            int64 `json:"punches"`
	PunchedConnections int64 `json:"punchedConnections"`
	RefusedConnects    int64 `json:"refusedConnects"`
	Introductions      int64 `json:"introductions"`
	// QUICRetries counts QUIC dials to peers connected over TCP (a
	// QUIC connection that comes up replaces the TCP one);
	// QUICRetriesFailed those that did not connect.
	QUICRetries       int64 `json:"quicRetries"`
	QUICRetriesFailed int64 `json:"quicRetriesFailed"`
	// PortMapping says whether the router maps the peer port (NAT-PMP)
	// and to which external address (null where the node has no port
	// mapper).
	PortMapping *PortMapping `json:"portMapping"`
}

// ObservedAddr is one address peers report seeing us at.
type ObservedAddr struct {
	Addr      string `json:"address"`
	Reporters int    `json:"reporters"`
}
