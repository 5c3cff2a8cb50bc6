package tunnel

import (
	"crypto/ed25519"
	"crypto/hmac"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"sync"

	voi "github.com/oasisprotocol/curve25519-voi/primitives/ed25519"

	"peerdns/messages"
	"peerdns/transport"
)

// maxHandshakeFrame caps a TunnelOpen or TunnelOpenReply frame: an id,
// a 32-byte proof or a short error fit many times over, and a peer
// cannot make us allocate more than this before it is authorised.
const maxHandshakeFrame = 1024

// proofLabel is the TLS exporter label of the secure proof.
const proofLabel = "peerdns tunnel proof v1"

// serverProofLabel is the TLS exporter label of the server's proof that
// it holds the tunnel's key (its accepting TunnelOpenReply.Proof).
const serverProofLabel = "peerdns tunnel server proof v1"

// writeFrame and readFrame are the handshake's frames (messages'
// stream frames, at most maxHandshakeFrame bytes).
func writeFrame(w io.Writer, v any) error { return messages.WriteFrame(w, v, maxHandshakeFrame) }

func readFrame(r io.Reader, v any) error { return messages.ReadFrame(r, v, maxHandshakeFrame) }

// readOpen reads and checks a client's TunnelOpen.
func readOpen(r io.Reader) (*messages.TunnelOpen, error) {
	var m messages.TunnelOpen
	if err := readFrame(r, &m); err != nil {
		return nil, fmt.Errorf("read tunnel open: %w", err)
	}
	if !messages.ValidTunnelID(m.ID) {
		return nil, errors.New("read tunnel open: id is not 64 lowercase hex")
	}
	if len(m.Proof) != 0 && len(m.Proof) != sha256.Size {
		return nil, fmt.Errorf("read tunnel open: proof of %d bytes", len(m.Proof))
	}
	return &m, nil
}

// proof is the secure handshake's proof for id on conn: an HMAC keyed by
// the secret over keying material exported from conn's TLS session, so
// it is only good on this one connection (a relaying or recording peer
// cannot replay it on another).
func proof(c transport.Conn, id string, secret []byte) ([]byte, error) {
	ekm, err := c.ExportKeyingMaterial(proofLabel, []byte(id), 32)
	if err != nil {
		return nil, fmt.Errorf("export keying material: %w", err)
	}
	m := hmac.New(sha256.New, secret)
	m.Write(ekm)
	return m.Sum(nil), nil
}

// checkProof reports whether got proves knowledge of secret for id on c,
// in constant time.
func checkProof(c transport.Conn, id string, secret, got []byte) bool {
	if len(got) != sha256.Size {
		return false
	}
	want, err := proof(c, id, secret)
	if err != nil {
		return false
	}
	return hmac.Equal(want, got)
}

// serverProof is what a server puts in its accepting TunnelOpenReply on
// c for id: over keying material of c's TLS session (so it cannot be
// replayed on another connection), an Ed25519 signature with the
// tunnel's private key (non-secure: id is its public key) or an HMAC
// keyed by the secret (secure). A peer that only announces id, having
// learnt it from announcements or claims, can make neither, so a client
// that checks it (checkServerProof) never hands its traffic to it.
func serverProof(c transport.Conn, id string, k serverKey) ([]byte, error) {
	ekm, err := c.ExportKeyingMaterial(serverProofLabel, []byte(id), 32)
	if err != nil {
		return nil, fmt.Errorf("export keying material: %w", err)
	}
	if k.Secret != nil {
		m := hmac.New(sha256.New, k.Secret)
		m.Write(ekm)
		return m.Sum(nil), nil
	}
	if len(k.Priv) != ed25519.PrivateKeySize {
		return nil, errors.New("tunnel key has no private key")
	}
	// curve25519-voi signs as crypto/ed25519 does, byte for byte, in
	// about half the time (transport/identity): one signature per
	// accepted stream.
	return voi.Sign(voi.PrivateKey(k.Priv), ekm), nil
}

// checkServerProof reports whether got, the Proof of an accepting reply
// on c for id, proves that the server holds the key: the secret when
// secret is not nil, else the private key of id read as a public key.
func checkServerProof(c transport.Conn, id string, secret, got []byte) bool {
	ekm, err := c.ExportKeyingMaterial(serverProofLabel, []byte(id), 32)
	if err != nil {
		return false
	}
	if secret != nil {
		m := hmac.New(sha256.New, secret)
		m.Write(ekm)
		return hmac.Equal(m.Sum(nil), got)
	}
	return messages.VerifyPeer(id, ekm, got) // id is the key, as a peer id is
}

// proofs are the servers that proved, on a connection, that they hold a
// tunnel's key, by peer id: a peer id is the key of the TLS session the
// proof was bound to, so a later stream or connection to that peer
// reaches the holder again and asks for no proof (TunnelOpen.Proven);
// the server signs once per peer and tunnel, not per stream. (An
// impostor is another peer id: it is always asked.) Without it each new
// tunnel connection cost a signature and a verification more. At most
// maxProofs are kept; past that the set is emptied (a forgotten one only
// costs a proof again).
var proofs = provenSet{m: map[provenKey]struct{}{}}

const maxProofs = 4096

type provenKey struct{ peer, id string }

type provenSet struct {
	mu sync.Mutex
	m  map[provenKey]struct{}
}

func (p *provenSet) known(c transport.Conn, id string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	_, ok := p.m[provenKey{c.PeerID(), id}]
	return ok
}

// first orders peers, providers of id, with those that proved they hold
// its key first, the others after in their order: a provider that
// announces the id without the key (an impostor that sorts first, one
// that never answers and holds each open until the handshake timeout)
// costs a client's opens only until the holder proved the id.
func (p *provenSet) first(peers []string, id string) []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]string, 0, len(peers))
	var rest []string
	for _, peer := range peers {
		if _, ok := p.m[provenKey{peer, id}]; ok {
			out = append(out, peer)
		} else {
			rest = append(rest, peer)
		}
	}
	return append(out, rest...)
}

func (p *provenSet) add(c transport.Conn, id string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.m) >= maxProofs {
		clear(p.m)
	}
	p.m[provenKey{c.PeerID(), id}] = struct{}{}
}
