package transport

import (
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"peerdns/internal/store"
	"peerdns/messages"
	"peerdns/transport/identity"
)

// DefaultInviteTTL is how long a created invite stays valid.
const DefaultInviteTTL = 24 * time.Hour

// MaxInviteTTL bounds what a caller may ask for (messages.MaxInviteTTL,
// which the admin API checks before asking).
const MaxInviteTTL = messages.MaxInviteTTL

// maxInviteLen bounds an encoded invite before it is decoded.
const maxInviteLen = 8 << 10

// Invite errors; the peers supervisor maps them to refusal codes.
var (
	ErrInviteInvalid = errors.New("invalid invite")
	ErrInviteExpired = errors.New("invite expired")
	ErrInviteUnknown = errors.New("invite was not issued by this node")
	ErrInviteUsed    = errors.New("invite already used")
)

// Invite admits one new node to a network. It is signed by the inviter,
// who must be a writer; the joiner dials Addrs expecting key Inviter.
type Invite struct {
	Network   string   // network key
	Root      string   // root writer id
	Inviter   string   // inviter id (hex Ed25519)
	Addrs     []string // where the inviter listens
	Nonce     string   // 16 random bytes, hex
	ExpiresAt int64    // unix ms
	Sig       []byte   // inviter's signature over the wire form without Sig
}

// inviteWire is the encoded form: ids and nonce as raw bytes (half the
// size of hex), the root left out when the inviter is the root, so the
// invite stays short enough to paste.
type inviteWire struct {
	Network    []byte   `cbor:"1,keyasint,omitempty"` // hex network key, decoded
	Root       []byte   `cbor:"2,keyasint,omitempty"` // omitted when == Inviter
	Inviter    []byte   `cbor:"3,keyasint"`
	Addrs      []string `cbor:"4,keyasint,omitempty"`
	Nonce      []byte   `cbor:"5,keyasint"`
	ExpiresAt  int64    `cbor:"6,keyasint"`
	Sig        []byte   `cbor:"7,keyasint,omitempty"`
	NetworkStr string   `cbor:"8,keyasint,omitempty"` // a network key that is not lowercase hex
}

// compactHex decodes s when hex round-trips it exactly.
func compactHex(s string) ([]byte, bool) {
	b, err := hex.DecodeString(s)
	if err != nil || hex.EncodeToString(b) != s {
		return nil, false
	}
	return b, true
}

func (i *Invite) wire() (*inviteWire, error) {
	w := &inviteWire{Addrs: i.Addrs, ExpiresAt: i.ExpiresAt, Sig: i.Sig}
	var ok bool
	if w.Inviter, ok = compactHex(i.Inviter); !ok {
		return nil, fmt.Errorf("%w: inviter id is not hex", ErrInviteInvalid)
	}
	if w.Nonce, ok = compactHex(i.Nonce); !ok {
		return nil, fmt.Errorf("%w: nonce is not hex", ErrInviteInvalid)
	}
	if i.Root != i.Inviter {
		if w.Root, ok = compactHex(i.Root); !ok {
			return nil, fmt.Errorf("%w: root id is not hex", ErrInviteInvalid)
		}
	}
	if w.Network, ok = compactHex(i.Network); !ok {
		w.Network, w.NetworkStr = nil, i.Network
	}
	return w, nil
}

func (w *inviteWire) invite() *Invite {
	i := &Invite{
		Network: w.NetworkStr, Inviter: hex.EncodeToString(w.Inviter), Addrs: w.Addrs,
		Nonce: hex.EncodeToString(w.Nonce), ExpiresAt: w.ExpiresAt, Sig: w.Sig,
	}
	if len(w.Network) > 0 {
		i.Network = hex.EncodeToString(w.Network)
	}
	i.Root = i.Inviter
	if len(w.Root) > 0 {
		i.Root = hex.EncodeToString(w.Root)
	}
	return i
}

// NewInvite creates and signs an invite valid for ttl (0 = 24h).
func NewInvite(id *identity.Identity, network, root string, addrs []string, ttl time.Duration, now time.Time) (*Invite, error) {
	if network == "" || root == "" {
		return nil, errors.New("node is not in a network yet")
	}
	if ttl == 0 {
		ttl = DefaultInviteTTL
	}
	if ttl < 0 || ttl > MaxInviteTTL {
		return nil, fmt.Errorf("invite ttl %v out of range (0, %v]", ttl, MaxInviteTTL)
	}
	var n [16]byte
	if _, err := rand.Read(n[:]); err != nil {
		return nil, fmt.Errorf("invite nonce: %w", err)
	}
	inv := &Invite{
		Network: network, Root: root, Inviter: id.ID(), Addrs: append([]string(nil), addrs...),
		Nonce: hex.EncodeToString(n[:]), ExpiresAt: now.Add(ttl).UnixMilli(),
	}
	b, err := inv.signingBytes()
	if err != nil {
		return nil, err
	}
	inv.Sig = id.Sign(b)
	return inv, nil
}

func (i *Invite) signingBytes() ([]byte, error) {
	w, err := i.wire()
	if err != nil {
		return nil, err
	}
	w.Sig = nil
	b, err := messages.Marshal(w)
	if err != nil {
		return nil, fmt.Errorf("encode invite: %w", err)
	}
	return append([]byte("peerdns-invite\x00"), b...), nil
}

// Encode is the copy-pasteable form: base64url (no padding) of CBOR.
func (i *Invite) Encode() (string, error) {
	w, err := i.wire()
	if err != nil {
		return "", err
	}
	b, err := messages.Marshal(w)
	if err != nil {
		return "", fmt.Errorf("encode invite: %w", err)
	}
	return base64.RawURLEncoding.EncodeToString(b), nil
}

// ParseInvite decodes an invite and checks its shape and signature (not
// its expiry: see Verify). Surrounding spaces and padding are tolerated.
func ParseInvite(s string) (*Invite, error) {
	s = strings.TrimRight(strings.TrimSpace(s), "=")
	if s == "" {
		return nil, fmt.Errorf("%w: empty", ErrInviteInvalid)
	}
	if len(s) > maxInviteLen {
		return nil, fmt.Errorf("%w: %d characters", ErrInviteInvalid, len(s))
	}
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		return nil, fmt.Errorf("%w: not base64url: %v", ErrInviteInvalid, err)
	}
	var w inviteWire
	if err := messages.Unmarshal(b, &w); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInviteInvalid, err)
	}
	if len(w.Network) > 0 && w.NetworkStr != "" {
		return nil, fmt.Errorf("%w: two network keys", ErrInviteInvalid)
	}
	inv := w.invite()
	if inv.Network == "" || !messages.ValidPeerID(inv.Root) || !messages.ValidPeerID(inv.Inviter) || len(w.Nonce) != 16 {
		return nil, fmt.Errorf("%w: missing network, root, inviter or nonce", ErrInviteInvalid)
	}
	sb, err := inv.signingBytes()
	if err != nil {
		return nil, err
	}
	if !messages.VerifyPeer(inv.Inviter, sb, inv.Sig) {
		return nil, fmt.Errorf("%w: bad inviter signature", ErrInviteInvalid)
	}
	return inv, nil
}

// Verify checks the signature and that the invite has not expired.
func (i *Invite) Verify(now time.Time) error {
	sb, err := i.signingBytes()
	if err != nil {
		return err
	}
	if !messages.VerifyPeer(i.Inviter, sb, i.Sig) {
		return fmt.Errorf("%w: bad inviter signature", ErrInviteInvalid)
	}
	if now.UnixMilli() >= i.ExpiresAt {
		return fmt.Errorf("%w at %s", ErrInviteExpired, time.UnixMilli(i.ExpiresAt).UTC().Format(time.RFC3339))
	}
	return nil
}

// JoinRequest builds the request a joiner sends: the invite plus its
// signature over the nonce and its own id.
func (i *Invite) JoinRequest(joiner *identity.Identity) (*messages.JoinRequest, error) {
	s, err := i.Encode()
	if err != nil {
		return nil, err
	}
	return &messages.JoinRequest{Invite: s, Proof: joiner.Sign(messages.JoinProofBytes(i.Nonce, joiner.ID()))}, nil
}

// CheckProof reports whether proof was made by joinerID for this invite.
func (i *Invite) CheckProof(joinerID string, proof []byte) bool {
	return messages.VerifyPeer(joinerID, messages.JoinProofBytes(i.Nonce, joinerID), proof)
}

// Store keys of the inviter's one-time record (node store).
const (
	inviteIssuedPrefix = "invite:"      // invite:<nonce> → expiresAt (unix ms)
	inviteUsedPrefix   = "invite-used:" // invite-used:<nonce> → joiner id
)

// InviteBook records issued and redeemed invites in the node store so an
// invite works once, across restarts. Safe for concurrent use.
type InviteBook struct {
	db *store.DB
	mu sync.Mutex // makes check-then-mark in Redeem atomic
}

// NewInviteBook uses db (the node store).
func NewInviteBook(db *store.DB) *InviteBook { return &InviteBook{db: db} }

// Issue records an invite this node created.
func (b *InviteBook) Issue(inv *Invite) error {
	return b.db.Set(inviteIssuedPrefix+inv.Nonce, strconv.FormatInt(inv.ExpiresAt, 10))
}

// Redeem checks that inv was issued here, is valid, unexpired and unused,
// and marks it used by joiner. Redeeming again by the same joiner succeeds,
// after the expiry too (its first accept may have been lost with the
// connection, and it was admitted while the invite was valid).
func (b *InviteBook) Redeem(inv *Invite, joiner string, now time.Time) error {
	if err := inv.Verify(now); err != nil && !errors.Is(err, ErrInviteExpired) {
		return err
	} else if err != nil {
		return b.redeemAgain(inv, joiner, err)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if _, err := b.db.Get(inviteIssuedPrefix + inv.Nonce); errors.Is(err, store.ErrNotFound) {
		return ErrInviteUnknown
	} else if err != nil {
		return fmt.Errorf("read invite: %w", err)
	}
	used, err := b.db.Get(inviteUsedPrefix + inv.Nonce)
	switch {
	case err == nil && used == joiner:
		return nil
	case err == nil:
		return fmt.Errorf("%w (by %.16s…)", ErrInviteUsed, used)
	case !errors.Is(err, store.ErrNotFound):
		return fmt.Errorf("read invite: %w", err)
	}
	return b.db.Set(inviteUsedPrefix+inv.Nonce, joiner)
}

// redeemAgain answers Redeem for an expired invite: nil when joiner
// already holds it, else expired (the error of Verify).
func (b *InviteBook) redeemAgain(inv *Invite, joiner string, expired error) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if used, err := b.db.Get(inviteUsedPrefix + inv.Nonce); err == nil && used == joiner {
		return nil
	} else if err != nil && !errors.Is(err, store.ErrNotFound) {
		return fmt.Errorf("read invite: %w", err)
	}
	return expired
}

// Release undoes a Redeem whose admission failed afterwards, so the
// invite can be tried again.
func (b *InviteBook) Release(inv *Invite, joiner string) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	used, err := b.db.Get(inviteUsedPrefix + inv.Nonce)
	if err != nil || used != joiner {
		return nil
	}
	return b.db.Delete(inviteUsedPrefix + inv.Nonce)
}
