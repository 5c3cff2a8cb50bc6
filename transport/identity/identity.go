// Package identity owns a process's Ed25519 key pair: it loads it from a
// file in the data dir, or creates it there (mode 0600) on first start, so a
// node's or agent's id is stable across restarts.
//
// The file holds the 32-byte seed in hex followed by a newline. A seed is
// enough to rebuild the key pair and keeps the file human-inspectable.
// It is written durably on first start: to a temporary file that is
// synced, renamed into place, and then its folder synced, so a power loss
// soon after leaves no key (the next start makes one, as the first would
// have) or the whole key, never a node that signed ledger ops with a key
// it then forgets. A key file that is empty or cut short (left by a crash
// on a filesystem that does not keep that order, or by a copy that did
// not finish) is refused with an error that names it and says so: a new
// key would be a new peer id, which the operator must choose by deleting
// the file, not the node by itself.
//
// It lives under transport/ because the key is what a peer proves on
// every connection (the TLS certificates are self-signed with it). What
// a peer id looks like and whether a signature was made by one are
// messages' (ValidPeerID, VerifyPeer): the ledger, the access-token check
// (internal/token, which http/ uses) and the agent's allow-list check
// signatures without holding a key, and internal/ and http/ may not
// import transport/.
package identity

import (
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	voi "github.com/oasisprotocol/curve25519-voi/primitives/ed25519"
)

// Identity is an Ed25519 key pair. It is immutable after Load.
type Identity struct {
	priv ed25519.PrivateKey
	pub  ed25519.PublicKey
	id   string
}

// FromSeed derives the key pair for a 32-byte seed. The same seed always
// gives the same identity (tunnel keys rely on this).
func FromSeed(seed []byte) (*Identity, error) {
	if len(seed) != ed25519.SeedSize {
		return nil, fmt.Errorf("identity seed: want %d bytes, got %d", ed25519.SeedSize, len(seed))
	}
	priv := ed25519.NewKeyFromSeed(seed)
	pub := priv.Public().(ed25519.PublicKey)
	return &Identity{priv: priv, pub: pub, id: hex.EncodeToString(pub)}, nil
}

// Generate makes a fresh random identity.
func Generate() (*Identity, error) {
	seed := make([]byte, ed25519.SeedSize)
	if _, err := rand.Read(seed); err != nil {
		return nil, fmt.Errorf("identity seed: %w", err)
	}
	return FromSeed(seed)
}

// LoadOrCreate reads the identity at path, or creates it with mode 0600
// (and its folder with 0700) when the file does not exist. A file with
// wider permissions is tightened rather than refused: the key is what
// matters and a user copying a data dir often loses the mode.
func LoadOrCreate(path string) (*Identity, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return create(path)
	}
	if err != nil {
		return nil, fmt.Errorf("read identity %s: %w", path, err)
	}
	s := strings.TrimSpace(string(b))
	if len(s) < 2*ed25519.SeedSize {
		return nil, fmt.Errorf("identity %s is empty or cut short (%d of %d hex digits): restore it from a backup, or delete it to start with a new key and a new peer id", path, len(s), 2*ed25519.SeedSize)
	}
	seed, err := hex.DecodeString(s)
	if err != nil {
		return nil, fmt.Errorf("identity %s: not a hex seed: %w", path, err)
	}
	if st, err := os.Stat(path); err == nil && st.Mode().Perm()&0o077 != 0 {
		_ = os.Chmod(path, 0o600)
	}
	id, err := FromSeed(seed)
	if err != nil {
		return nil, fmt.Errorf("identity %s: %w", path, err)
	}
	return id, nil
}

func create(path string) (*Identity, error) {
	id, err := Generate()
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("identity dir: %w", err)
	}
	// Write to a temp file, sync it and rename it, so a crash never
	// leaves half a key; then sync the folder, so the rename itself
	// survives a power loss.
	tmp := path + ".tmp"
	data := []byte(hex.EncodeToString(id.priv.Seed()) + "\n")
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		return nil, fmt.Errorf("write identity: %w", err)
	}
	if err := syncFile(tmp); err != nil {
		return nil, err
	}
	if err := os.Rename(tmp, path); err != nil {
		return nil, fmt.Errorf("write identity: %w", err)
	}
	if err := syncFile(filepath.Dir(path)); err != nil {
		return nil, err
	}
	return id, nil
}

// syncFile flushes the file or folder at path to the disk.
func syncFile(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("sync identity: %w", err)
	}
	defer f.Close()
	if err := f.Sync(); err != nil {
		return fmt.Errorf("sync identity: %w", err)
	}
	return nil
}

// ID is the public key in lowercase hex: the peer id used everywhere.
func (i *Identity) ID() string { return i.id }

// Public returns the public key. Callers must not modify it.
func (i *Identity) Public() ed25519.PublicKey { return i.pub }

// Private returns the private key, for TLS certificates. Callers must not
// modify it.
func (i *Identity) Private() ed25519.PrivateKey { return i.priv }

// Sign signs msg with the private key. Ed25519 signatures are
// deterministic (RFC 8032: the nonce is a hash of the key and msg), so
// curve25519-voi's Sign makes byte for byte the signature
// crypto/ed25519's would (identity_test.go checks it), in about half the
// time: a node signs each op and heartbeat it writes, 1,000 claims on
// one node at once are thousands of signatures.
func (i *Identity) Sign(msg []byte) []byte { return voi.Sign(voi.PrivateKey(i.priv), msg) }

// DiscoveryKey is a hash of the public key that can be shared without
// revealing the key itself (SHA-256, hex).
func (i *Identity) DiscoveryKey() string {
	h := sha256.Sum256(i.pub)
	return hex.EncodeToString(h[:])
}
