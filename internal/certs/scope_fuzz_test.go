package certs

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"net/netip"
	"testing"
	"time"
)

// FuzzAllowsName checks the issue-time check against crypto/x509's own
// verifier: for any valid domain, AllowsName says yes exactly when a
// leaf for it (and *.it) signed by the constrained root verifies.
func FuzzAllowsName(f *testing.F) {
	for _, s := range []string{"site.p2p", "p2p.example.com", "a.b.dev.lan", "dev.lan", "prod.lan", "home", "x.home", "evilp2p.com", "xn--p2p-9la.p2p"} {
		f.Add(s)
	}
	dir := f.TempDir()
	ca, err := OpenScoped(dir, nil, func() Scope {
		return Scope{Suffixes: []string{"p2p", "home", "dev.lan"}, Ranges: []netip.Prefix{netip.MustParsePrefix("198.51.100.0/24")}}
	})
	if err != nil {
		f.Fatal(err)
	}
	root, rootKey := ca.root, ca.key
	pool := ca.Pool()
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	f.Fuzz(func(t *testing.T, name string) {
		if !ValidDomain(name) {
			return
		}
		tpl := &x509.Certificate{SerialNumber: serial(), Subject: pkix.Name{CommonName: name}, DNSNames: []string{name, "*." + name},
			NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
			KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
		der, err := x509.CreateCertificate(rand.Reader, tpl, root, &key.PublicKey, rootKey)
		if err != nil {
			t.Fatal(err)
		}
		leaf, _ := x509.ParseCertificate(der)
		_, verr := leaf.Verify(x509.VerifyOptions{Roots: pool, DNSName: name})
		if got := AllowsName(root, name); got != (verr == nil) {
			t.Fatalf("AllowsName(%q) = %v, but the verifier says %v", name, got, verr)
		}
	})
}
