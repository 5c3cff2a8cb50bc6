// Package token makes and checks the write tokens of plugin domains (the
// spec's "Authentication"): base64 of the JSON object {peerId, timestamp,
// expiresAt, signature}, where peerId is the issuing peer's public key in
// hex, timestamp and expiresAt are Unix milliseconds, and signature is the
// hex Ed25519 signature, by that peer's key, of the payload
//
//	"peerdns token v1\n" + peerId + "\n" + timestamp + "\n" + expiresAt
//
// (decimal numbers). Check accepts standard or URL-safe base64, padded or
// not, and at most MaxLen bytes, of that one JSON object and nothing
// after it. A token is valid when it decodes, its fields are all
// present, it has not expired, it was not issued in the future (beyond a
// minute of clock skew) and its signature verifies against its own
// peerId; whose token it is (the local peer's or another peer's) is the
// caller's decision (401 vs 403).
package token

import (
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"peerdns/messages"
)

// DefaultLifetime is how long a token is valid unless the TOKEN_LIFETIME
// setting says otherwise.
const DefaultLifetime = time.Hour

// MaxLen bounds the encoded token a request may carry.
const MaxLen = 1024

// skew is how far in the future an issue time may be.
const skew = time.Minute

// Token is the decoded token.
type Token struct {
	PeerID    string `json:"peerId"`
	Timestamp int64  `json:"timestamp"`
	ExpiresAt int64  `json:"expiresAt"`
	Signature string `json:"signature"`
}

// ErrInvalid wraps every reason a token is refused.
var ErrInvalid = errors.New("invalid token")

func payload(peerID string, ts, exp int64) []byte {
	return []byte("peerdns token v1\n" + peerID + "\n" + strconv.FormatInt(ts, 10) + "\n" + strconv.FormatInt(exp, 10))
}

// Signer is the key a token is issued with: the node's identity
// (transport/identity.Identity) in the node, any Ed25519 key pair in tests.
type Signer interface {
	ID() string // the peer id (hex public key)
	Sign(msg []byte) []byte
}

// Issue makes a token of id valid from now for lifetime; it returns the
// encoded token and its expiry.
func Issue(id Signer, now time.Time, lifetime time.Duration) (string, Token) {
	if lifetime <= 0 {
		lifetime = DefaultLifetime
	}
	t := Token{PeerID: id.ID(), Timestamp: now.UnixMilli(), ExpiresAt: now.Add(lifetime).UnixMilli()}
	t.Signature = hex.EncodeToString(id.Sign(payload(t.PeerID, t.Timestamp, t.ExpiresAt)))
	b, _ := json.Marshal(t) // plain struct
	return base64.StdEncoding.EncodeToString(b), t
}

// Check decodes and verifies an encoded token at now.
func Check(s string, now time.Time) (Token, error) {
	s = strings.TrimSpace(s)
	if s == "" || len(s) > MaxLen {
		return Token{}, fmt.Errorf("%w: empty or too long", ErrInvalid)
	}
	var raw []byte
	var err error
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.RawStdEncoding, base64.URLEncoding, base64.RawURLEncoding} {
		if raw, err = enc.DecodeString(s); err == nil {
			break
		}
	}
	if err != nil {
		return Token{}, fmt.Errorf("%w: not base64", ErrInvalid)
	}
	var t Token
	dec := json.NewDecoder(strings.NewReader(string(raw)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&t); err != nil {
		return Token{}, fmt.Errorf("%w: not a token object", ErrInvalid)
	}
	if _, err := dec.Token(); err != io.EOF {
		return Token{}, fmt.Errorf("%w: data after the token object", ErrInvalid)
	}
	if !messages.ValidPeerID(t.PeerID) || t.Timestamp <= 0 || t.ExpiresAt <= t.Timestamp {
		return Token{}, fmt.Errorf("%w: missing or inconsistent fields", ErrInvalid)
	}
	ms := now.UnixMilli()
	if t.ExpiresAt <= ms {
		return Token{}, fmt.Errorf("%w: expired", ErrInvalid)
	}
	if t.Timestamp > now.Add(skew).UnixMilli() {
		return Token{}, fmt.Errorf("%w: issued in the future", ErrInvalid)
	}
	sig, err := hex.DecodeString(t.Signature)
	if err != nil || !messages.VerifyPeer(t.PeerID, payload(t.PeerID, t.Timestamp, t.ExpiresAt), sig) {
		return Token{}, fmt.Errorf("%w: bad signature", ErrInvalid)
	}
	return t, nil
}

// FromHeaders picks the token of a request: "Authorization: Bearer <t>"
// (preferred) or "X-Auth-Token: <t>"; "" when neither is there.
func FromHeaders(authorization, xAuthToken string) string {
	if v, ok := strings.CutPrefix(strings.TrimSpace(authorization), "Bearer "); ok {
		return strings.TrimSpace(v)
	}
	if len(authorization) > 7 && strings.EqualFold(authorization[:7], "bearer ") {
		return strings.TrimSpace(authorization[7:])
	}
	return strings.TrimSpace(xAuthToken)
}
