package messages

import (
	"crypto/ed25519"
	"encoding/hex"

	voi "github.com/oasisprotocol/curve25519-voi/primitives/ed25519"
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
//
// The check is curve25519-voi's with its standard-library preset
// (VerifyOptionsStdLib), not crypto/ed25519's Verify: it accepts exactly
// the signatures the standard library accepts (cofactorless, S below the
// group order, the key's encoding taken as the standard library takes
// it, small-order keys and R included), so nodes built with either agree
// on which ops are valid; peerid_stdlib_test.go compares the two on
// every edge case of the encodings and FuzzVerifyPeerMatchesStdlib on
// the rest. It takes about two thirds of the time (43-48 µs against
// 69-78 on a 2-vCPU EPYC, BenchmarkVerifyPeer): every op, heartbeat and
// suspicion a node takes in is checked once, and checks were 15% of a
// fifty-node fleet's CPU in a burst of claims. On amd64 with AVX2 voi
// uses its vector backend, elsewhere its portable 64-bit code; the check
// is the same work per signature on any number of cores.
func VerifyPeer(peerID string, msg, sig []byte) bool {
	pub, err := hex.DecodeString(peerID)
	if err != nil || len(pub) != ed25519.PublicKeySize || len(sig) != ed25519.SignatureSize {
		return false
	}
	return voi.VerifyWithOptions(pub, msg, sig, stdlibVerify)
}

// stdlibVerify: voi's checks as crypto/ed25519 makes them.
var stdlibVerify = &voi.Options{Verify: voi.VerifyOptionsStdLib}
