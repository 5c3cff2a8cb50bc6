package messages

import (
	"crypto/ed25519"
	"encoding/hex"
	"strings"
	"testing"
)

func TestVerifyPeerMalformed(t *testing.T) {
	for _, id := range []string{"", "zz", "00"} {
		if VerifyPeer(id, []byte("m"), make([]byte, 64)) {
			t.Fatalf("VerifyPeer(%q) = true", id)
		}
	}
}

// A signature verifies against its key's id and nothing else; an id is
// 64 lowercase hex digits.
func TestPeerID(t *testing.T) {
	pub, priv, err := ed25519.GenerateKey(nil)
	if err != nil {
		t.Fatal(err)
	}
	id, msg := hex.EncodeToString(pub), []byte("hello")
	sig := ed25519.Sign(priv, msg)
	if !ValidPeerID(id) || !VerifyPeer(id, msg, sig) {
		t.Fatalf("id %s: valid %v, verifies %v", id, ValidPeerID(id), VerifyPeer(id, msg, sig))
	}
	if VerifyPeer(id, []byte("other"), sig) || VerifyPeer(id, msg, sig[:63]) {
		t.Fatal("a signature verified over another message or truncated")
	}
	for _, bad := range []string{strings.ToUpper(id), id[:62], id + "00", "g" + id[1:]} {
		if ValidPeerID(bad) {
			t.Fatalf("ValidPeerID(%q) = true", bad)
		}
	}
}

// BenchmarkVerifyPeer is the check every op, heartbeat and suspicion a
// node takes in costs, beside crypto/ed25519's Verify on the same input.
func BenchmarkVerifyPeer(b *testing.B) {
	pub, priv, err := ed25519.GenerateKey(nil)
	if err != nil {
		b.Fatal(err)
	}
	id, msg := hex.EncodeToString(pub), make([]byte, 200)
	sig := ed25519.Sign(priv, msg)
	b.Run("VerifyPeer", func(b *testing.B) {
		for b.Loop() {
			if !VerifyPeer(id, msg, sig) {
				b.Fatal("refused")
			}
		}
	})
	b.Run("crypto-ed25519", func(b *testing.B) {
		for b.Loop() {
			if !ed25519.Verify(pub, msg, sig) {
				b.Fatal("refused")
			}
		}
	})
}
