package identity

import (
	"os"
	"path/filepath"
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
