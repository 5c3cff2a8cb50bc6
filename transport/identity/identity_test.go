package identity

import (
	"bytes"
	"crypto/ed25519"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"peerdns/messages"
)

func TestLoadOrCreateStable(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sub", "identity.key")
	a, err := LoadOrCreate(path)
	if err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode().Perm() != 0o600 {
		t.Fatalf("mode = %v, want 0600", st.Mode().Perm())
	}
	b, err := LoadOrCreate(path)
	if err != nil {
		t.Fatal(err)
	}
	if a.ID() != b.ID() {
		t.Fatalf("id changed across loads: %s != %s", a.ID(), b.ID())
	}
	if !messages.ValidPeerID(a.ID()) {
		t.Fatalf("ValidPeerID(%q) = false", a.ID())
	}
	msg := []byte("hello")
	if !messages.VerifyPeer(a.ID(), msg, b.Sign(msg)) {
		t.Fatal("signature from reloaded key does not verify")
	}
	if messages.VerifyPeer(a.ID(), []byte("other"), a.Sign(msg)) {
		t.Fatal("signature verified over a different message")
	}
}

func TestLoadRejectsGarbage(t *testing.T) {
	path := filepath.Join(t.TempDir(), "identity.key")
	if err := os.WriteFile(path, []byte("not hex"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadOrCreate(path); err == nil {
		t.Fatal("LoadOrCreate accepted a garbage key file")
	}
}

// Sign makes exactly the signature crypto/ed25519 makes with the same
// key over the same message.
func TestSignIsCryptoEd25519s(t *testing.T) {
	for k := range 50 {
		seed := make([]byte, ed25519.SeedSize)
		for j := range seed {
			seed[j] = byte(k*31 + j*7)
		}
		id, err := FromSeed(seed)
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range []int{0, 1, 63, 64, 200, 4096} {
			msg := bytes.Repeat([]byte{byte(k + n)}, n)
			got, want := id.Sign(msg), ed25519.Sign(ed25519.NewKeyFromSeed(seed), msg)
			if !bytes.Equal(got, want) {
				t.Fatalf("key %d, %d-byte message: %x, crypto/ed25519 %x", k, n, got, want)
			}
		}
	}
}

func BenchmarkSign(b *testing.B) {
	id, err := FromSeed(make([]byte, ed25519.SeedSize))
	if err != nil {
		b.Fatal(err)
	}
	msg := make([]byte, 200)
	b.Run("Identity", func(b *testing.B) {
		for b.Loop() {
			id.Sign(msg)
		}
	})
	b.Run("crypto-ed25519", func(b *testing.B) {
		for b.Loop() {
			ed25519.Sign(id.Private(), msg)
		}
	})
}

// A key file a crash or an unfinished copy left empty or cut short is
// refused with an error that names the file and says what is wrong,
// not taken as some other key or replaced by a new one: either would
// give the node another peer id behind the operator's back. The file
// LoadOrCreate writes reads back whole: the seed in hex and a newline.
func TestLoadRefusesCutKeyFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "identity.key")
	id, err := LoadOrCreate(path)
	if err != nil {
		t.Fatal(err)
	}
	whole, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if want := hex.EncodeToString(id.Private().Seed()) + "\n"; string(whole) != want {
		t.Fatalf("identity.key = %q, want %q", whole, want)
	}
	for _, tt := range []struct{ name, data string }{
		{"empty", ""},
		{"newline", "\n"},
		{"half", string(whole[:32])},
		{"one digit short", string(whole[:63])},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if err := os.WriteFile(path, []byte(tt.data), 0o600); err != nil {
				t.Fatal(err)
			}
			_, err := LoadOrCreate(path)
			if err == nil || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "empty or cut short") {
				t.Fatalf("LoadOrCreate(%q holding %q) = %v, want an error naming it empty or cut short", path, tt.data, err)
			}
			if b, _ := os.ReadFile(path); string(b) != tt.data {
				t.Fatalf("the refused file was changed to %q", b)
			}
		})
	}
}
