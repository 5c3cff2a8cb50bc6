package tunnel

import (
	"crypto/hmac"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"

	"peerdns/messages"
	"peerdns/transport"
)

// maxHandshakeFrame caps a TunnelOpen or TunnelOpenReply frame: an id,
// a 32-byte proof or a short error fit many times over, and a peer
// cannot make us allocate more than this before it is authorised.
const maxHandshakeFrame = 1024

// proofLabel is the TLS exporter label of the secure proof.
const proofLabel = "peerdns tunnel proof v1"

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
