package messages

// Port mapping states (PortMapping.State).
const (
	// PortMapOff: mapping is turned off (PORT_MAP=false) or cannot apply
	// (the peer address is bound to loopback); Detail says which.
	PortMapOff = "off"
	// PortMapSearching: asking the gateway; no answer yet.
	PortMapSearching = "searching"
	// PortMapMapped: the gateway keeps a mapping of the peer port.
	PortMapMapped = "mapped"
	// PortMapUnavailable: no gateway answered (or it refused) after a
	// few tries; the node asks again rarely and quietly.
	PortMapUnavailable = "unavailable"
)

// Port mapping protocols (PortMapping.Protocol).
const (
	PortMapNATPMP = "nat-pmp"  // NAT-PMP (RFC 6886)
	PortMapUPnP   = "upnp-igd" // UPnP Internet Gateway Device (WANIPConnection)
)

// PortMapping says whether the node's router maps its peer port, in
// /api/status and the invite diagnostics' summary (reach.portMapping).
// Published by transport/portmap; never modified once published.
type PortMapping struct {
	// State is one of the PortMap* states.
	State string `json:"state"`
	// Protocol that made the mapping ("nat-pmp" or "upnp-igd"); ""
	// unless mapped.
	Protocol string `json:"protocol,omitempty"`
	// Gateway is the router asked (the default route's gateway).
	Gateway string `json:"gateway,omitempty"`
	// External is the mapped public address of the peer port (UDP:
	// QUIC), "ip:port".
	External string `json:"external,omitempty"`
	// ExternalTCP is the mapped public address of the peer port's TCP
	// listener ("" when TCP is off or the router did not map it).
	ExternalTCP string `json:"externalTcp,omitempty"`
	// ExpiresAt is when the router drops the mapping unless renewed
	// (unix ms; renewed at half its lifetime).
	ExpiresAt int64 `json:"expiresAt,omitempty"`
	// Advertised: External is among the addresses the node advertises
	// (false when the router's own external address is private, as
	// behind a second NAT, where the mapping cannot help peers).
	Advertised bool `json:"advertised"`
	// Detail is why mapping is off, or the last failure.
	Detail string `json:"detail,omitempty"`
}
