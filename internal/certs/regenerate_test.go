package certs

import (
	"crypto/x509"
	"net/netip"
	"os"
	"runtime"
	"testing"
)

// regenerateCrashing runs RegenerateRoot and ends it, as a kill would,
// after its n-th file written. It reports whether RegenerateRoot
// returned.
func regenerateCrashing(t *testing.T, ca *CA, n int) bool {
	writes := 0
	afterWrite = func() {
		if writes++; writes == n {
			runtime.Goexit()
		}
	}
	defer func() { afterWrite = nil }()
	returned := make(chan bool, 1)
	go func() {
		defer func() { returned <- false }()
		if _, _, err := ca.RegenerateRoot(); err != nil {
			t.Error(err)
		}
		returned <- true
	}()
	return <-returned
}

// A regenerate-ca cut short by a crash after any file it writes leaves
// a CA the next start opens: root.pem and root-key.pem are one pair
// (the old root's or the new one's), and a leaf the reopened CA issues
// verifies against the root.pem on disk (what install-ca trusts).
func TestRegenerateRootCrashLeavesOnePair(t *testing.T) {
	for n := 1; ; n++ {
		dir := t.TempDir()
		ca, err := Open(dir, nil)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := ca.Certificate("site.p2p", netip.Addr{}); err != nil {
			t.Fatal(err)
		}
		if regenerateCrashing(t, ca, n) {
			break
		}
		again, err := Open(dir, nil)
		if err != nil {
			t.Fatalf("crash after write %d of regenerate-ca: the CA does not open: %v", n, err)
		}
		c, err := again.Certificate("site.p2p", netip.Addr{})
		if err != nil {
			t.Fatalf("crash after write %d: %v", n, err)
		}
		onDisk, err := os.ReadFile(again.RootPath())
		if err != nil {
			t.Fatal(err)
		}
		pool := x509.NewCertPool()
		pool.AppendCertsFromPEM(onDisk)
		if _, err := c.Leaf.Verify(x509.VerifyOptions{Roots: pool, DNSName: "site.p2p"}); err != nil {
			t.Fatalf("crash after write %d: the leaf does not verify against root.pem: %v", n, err)
		}
	}
}
