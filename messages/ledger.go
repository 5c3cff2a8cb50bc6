package messages

import (
	"errors"
	"fmt"
	"strings"
	"time"
)

// HLC is a hybrid logical clock reading: wall milliseconds plus a logical
// counter that orders events within (or behind) the same millisecond.
type HLC struct {
	Wall    int64  `cbor:"1,keyasint"`
	Logical uint32 `cbor:"2,keyasint"`
}

// Less orders clocks; ties are broken by the writer id where it matters.
func (h HLC) Less(o HLC) bool {
	if h.Wall != o.Wall {
		return h.Wall < o.Wall
	}
	return h.Logical < o.Logical
}

// Op is one signed ledger change. A writer numbers its ops 1, 2, 3, ...
// with no gaps, so a version vector (writer → highest seq) says exactly
// what a node has. Sig covers the deterministic CBOR of the op with Sig
// empty (see SigningBytes).
//
// An op writes one key (Key, Value, Delete) or, batched, many (Batch, with
// Key empty): a burst of claims, votes or cleanups by one writer costs
// one signature and one verification. Every write of a batch is a key
// write of its own for last-writer-wins (they share the op's writer, seq
// and clock; Writes lists them), so /api/entries still shows one entry
// per key, and single-key ops stay valid beside batches.
type Op struct {
	Writer string  `cbor:"1,keyasint"` // hex Ed25519 public key
	Seq    uint64  `cbor:"2,keyasint"`
	HLC    HLC     `cbor:"3,keyasint"`
	Key    string  `cbor:"4,keyasint,omitempty"`
	Value  string  `cbor:"5,keyasint,omitempty"`
	Delete bool    `cbor:"6,keyasint,omitempty"`
	Sig    []byte  `cbor:"7,keyasint,omitempty"`
	Batch  []Write `cbor:"8,keyasint,omitempty"`

	// SigChecked is set (in this process only: it never crosses the
	// wire) by the peer session that received the op once it verified
	// the signature, so the ledger actor does not check it again.
	SigChecked bool `cbor:"-"`
	// Unresolved is set by the decoder when a vote key's claimant came
	// by its first 8 bytes (an op pushed live: Envelope.ShortIDs,
	// packed.go, Short ids) and names no writer this process knows: the
	// op's key is then incomplete, and the receiver drops it for a repair
	// to bring whole. It never crosses the wire and is not signed.
	Unresolved bool `cbor:"-"`
	// Held is set by the decoder when the receiver said it holds the op
	// already (UnmarshalEnvelopeHeld): only Writer, Seq and HLC are
	// decoded, the rest was read for its shape alone. A held op is a
	// duplicate to count, never one to apply or forward. It never
	// crosses the wire and is not signed.
	Held bool `cbor:"-"`
}

// Write is one key write of a batched op.
type Write struct {
	Key    string `cbor:"1,keyasint"`
	Value  string `cbor:"2,keyasint,omitempty"`
	Delete bool   `cbor:"3,keyasint,omitempty"`
}

// MaxBatch bounds the writes of one op, and MaxBatchBytes their keys and
// values together, so any op fits a peer frame (MaxDecodeBytes) with room
// to spare.
const (
	MaxBatch      = 4096
	MaxBatchBytes = 256 << 10
)

// WritesBytes is the size of the keys and values of o's writes.
func (o *Op) WritesBytes() int {
	n := len(o.Key) + len(o.Value)
	for _, w := range o.Batch {
		n += len(w.Key) + len(w.Value) + 4
	}
	return n
}

// NumWrites is how many keys o writes: one, or its batch's writes.
func (o *Op) NumWrites() int { return max(len(o.Batch), 1) }

// SigningBytes is what the writer signs: the op without its signature,
// its ids as text, in the deterministic CBOR the codec writes for the
// plain struct (written by hand, Op.appendCBOR: through the codec's
// reflection it was a tenth of a burst's encoding;
// TestSigningBytesKeepIDsAsText and FuzzPackedOp hold the two alike).
// The error is always nil; it stays for the callers' sake.
func (o *Op) SigningBytes() ([]byte, error) {
	return o.appendCBOR(make([]byte, 0, o.sizeHint()+64), formSigned), nil
}

// Ledger key families. A writer may only write keys that carry its id.
const (
	KeyClaim   = "claim"   // claim:<domain>:<writer> → claim record JSON
	KeyVote    = "vote"    // vote:<domain>:<voter>:<claimant> → vote marker
	KeyCleanup = "cleanup" // cleanup:<domain>:<writer> → cleanup request marker
	KeyWriter  = "writer"  // writer:<new writer>:<adding writer> → "1"
	KeyNetwork = "network" // network:<root writer> → network key hex (genesis)
)

// ErrBadKey reports a ledger key that does not parse.
var ErrBadKey = errors.New("malformed ledger key")

// ParsedKey is a ledger key split into its parts.
type ParsedKey struct {
	Kind     string
	Domain   string // claim, vote, cleanup
	Writer   string // the id that must have signed the op
	Claimant string // vote only
	Subject  string // writer: the writer being added
}

// ParseKey splits a ledger key and says which writer may write it. Domain
// names contain dots but never colons, and ids are hex, so ':' splits.
func ParseKey(key string) (ParsedKey, error) {
	// Split on ":" into a fixed array (no allocation: ParseKey runs for
	// every write applied); a key of more than four parts is no key.
	var all [5]string
	n := 0
	for rest, more := key, true; more; n++ {
		if n == len(all) {
			return ParsedKey{}, badKey(key)
		}
		all[n], rest, more = strings.Cut(rest, ":")
	}
	parts := all[:n]
	bad := badKey(key)
	switch parts[0] {
	case KeyClaim, KeyCleanup:
		if len(parts) != 3 || parts[1] == "" || parts[2] == "" {
			return ParsedKey{}, bad
		}
		return ParsedKey{Kind: parts[0], Domain: parts[1], Writer: parts[2]}, nil
	case KeyVote:
		if len(parts) != 4 || parts[1] == "" || parts[2] == "" || parts[3] == "" {
			return ParsedKey{}, bad
		}
		return ParsedKey{Kind: KeyVote, Domain: parts[1], Writer: parts[2], Claimant: parts[3]}, nil
	case KeyWriter:
		if len(parts) != 3 || parts[1] == "" || parts[2] == "" {
			return ParsedKey{}, bad
		}
		return ParsedKey{Kind: KeyWriter, Subject: parts[1], Writer: parts[2]}, nil
	case KeyNetwork:
		if len(parts) != 2 || parts[1] == "" {
			return ParsedKey{}, bad
		}
		return ParsedKey{Kind: KeyNetwork, Writer: parts[1]}, nil
	}
	return ParsedKey{}, bad
}

// badKey is the error of a key that does not parse. Its text is built
// only when someone reads it: ParseKey runs on every op applied.
type badKey string

func (k badKey) Error() string { return fmt.Sprintf("%v: %q", ErrBadKey, string(k)) }
func (k badKey) Unwrap() error { return ErrBadKey }

// ClaimKey, VoteKey and CleanupKey build ledger keys.
func ClaimKey(domain, writer string) string { return KeyClaim + ":" + domain + ":" + writer }

// VoteKey is the key of voter's vote for claimant on domain.
func VoteKey(domain, voter, claimant string) string {
	return KeyVote + ":" + domain + ":" + voter + ":" + claimant
}

// CleanupKey is the key of a cleanup request for domain by writer.
func CleanupKey(domain, writer string) string { return KeyCleanup + ":" + domain + ":" + writer }

// WriterKey is the key by which writer `by` adds writer `id`.
func WriterKey(id, by string) string { return KeyWriter + ":" + id + ":" + by }

// NetworkKey is the genesis key written by the network's root writer.
func NetworkKey(root string) string { return KeyNetwork + ":" + root }

// ClaimRecord is the JSON value of a claim key.
type ClaimRecord struct {
	Hash     string    `json:"hash"`
	SSL      bool      `json:"ssl"`
	Clients  []string  `json:"clients"`
	Services []Service `json:"services"`
}

// Service is a service offered under a domain (spec: Service).
type Service struct {
	ServiceName string `json:"serviceName"`
	Key         string `json:"key"`
	Port        int    `json:"port"`
	Protocol    string `json:"protocol"`
}

// VoteMarker is the value of a vote key.
const VoteMarker = "1"

// VersionVector maps writer id → highest contiguous seq held.
type VersionVector map[string]uint64

// --- ledger actor requests (the peer network uses these) ---

// ApplyOps hands ops received from a peer to the ledger actor. Each op is
// verified (signature, authorised writer, key ownership, contiguous seq)
// before it is applied; rejected ops count as validation failures. Ops may
// arrive in any order; ops after a gap are dropped (not counted) and come
// again with the next version-vector exchange.
type ApplyOps struct {
	From string // peer id the ops came from, for logs
	Ops  []*Op
	// Sent is when the session asked (zero: unknown); the ledger reads
	// how long its mailbox held the ops from it (its lag).
	Sent time.Time
}

// ApplyOpsReply says what happened to each op of an ApplyOps.
type ApplyOpsReply struct {
	Applied, Duplicates, Rejected, Gaps int
}

// GetVersionVector asks the ledger for its version vector.
type GetVersionVector struct{}

// GetVersionVectorReply is the ledger's version vector (a copy).
type GetVersionVectorReply struct{ VV VersionVector }

// GetOpsSince asks for the ops a peer with version vector VV lacks, in
// (writer, seq) order, at most Max (0 = no limit).
type GetOpsSince struct {
	VV  VersionVector
	Max int
	// Only, when not nil, limits the answer to these writers' ops.
	Only map[string]bool
}

// GetOpsSinceReply carries the ops (shared, immutable: do not modify).
type GetOpsSinceReply struct{ Ops []*Op }

// OpsApplied is published on the event stream after ops (local or from a
// peer) were committed and applied, so peer actors can push them on.
type OpsApplied struct{ Ops []*Op }

// LedgerLoaded is published on the event stream each time the ledger
// actor has loaded its ledger from disk: at start, and after a restart
// (a write that failed, such as on a full disk, restarts it). Ops it
// was handed and had not committed are gone with the instance that
// held them, so the peer sessions stop counting them as on their way
// and ask their peers for what the ledger lacks.
type LedgerLoaded struct{}

// IsWriter asks whether id may hold a peer session as a writer of the
// network: an authorised writer, or, while this node's ledger has not
// yet learned that it is a writer itself (a joiner before its first
// sync), the root or the inviter that let it in (see the ledger's
// state.mayConnect).
type IsWriter struct{ ID string }

// IsWriterReply answers IsWriter.
type IsWriterReply struct{ OK bool }

// GetWriters asks the ledger for the network's writers, sorted: the
// membership the peer network's liveness answers for. Reply:
// GetWritersReply.
type GetWriters struct{}

// GetWritersReply answers GetWriters.
type GetWritersReply struct{ IDs []string }

// AddWriter asks the local ledger to sign and append writer:<ID>:<self>
// (used when an invite is redeemed). Reply: AddWriterReply.
type AddWriter struct{ ID string }

// AddWriterReply answers AddWriter.
type AddWriterReply struct{ Err error }

// GetNetwork asks for the network key and root writer.
type GetNetwork struct{}

// GetNetworkReply: Key is "" until the node belongs to a network.
type GetNetworkReply struct{ Key, Root string }

// JoinNetwork tells a fresh joiner's ledger which network it joined (from
// an accepted invite) before replication starts, and which peer let it
// in (Inviter).
type JoinNetwork struct{ Key, Root, Inviter string }

// JoinNetworkReply answers JoinNetwork.
type JoinNetworkReply struct{ Err error }

// PeerSetChanged tells consensus which writers are connected right now
// (active peers = these + self). Sent by the peers supervisor to the
// ledger actor on every connect/disconnect.
type PeerSetChanged struct{ Connected []string }
