package messages

import (
	"crypto/ed25519"
	"encoding/hex"
)

// A peer id is a node's (or agent's) Ed25519 public key in lowercase hex:
// what ops, votes, tokens and invites carry to say who signed them. The
// key pair itself, its file and signing are transport/identity's; the
// form of an id and the check of a signature made by it are here, so
// that every receiver (the ledger, the access-token check, the agent's
// RPC allow-list) checks them the same way without holding a key.

// ValidPeerID reports whether s is a well-formed peer id (64 lowercase
// hex digits).
func ValidPeerID(s string) bool {
	if len(s) != 2*ed25519.PublicKeySize {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}

// VerifyPeer checks sig over msg against a peer id (hex, either case).
// A malformed id or signature is simply not valid.
func VerifyPeer(peerID string, msg, sig []byte) bool {
	pub, err := hex.DecodeString(peerID)
	if err != nil || len(pub) != ed25519.PublicKeySize || len(sig) != ed25519.SignatureSize {
		return false
	}
	return ed25519.Verify(pub, msg, sig)
}
