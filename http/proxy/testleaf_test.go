package proxy

import (
	"crypto/tls"
	"net/netip"
	"testing"

	"peerdns/internal/certs"
)

// testLeaf is a new node CA (in a temporary folder) and its leaf for
// name, for a test's own TLS server.
func testLeaf(t *testing.T, name string) (*certs.CA, *tls.Certificate) {
	t.Helper()
	ca, err := certs.Open(t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := ca.Certificate(name, netip.Addr{})
	if err != nil {
		t.Fatal(err)
	}
	return ca, cert
}
