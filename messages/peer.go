package messages

import (
	"errors"
	"fmt"
	"time"
)

// --- peer wire protocol (CBOR frames on a connection's control stream) ---

// Envelope kinds. Every frame on the control stream is one Envelope whose
// Kind names the single body field that is set.
const (
	KindHello  = "hello"  // Hello: first frame of each side
	KindAccept = "accept" // Accept: the sender admits the peer
	KindRefuse = "refuse" // Refuse: the sender will close; Reason says why
	KindVV     = "vv"     // VV: the sender's version vector (periodic)
	KindWant   = "want"   // VV: the sender found a gap; resend all above VV
	KindOps    = "ops"    // Ops: a batch of signed ledger ops
	KindPeers  = "peers"  // Peers: peer exchange
	KindPing   = "ping"   // Ping: liveness probe, answered with a pong
	KindPong   = "pong"   // Ping body echoed back
	// KindTunnels: Tunnels, the full set of tunnel ids the sender serves
	// (replace semantics: ids missing from it are no longer served).
	KindTunnels = "tunnels"
)

// Envelope is the one message type carried in control-stream frames.
type Envelope struct {
	Kind   string        `cbor:"1,keyasint"`
	Hello  *Hello        `cbor:"2,keyasint,omitempty"`
	Accept *Accept       `cbor:"3,keyasint,omitempty"`
	Refuse *Refuse       `cbor:"4,keyasint,omitempty"`
	VV     VersionVector `cbor:"5,keyasint,omitzero"` // omitted when empty (VersionVector.IsZero)
	Ops    []*Op         `cbor:"6,keyasint,omitempty"`
	Peers  []PeerInfo    `cbor:"7,keyasint,omitempty"`
	Ping   *Ping         `cbor:"8,keyasint,omitempty"`
	// Tunnels is a pointer so "no announcement" (nil) and "serves
	// nothing" (IDs empty) stay apart on the wire.
	Tunnels *TunnelIDs `cbor:"9,keyasint,omitempty"`

	// Reach bodies (reach.go).
	ConnectRequest *ConnectRequest `cbor:"20,keyasint,omitempty"`
	Connect        *Connect        `cbor:"21,keyasint,omitempty"`
	Probe          *Probe          `cbor:"22,keyasint,omitempty"`
	ProbeReply     *ProbeReply     `cbor:"23,keyasint,omitempty"`

	// Overlay body (overlay.go).
	Overlay *Overlay `cbor:"40,keyasint,omitempty"`

	// ShortIDs (set by the session that pushes ops live; never on the
	// wire) has MarshalEnvelope name each vote's claimant by its short
	// id (packed.go, Short ids).
	ShortIDs bool `cbor:"-"`
}

// Hello opens a session. Network is "" while the sender has not joined a
// network yet; then Join must carry the invite it redeems.
type Hello struct {
	ID      string       `cbor:"1,keyasint"`
	Network string       `cbor:"2,keyasint,omitempty"`
	Root    string       `cbor:"3,keyasint,omitempty"`
	Addrs   []string     `cbor:"4,keyasint,omitempty"`
	Join    *JoinRequest `cbor:"5,keyasint,omitempty"`
	// Observed is the address the sender sees this connection come from
	// (the receiver's address as its router maps it).
	Observed string `cbor:"6,keyasint,omitempty"`
	// Neighbours is the size of the sender's active view when it sent
	// this hello (overlay.go): 0 asks a full peer to make room for it.
	Neighbours int `cbor:"7,keyasint,omitempty"`
}

// JoinRequest redeems an invite. Proof is the joiner's signature over
// JoinProofBytes(nonce, joinerID): it binds the invite to the key the TLS
// handshake already proved.
type JoinRequest struct {
	Invite string `cbor:"1,keyasint"`
	Proof  []byte `cbor:"2,keyasint"`
}

// JoinProofBytes is what a joiner signs to redeem the invite with nonce.
func JoinProofBytes(nonce, joinerID string) []byte {
	return []byte("peerdns-join\x00" + nonce + "\x00" + joinerID)
}

// Accept admits the peer. When it answers a join, Network and Root tell the
// joiner which network it now belongs to.
type Accept struct {
	Network string `cbor:"1,keyasint,omitempty"`
	Root    string `cbor:"2,keyasint,omitempty"`
}

// Refusal reasons sent in Refuse.Code (stable, machine-readable).
const (
	RefuseNotWriter      = "not_writer"
	RefuseForeignNetwork = "foreign_network"
	RefuseInviteUsed     = "invite_used"
	RefuseInviteExpired  = "invite_expired"
	RefuseInviteInvalid  = "invite_invalid"
	RefuseNoNetwork      = "no_network"
	RefuseDuplicate      = "duplicate"
	RefuseInternal       = "internal"
	// RefuseViewFull: the peer's active view is full and the dialer
	// already has neighbours; it should try elsewhere and not redial this
	// peer for a while.
	RefuseViewFull = "view_full"
	// RefuseReplaced: the sender keeps another connection to us in this
	// one's place. The last frame of a TCP or relayed connection its
	// transport closes as replaced (transport.ReasonReplaced); the
	// receiving transport turns it into the connection's close error, so
	// a session never reads it.
	RefuseReplaced = "replaced"
)

// Refuse tells the peer why the sender closes the connection.
type Refuse struct {
	Code   string `cbor:"1,keyasint"`
	Reason string `cbor:"2,keyasint,omitempty"`
	// Sample: with RefuseViewFull, a bounded random sample of the
	// refuser's views (at most MaxSample), so the dialer learns where
	// else to ask, as a leave's sample does.
	Sample []PeerInfo `cbor:"3,keyasint,omitempty"`
}

// PeerInfo is one peer in a peer exchange: an id and where to reach it.
type PeerInfo struct {
	ID    string   `cbor:"1,keyasint"`
	Addrs []string `cbor:"2,keyasint,omitempty"`
}

// Ping carries the sender's clock so the pong gives a round-trip time.
type Ping struct {
	SentUnixNano int64 `cbor:"1,keyasint"`
	// NoPong: the sender wants no pong. Both ends of a session ping each
	// other, so each end's pings already tell the other it is alive; a
	// pong only measures the round trip, which a sampled one does.
	NoPong bool `cbor:"2,keyasint,omitempty"`
}

// TunnelIDs announces the tunnel ids a node serves: every id it has, each
// time (a set, sorted by the sender). An id is 64 lowercase hex: a tunnel
// server's public key, or for a secure server a value derived from its
// secret. IDs has no omitempty so an empty set still encodes as a body.
type TunnelIDs struct {
	IDs []string `cbor:"1,keyasint"`
}

// MaxTunnelIDs bounds the ids one peer may announce, so what a peer can
// make us keep is bounded (4096 ids are about 270 KiB on the wire).
const MaxTunnelIDs = 4096

// ErrBadTunnelIDs reports a tunnel announcement that breaks the rules of
// TunnelIDs.Validate; the receiver refuses the whole announcement.
var ErrBadTunnelIDs = errors.New("invalid tunnel announcement")

// ValidTunnelID reports whether id is exactly 64 lowercase hex digits.
func ValidTunnelID(id string) bool {
	if len(id) != 64 {
		return false
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// Validate checks the announcement's content: at most MaxTunnelIDs ids,
// each a ValidTunnelID. (Envelope.Validate checks only its shape, so a
// peer's bad announcement is refused and counted without closing the
// connection that carries its ledger traffic.)
func (t *TunnelIDs) Validate() error {
	if len(t.IDs) > MaxTunnelIDs {
		return fmt.Errorf("%w: %d ids, at most %d", ErrBadTunnelIDs, len(t.IDs), MaxTunnelIDs)
	}
	for _, id := range t.IDs {
		if !ValidTunnelID(id) {
			if len(id) > 80 {
				id = id[:80] + "…"
			}
			return fmt.Errorf("%w: id %q is not 64 lowercase hex", ErrBadTunnelIDs, id)
		}
	}
	return nil
}

// ErrBadEnvelope reports a frame whose kind and body do not match.
var ErrBadEnvelope = errors.New("malformed peer message")

// Validate checks that exactly the body named by Kind is set and that the
// required fields are present, so handlers can trust the shape.
func (e *Envelope) Validate() error {
	bodies := 0
	for _, set := range []bool{e.Hello != nil, e.Accept != nil, e.Refuse != nil, e.VV != nil, e.Ops != nil, e.Peers != nil, e.Ping != nil, e.Tunnels != nil} {
		if set {
			bodies++
		}
	}
	bodies += e.reachBodies()
	bodies += e.overlayBodies()
	bad := func(why string) error { return fmt.Errorf("%w: %s: %s", ErrBadEnvelope, e.Kind, why) }
	want := 1
	switch e.Kind {
	case KindHello:
		if e.Hello == nil || e.Hello.ID == "" {
			return bad("hello without id")
		}
		if j := e.Hello.Join; j != nil && (j.Invite == "" || len(j.Proof) == 0) {
			return bad("join without invite or proof")
		}
	case KindAccept:
		if e.Accept == nil {
			return bad("no body")
		}
	case KindRefuse:
		if e.Refuse == nil || e.Refuse.Code == "" {
			return bad("refuse without code")
		}
		if len(e.Refuse.Sample) > MaxSample {
			return bad(fmt.Sprintf("refuse with a sample of %d peers, at most %d", len(e.Refuse.Sample), MaxSample))
		}
	case KindVV, KindWant:
		// An empty version vector decodes as nil: a node with no ops.
		want = 0
		if e.VV != nil {
			want = 1
		}
	case KindOps:
		if len(e.Ops) == 0 {
			return bad("empty batch")
		}
		for _, op := range e.Ops {
			if op == nil || op.Writer == "" || op.Seq == 0 {
				return bad("op without writer or seq")
			}
		}
	case KindPeers:
		want = 0
		if e.Peers != nil {
			want = 1
		}
	case KindPing, KindPong:
		if e.Ping == nil {
			return bad("no body")
		}
	case KindTunnels:
		if e.Tunnels == nil {
			return bad("no body")
		}
	default:
		if ok, err := e.validateReach(); ok {
			if err != nil {
				return err
			}
		} else if ok, err := e.validateOverlay(); !ok {
			return fmt.Errorf("%w: unknown kind %q", ErrBadEnvelope, e.Kind)
		} else if err != nil {
			return err
		}
	}
	if bodies != want {
		return bad(fmt.Sprintf("%d bodies set", bodies))
	}
	return nil
}

// --- peers supervisor queries (admin API, health, CLI) ---

// GetPeers asks the peers supervisor for the connected peer ids.
type GetPeers struct{}

// GetPeersReply lists connected (handshake complete) peer ids, sorted.
type GetPeersReply struct{ IDs []string }

// GetPeerStatus asks for the node's network status (spec: Status).
type GetPeerStatus struct{}

// GetPeerStatusReply answers GetPeerStatus. IsMaster: this node is the
// network's root writer. IsConnected: at least one peer is connected.
// Ready: the endpoint listens and the node knows its network (or is
// joining one). Listening: the QUIC endpoint is up.
type GetPeerStatusReply struct {
	IsMaster    bool
	IsConnected bool
	PeersCount  int
	Ready       bool
	Listening   bool
	Joining     bool // waiting for an invite to be accepted
	Network     string
	Addr        string // local QUIC address
	Reach       *Reach // what the node believes about its reachability
}

// CreateInvite asks the peers supervisor for a one-time invite. TTL 0
// means the default (24 h).
type CreateInvite struct{ TTL time.Duration }

// MaxInviteTTL bounds the lifetime a caller may ask of an invite.
const MaxInviteTTL = 30 * 24 * time.Hour

// CreateInviteReply carries the invite string and its expiry (unix ms).
type CreateInviteReply struct {
	Invite    string
	ExpiresAt int64
	Err       error
}

// GetPeerDiagnostics asks for the invites/connection diagnostics.
type GetPeerDiagnostics struct{}

// PeerDiagnosticsReply is the diagnostics view. Ready is false while the
// node is initialising (the admin API answers 503 then).
type PeerDiagnosticsReply struct {
	Ready            bool
	Summary          PeerDiagSummary
	Peers            []PeerDiag
	Recommendations  []string
	ConnectionIssues []ConnectionIssue
}

// PeerDiagSummary counts what the supervisor saw since start.
type PeerDiagSummary struct {
	PeerID             string `json:"peerId"`
	Network            string `json:"networkKey"`
	IsMaster           bool   `json:"isMaster"`
	Joining            bool   `json:"joining"`
	ListenAddr         string `json:"listenAddr"`
	ConnectedPeers     int    `json:"connectedPeers"`
	KnownPeers         int    `json:"knownPeers"`
	ConnectionAttempts int64  `json:"connectionAttempts"`
	SuccessfulDials    int64  `json:"successfulConnections"`
	FailedAttempts     int64  `json:"failedConnections"`
	InboundAccepted    int64  `json:"inboundConnections"`
	Refused            int64  `json:"refusedConnections"`
	InvitesCreated     int64  `json:"invitesCreated"`
	InvitesRedeemed    int64  `json:"invitesRedeemed"`
	InvitesRefused     int64  `json:"invitesRefused"`
	OpsSent            int64  `json:"opsSent"`
	OpsReceived        int64  `json:"opsReceived"`
	OpsDuplicate       int64  `json:"opsDuplicate"` // received ops the ledger already had
	OpsRepaired        int64  `json:"opsRepaired"`  // of opsSent: sent to fill what a peer's vector, want or graft showed it lacked
	OpsGrafted         int64  `json:"opsGrafted"`   // of opsRepaired: asked for by a graft
	GapRepairs         int64  `json:"gapRepairs"`   // "want" requests after a gap
	// RefusedPending counts inbound connections the endpoint refused at
	// their first packet because too many were not admitted yet.
	RefusedPending int64 `json:"refusedPendingInbound"`
	// RefusedTunnelAnnouncements counts tunnel announcements from peers
	// that failed TunnelIDs.Validate (bad id, too many ids).
	RefusedTunnelAnnouncements int64 `json:"refusedTunnelAnnouncements"`
	// StalledSessions counts sessions closed because their peer began a
	// control frame and did not finish it in time
	// (transport.ErrFrameStalled), or sent no whole frame for the peers
	// supervisor's CloseSilentAfter.
	StalledSessions int64 `json:"stalledSessions"`
	// LearnedNotWriters counts peers named in peer exchanges and samples
	// that were neither remembered nor dialed: the ledger does not know
	// them as writers (or too many were being asked about at once).
	LearnedNotWriters int64 `json:"learnedNotWriters"`
	// Reach: NAT kind, advertised and observed addresses, punching.
	Reach *Reach `json:"reach,omitempty"`
	// Paths counts the TCP and relay paths (nil: the endpoint has none).
	Paths *PathCounters `json:"paths,omitempty"`
	// Overlay: the active view, heartbeats and lazy push (overlay.go).
	Overlay *OverlayDiag `json:"overlay,omitempty"`
}

// PeerDiag is one known or connected peer.
type PeerDiag struct {
	ID          string   `json:"id"`
	State       string   `json:"state"` // connected, handshaking, disconnected
	Direction   string   `json:"direction,omitempty"`
	Addrs       []string `json:"addresses"`
	RemoteAddr  string   `json:"remoteAddr,omitempty"`
	ConnectedAt int64    `json:"connectedAt,omitempty"` // unix ms
	LastSeen    int64    `json:"lastSeen,omitempty"`    // unix ms
	RTTMillis   float64  `json:"rttMs,omitempty"`
	OpsSent     int64    `json:"opsSent"`
	OpsReceived int64    `json:"opsReceived"`
	OpsDup      int64    `json:"opsDuplicate"`
	// AnnouncedTunnels is how many tunnel ids the peer announces now.
	AnnouncedTunnels int `json:"announcedTunnels"`
	// Feeds: we did not ask the peer to announce op ids instead of
	// pushing ops (a link of the dissemination tree toward us).
	Feeds bool `json:"feeds,omitempty"`
	// Path is how the connection reaches the peer: "direct" (dialed or
	// accepted at a known address), "punched" (opened by hole punching
	// after an introduction); other transports add their own ("tcp",
	// "relayed"). Via names the peer that introduced (punched) or relays.
	Path string `json:"path,omitempty"`
	Via  string `json:"via,omitempty"`
	// Transport is the connection's path: quic, tcp or relayed; Relay
	// is the relay's peer id when relayed.
	Transport string `json:"transport,omitempty"`
	Relay     string `json:"relay,omitempty"`
	// QUIC is the connection's own view of its path when it runs on
	// QUIC (absent on TCP and relayed paths).
	QUIC *QUICLink `json:"quic,omitempty"`
}

// QUICLink is what a QUIC connection's loss recovery and congestion
// controller know of its path: packets since the connection started
// (lost: declared lost and sent again), the congestion window in bytes
// and quic-go's smoothed round trip in milliseconds.
type QUICLink struct {
	PacketsSent      uint64  `json:"packetsSent"`
	PacketsReceived  uint64  `json:"packetsReceived"`
	PacketsLost      uint64  `json:"packetsLost"`
	CongestionWindow uint64  `json:"congestionWindow"`
	SmoothedRTTMs    float64 `json:"smoothedRttMs"`
}

// ConnectionIssue is one failed connection attempt or refusal.
type ConnectionIssue struct {
	Time   int64  `json:"time"` // unix ms
	Addr   string `json:"address,omitempty"`
	PeerID string `json:"peerId,omitempty"`
	Kind   string `json:"kind"` // dial, handshake, refused, protocol
	Reason string `json:"reason"`
}
