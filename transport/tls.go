package transport

import (
	"crypto/ed25519"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"errors"
	"fmt"
	"math/big"
	"time"

	"peerdns/transport/identity"
)

// selfSigned makes a certificate for the identity's key, signed by itself.
// Its validity window is wide on purpose: peers authenticate the key, not
// the certificate dates, and a node with a skewed clock must still connect.
func selfSigned(id *identity.Identity) (tls.Certificate, error) {
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("cert serial: %w", err)
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: id.ID()},
		NotBefore:             now.Add(-24 * time.Hour),
		NotAfter:              now.Add(20 * 365 * 24 * time.Hour),
		KeyUsage:              x509.KeyUsageDigitalSignature,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		BasicConstraintsValid: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, id.Public(), id.Private())
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("self-signed cert: %w", err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: id.Private()}, nil
}

// peerIDFromCerts checks that the peer sent exactly one self-signed
// Ed25519 certificate and returns its key as a peer id. The TLS 1.3
// CertificateVerify message has already proven the peer holds the key.
func peerIDFromCerts(raw [][]byte) (string, error) {
	if len(raw) != 1 {
		return "", fmt.Errorf("peer sent %d certificates, want 1", len(raw))
	}
	cert, err := x509.ParseCertificate(raw[0])
	if err != nil {
		return "", fmt.Errorf("peer certificate: %w", err)
	}
	pub, ok := cert.PublicKey.(ed25519.PublicKey)
	if !ok {
		return "", errors.New("peer certificate key is not Ed25519")
	}
	if err := cert.CheckSignature(cert.SignatureAlgorithm, cert.RawTBSCertificate, cert.Signature); err != nil {
		return "", fmt.Errorf("peer certificate is not self-signed by its key: %w", err)
	}
	return hex.EncodeToString(pub), nil
}

// serverTLS requires a client certificate and checks it is a valid
// self-signed Ed25519 one; who may connect is decided above transport.
func serverTLS(cert tls.Certificate) *tls.Config {
	return &tls.Config{
		MinVersion:   tls.VersionTLS13,
		Certificates: []tls.Certificate{cert},
		ClientAuth:   tls.RequireAnyClientCert,
		NextProtos:   []string{ALPN},
		VerifyPeerCertificate: func(raw [][]byte, _ [][]*x509.Certificate) error {
			_, err := peerIDFromCerts(raw)
			return err
		},
		VerifyConnection: checkALPN,
	}
}

// clientTLS verifies the server's key against want ("" = any key). The
// standard chain verification is replaced (InsecureSkipVerify) by this
// check: there is no CA, the key is the identity.
func clientTLS(cert tls.Certificate, want string) *tls.Config {
	self := ""
	if len(cert.Certificate) > 0 {
		self, _ = peerIDFromCerts(cert.Certificate[:1])
	}
	return &tls.Config{
		MinVersion:         tls.VersionTLS13,
		Certificates:       []tls.Certificate{cert},
		NextProtos:         []string{ALPN},
		ServerName:         "peerdns",
		InsecureSkipVerify: true, // replaced by VerifyPeerCertificate below
		VerifyPeerCertificate: func(raw [][]byte, _ [][]*x509.Certificate) error {
			got, err := peerIDFromCerts(raw)
			if err != nil {
				return err
			}
			if got == self {
				// The address is ours (a loopback or wildcard address a
				// peer passed on, on a host where we use its port).
				return ErrSelf
			}
			if want != "" && got != want {
				return fmt.Errorf("%w: got %.16s…, want %.16s…", ErrWrongPeer, got, want)
			}
			return nil
		},
		VerifyConnection: checkALPN,
	}
}

// checkALPN refuses a handshake that did not settle on our protocol.
func checkALPN(cs tls.ConnectionState) error {
	if cs.NegotiatedProtocol != ALPN {
		return fmt.Errorf("peer does not speak %s (got %q)", ALPN, cs.NegotiatedProtocol)
	}
	return nil
}

// ClientTLS is the TLS configuration a dialer uses: our self-signed
// certificate, ALPN peerdns/1, and the server's key checked against
// peerID ("" = any). For tools and tests that speak QUIC to a node
// directly; nodes use Endpoint.Dial.
func ClientTLS(id *identity.Identity, peerID string) (*tls.Config, error) {
	cert, err := selfSigned(id)
	if err != nil {
		return nil, err
	}
	return clientTLS(cert, peerID), nil
}
