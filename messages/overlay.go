package messages

import (
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"slices"
)

// --- overlay: bounded neighbours, heartbeats, lazy push, digests ---
//
// Beyond a handful of writers a node keeps sessions with a bounded active
// view of neighbours (HyParView-style) and learns others through shuffles
// of small random samples. Writers prove they are alive with signed
// heartbeats that travel the overlay like ops. Ops go eagerly along a
// spanning tree and as ids ("ihave") on the other links (Plumtree-style);
// a node missing an announced op asks for it ("graft"). Anti-entropy sends
// a digest of the version vector and the full vector only when they differ.
// All these kinds carry one body, Overlay, whose fields each kind uses.

// Overlay envelope kinds.
const (
	// KindLeave: Overlay.Sample, "I drop you from my active view"; the
	// sample names other peers to try.
	KindLeave = "leave"
	// KindShuffle: Overlay.Sample, a bounded random sample of the
	// sender's views, answered by KindShuffleReply with one of ours.
	KindShuffle      = "shuffle"
	KindShuffleReply = "shuffle-reply"
	// KindHeartbeats: Overlay.Heartbeats, signed liveness beacons of
	// writers (the sender's own and those it forwards).
	KindHeartbeats = "heartbeats"
	// KindSuspicions: Overlay.Suspicions, signed reports that a writer
	// went silent on a neighbour (the sender's own and those it
	// forwards).
	KindSuspicions = "suspicions"
	// KindLiveness: Overlay.Heartbeats and Overlay.Suspicions, the latest
	// heartbeats and the suspicions the sender holds, sent once to a new
	// neighbour so it need not wait for the next round; the receiver
	// takes what is new to it and does not forward it.
	KindLiveness = "liveness"
	// KindIHave: Overlay.IDs, ops the sender holds and did not push to us
	// (lazy link).
	KindIHave = "ihave"
	// KindGraft: Overlay.IDs, "send me these ops, and push to me eagerly
	// from now on"; ids of seq 0 only ask for the pushes alone.
	KindGraft = "graft"
	// KindPrune: no content, "I got that op already (or have neighbours
	// enough pushing to me): announce ids to me instead of pushing ops".
	KindPrune = "prune"
	// KindDigest: Overlay.Digest, a hash of the sender's version vector;
	// a receiver whose own vector hashes differently answers with its
	// full vector (KindVV).
	KindDigest = "digest"
)

// Bounds on what one overlay frame may carry.
const (
	MaxSample     = 32   // peers in a shuffle or leave sample
	MaxHeartbeats = 4096 // heartbeats in one frame
	MaxSuspicions = 4096 // suspicions in one frame
	MaxOpIDs      = 4096 // ids in an ihave or graft
	DigestSize    = 32   // bytes of a version-vector digest (SHA-256)
)

// Overlay is the body of the overlay kinds; each kind sets the field its
// comment names and leaves the others empty.
type Overlay struct {
	Sample     []PeerInfo   `cbor:"1,keyasint,omitempty"`
	Heartbeats []*Heartbeat `cbor:"2,keyasint,omitempty"`
	IDs        []OpID       `cbor:"3,keyasint,omitempty"`
	Digest     []byte       `cbor:"4,keyasint,omitempty"`
	Suspicions []*Suspicion `cbor:"5,keyasint,omitempty"`
}

// OpID names one op of the ledger: its writer and sequence number. On the
// wire a canonical writer goes as its first 8 bytes (packed.go, Short
// ids); a receiver that cannot resolve them decodes Writer as "".
type OpID struct {
	Writer string `cbor:"1,keyasint"`
	Seq    uint64 `cbor:"2,keyasint"`
}

// Heartbeat says Writer was alive at Seq (Unix milliseconds at the writer,
// strictly increasing per writer). Sig is Writer's Ed25519 signature over
// HeartbeatSigningBytes, so no peer can speak for another writer's
// liveness; the network key in the signed bytes keeps a heartbeat from
// being replayed into another network.
type Heartbeat struct {
	Writer string `cbor:"1,keyasint"`
	Seq    uint64 `cbor:"2,keyasint"`
	Sig    []byte `cbor:"3,keyasint"`
}

// HeartbeatSigningBytes is what a writer signs for a heartbeat.
func HeartbeatSigningBytes(network, writer string, seq uint64) []byte {
	b := make([]byte, 0, 24+len(network)+len(writer)+20)
	b = append(b, "peerdns-heartbeat\x00"...)
	b = append(b, network...)
	b = append(b, 0)
	b = append(b, writer...)
	b = append(b, 0)
	return fmt.Appendf(b, "%d", seq)
}

// Suspicion says that Writer went silent on By, a writer with a session
// to it, at At (Unix milliseconds at By, strictly increasing per By and
// Writer). Seq is the highest heartbeat seq of Writer that By held then
// (0: none). Sig is By's signature over SuspicionSigningBytes. Writer
// refutes it with a heartbeat whose seq is above both At and Seq.
type Suspicion struct {
	Writer string `cbor:"1,keyasint"`
	By     string `cbor:"2,keyasint"`
	At     uint64 `cbor:"3,keyasint"`
	Seq    uint64 `cbor:"4,keyasint,omitempty"`
	Sig    []byte `cbor:"5,keyasint"`
}

// SuspicionSigningBytes is what a writer signs for a suspicion.
func SuspicionSigningBytes(network string, s *Suspicion) []byte {
	b := make([]byte, 0, 24+len(network)+len(s.Writer)+len(s.By)+40)
	b = append(b, "peerdns-suspicion\x00"...)
	b = append(b, network...)
	b = append(b, 0)
	b = append(b, s.Writer...)
	b = append(b, 0)
	b = append(b, s.By...)
	b = append(b, 0)
	return fmt.Appendf(b, "%d %d", s.At, s.Seq)
}

// overlayKinds are the kinds whose body is an Overlay, each mapped to
// itself: the frame reader takes the kind's string from here rather than
// allocating one from the frame's bytes.
var overlayKinds = map[string]string{
	KindLeave: KindLeave, KindShuffle: KindShuffle, KindShuffleReply: KindShuffleReply,
	KindHeartbeats: KindHeartbeats, KindSuspicions: KindSuspicions, KindLiveness: KindLiveness,
	KindIHave: KindIHave, KindGraft: KindGraft, KindPrune: KindPrune, KindDigest: KindDigest,
}

// overlayBodies counts the overlay bodies set on e.
func (e *Envelope) overlayBodies() int {
	if e.Overlay != nil {
		return 1
	}
	return 0
}

// validateOverlay checks the shape of an overlay envelope. ok is false
// when Kind is not an overlay kind. Content the receiver must judge (ids,
// addresses, signatures) is checked where it is used, so one bad entry
// is ignored and counted without dropping the connection.
func (e *Envelope) validateOverlay() (ok bool, err error) {
	bad := func(why string) error { return fmt.Errorf("%w: %s: %s", ErrBadEnvelope, e.Kind, why) }
	o := e.Overlay
	if _, ok := overlayKinds[e.Kind]; !ok {
		return false, nil
	}
	if o == nil {
		return true, bad("no body")
	}
	if len(o.Sample) > MaxSample {
		return true, bad(fmt.Sprintf("sample of %d peers, at most %d", len(o.Sample), MaxSample))
	}
	if len(o.Heartbeats) > MaxHeartbeats {
		return true, bad(fmt.Sprintf("%d heartbeats, at most %d", len(o.Heartbeats), MaxHeartbeats))
	}
	if len(o.IDs) > MaxOpIDs {
		return true, bad(fmt.Sprintf("%d ids, at most %d", len(o.IDs), MaxOpIDs))
	}
	if len(o.Suspicions) > MaxSuspicions {
		return true, bad(fmt.Sprintf("%d suspicions, at most %d", len(o.Suspicions), MaxSuspicions))
	}
	for _, h := range o.Heartbeats {
		if h == nil || h.Writer == "" || h.Seq == 0 {
			return true, bad("heartbeat without writer or seq")
		}
	}
	for _, s := range o.Suspicions {
		if s == nil || s.Writer == "" || s.By == "" || s.At == 0 {
			return true, bad("suspicion without writer, author or time")
		}
	}
	switch e.Kind {
	case KindHeartbeats:
		if len(o.Heartbeats) == 0 {
			return true, bad("no heartbeats")
		}
	case KindSuspicions:
		if len(o.Suspicions) == 0 {
			return true, bad("no suspicions")
		}
	case KindLiveness:
		if len(o.Heartbeats)+len(o.Suspicions) == 0 {
			return true, bad("no heartbeats or suspicions")
		}
	case KindIHave, KindGraft:
		if len(o.IDs) == 0 {
			return true, bad("no ids")
		}
	case KindDigest:
		if len(o.Digest) != DigestSize {
			return true, bad(fmt.Sprintf("digest of %d bytes, want %d", len(o.Digest), DigestSize))
		}
	}
	return true, nil
}

// OverlayDiag counts what the overlay did since start (diagnostics
// summary "overlay").
type OverlayDiag struct {
	ActiveView     int   `json:"activeView"`     // the setting: neighbours kept at most
	Neighbours     int   `json:"neighbours"`     // sessions in the active view now
	Pinned         int   `json:"pinned"`         // sessions kept for tunnels, besides the view
	LeavesSent     int64 `json:"leavesSent"`     // neighbours we dropped to make room
	LeavesReceived int64 `json:"leavesReceived"` // neighbours that dropped us
	Shuffles       int64 `json:"shuffles"`       // samples we sent
	SampleGarbage  int64 `json:"sampleGarbage"`  // sample entries ignored: bad id or address
	// SessionsUp and SessionsEnded count sessions that completed their
	// handshake and established sessions that ended (either side, any
	// reason): a settled view keeps both still.
	SessionsUp    int64 `json:"sessionsUp"`
	SessionsEnded int64 `json:"sessionsEnded"`
	// ViewRefusals: neighbour requests we turned away at the hello
	// because our view was full; ViewRefused: ours that full peers
	// turned away.
	ViewRefusals int64 `json:"viewRefusals"`
	ViewRefused  int64 `json:"viewRefused"`
	// Heartbeats: writers heard only through heartbeats now, and
	// heartbeats taken, dropped as duplicates (a lookup, no signature
	// check) and refused (bad signature, not a writer, stale).
	HeardByHeartbeat int   `json:"heardByHeartbeat"`
	HeartbeatsNew    int64 `json:"heartbeatsNew"`
	HeartbeatsDup    int64 `json:"heartbeatsDuplicate"`
	HeartbeatsBad    int64 `json:"heartbeatsRefused"`
	// Suspicions: writers counted out now (suspected by two others, or a
	// silent neighbour), suspicions we signed, took, dropped as
	// duplicates and refused, and suspicions of us we refuted.
	Suspected      int   `json:"suspected"`
	SuspicionsSent int64 `json:"suspicionsSent"`
	SuspicionsNew  int64 `json:"suspicionsNew"`
	SuspicionsDup  int64 `json:"suspicionsDuplicate"`
	SuspicionsBad  int64 `json:"suspicionsRefused"`
	Refutations    int64 `json:"refutations"`
	// Anti-entropy: digests from neighbours that matched our vector, and
	// that did not (answered with the full vector).
	DigestsEqual  int64 `json:"digestsEqual"`
	DigestsDiffer int64 `json:"digestsDiffer"`
	// Plumtree: neighbours we announce op ids to instead of pushing ops,
	// ids announced, ids grafted (asked for after an announcement), and
	// links pruned after a duplicate.
	LazyLinks int   `json:"lazyLinks"`
	IHaveSent int64 `json:"ihaveSent"`
	Grafts    int64 `json:"grafts"`
	Prunes    int64 `json:"prunes"`
	// IDsUnknown: announced or grafted ids, and ops whose key, that name
	// a writer by its short form this node could not resolve (ignored;
	// the op is repaired whole: OpID, Op.Unresolved).
	IDsUnknown int64 `json:"idsUnknown"`
	// Op signatures the sessions checked, and those taken on another
	// session's check of the same op moments before (ops the ledger has
	// applied are not counted: a lookup drops them before either).
	OpSigChecks int64 `json:"opSignatureChecks"`
	OpSigReused int64 `json:"opSignatureReused"`
	// Withholding: neighbours dropped because they held ops we lacked
	// (their vector said so) and did not send them (session_owed.go).
	Withholding int64 `json:"withholding"`
}

// VVDigest is the digest of a version vector that KindDigest carries:
// SHA-256 over the entries sorted by writer, each the writer, a zero byte
// and the seq as 8 big-endian bytes. Writers at seq 0 are left out, so a
// vector and its copy with explicit zeros digest alike.
func VVDigest(vv VersionVector) []byte {
	ws := make([]string, 0, len(vv))
	for w, n := range vv {
		if n > 0 {
			ws = append(ws, w)
		}
	}
	slices.Sort(ws)
	h := sha256.New()
	var n [8]byte
	for _, w := range ws {
		h.Write([]byte(w))
		h.Write([]byte{0})
		binary.BigEndian.PutUint64(n[:], vv[w])
		h.Write(n[:])
	}
	return h.Sum(nil)
}
