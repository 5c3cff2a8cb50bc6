package tunnel

import (
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"

	"peerdns/messages"
)

// Domain-separation labels of the key derivations (see the package doc).
// Changing one changes every hs:// key made from a seed.
const (
	labelKey    = "peerdns tunnel key v1\x00"
	labelSecret = "peerdns tunnel secret v1\x00"
	labelID     = "peerdns tunnel id v1\x00"
)

// urlScheme prefixes every tunnel key.
const urlScheme = "hs://"

// serverKey is what a server's seed derives to.
type serverKey struct {
	URL       string // hs:// + 64 hex: what the user gives clients
	Announced string // 64 hex the server announces to peers
	Secret    []byte // secure servers: the 32-byte secret; nil otherwise
	// Priv (non-secure servers) is the private key of the public key
	// Announced: the server signs its answer to a client with it.
	Priv ed25519.PrivateKey
}

// deriveServerKey turns a seed into the server's key. The same seed and
// secure flag give the same key on every run and every machine.
func deriveServerKey(seed string, secure bool) serverKey {
	if secure {
		secret := sha256.Sum256([]byte(labelSecret + seed))
		return serverKey{
			URL:       urlScheme + hex.EncodeToString(secret[:]),
			Announced: secureID(secret[:]),
			Secret:    secret[:],
		}
	}
	s := sha256.Sum256([]byte(labelKey + seed))
	priv := ed25519.NewKeyFromSeed(s[:])
	h := hex.EncodeToString(priv.Public().(ed25519.PublicKey))
	return serverKey{URL: urlScheme + h, Announced: h, Priv: priv}
}

// secureID is the id a secure server announces for secret: a one-way
// function of it, so peers that relay or look it up never learn it.
func secureID(secret []byte) string {
	id := sha256.Sum256(append([]byte(labelID), secret...))
	return hex.EncodeToString(id[:])
}

// randomSeed makes the seed of a server created without a key; it is
// persisted so the key stays the same across restarts.
func randomSeed() string {
	var b [32]byte
	_, _ = rand.Read(b[:]) // never fails (crypto/rand)
	return hex.EncodeToString(b[:])
}

// clientKey is a client's view of an hs:// key. The client cannot tell a
// public key from a secret, so it carries both readings.
type clientKey struct {
	Plain  string // the 64 hex as given: a non-secure server's announced id
	Secure string // the id a secure server with this secret announces
	Secret []byte // the 64 hex decoded, used as the secret for Secure
}

// parseClientKey checks "hs://" + 64 hex (hex in either case) and
// derives both candidate ids.
func parseClientKey(key string) (clientKey, error) {
	h, ok := strings.CutPrefix(strings.TrimSpace(key), urlScheme)
	if !ok || len(h) != 64 {
		return clientKey{}, fmt.Errorf("%w: key must be %s followed by 64 hex digits", messages.ErrBadTunnel, urlScheme)
	}
	b, err := hex.DecodeString(h)
	if err != nil {
		return clientKey{}, fmt.Errorf("%w: key must be %s followed by 64 hex digits", messages.ErrBadTunnel, urlScheme)
	}
	return clientKey{Plain: hex.EncodeToString(b), Secure: secureID(b), Secret: b}, nil
}
