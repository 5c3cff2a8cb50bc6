package certs

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func TestRootLeafRenewAndRegenerate(t *testing.T) {
	dir := t.TempDir()
	now := time.Date(2026, 11, 23, 0, 0, 0, 0, time.UTC)
	clock := func() time.Time { return now }
	ca, err := Open(dir, clock)
	if err != nil {
		t.Fatal(err)
	}
	if st, err := os.Stat(filepath.Join(dir, "root-key.pem")); err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("root key: %v %v", st, err)
	}
	// Concurrent first handshakes share one issue.
	var wg sync.WaitGroup
	certs := make([]*tls.Certificate, 8)
	for i := range certs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, err := ca.Certificate("site.p2p", netip.MustParseAddr("127.77.0.5"))
			if err != nil {
				t.Error(err)
			}
			certs[i] = c
		}()
	}
	wg.Wait()
	for _, c := range certs[1:] {
		if c != certs[0] {
			t.Fatal("concurrent handshakes got different certificates")
		}
	}
	leaf := certs[0].Leaf
	opts := x509.VerifyOptions{Roots: ca.Pool(), DNSName: "www.site.p2p", CurrentTime: now}
	if _, err := leaf.Verify(opts); err != nil {
		t.Fatalf("leaf does not verify against root.pem: %v", err)
	}
	if len(leaf.IPAddresses) != 1 || leaf.IPAddresses[0].String() != "127.77.0.5" || leaf.DNSNames[1] != "*.site.p2p" {
		t.Fatalf("names %v %v", leaf.DNSNames, leaf.IPAddresses)
	}
	// A restart reads the saved root and leaf.
	ca2, err := Open(dir, clock)
	if err != nil {
		t.Fatal(err)
	}
	c2, err := ca2.Certificate("site.p2p", netip.Addr{})
	if err != nil || c2.Leaf.SerialNumber.Cmp(leaf.SerialNumber) != 0 {
		t.Fatalf("after restart: %v %v", c2, err)
	}
	// Close to expiry: issued again.
	now = now.Add(LeafLifetime - RenewBefore + time.Hour)
	c3, err := ca2.Certificate("site.p2p", netip.Addr{})
	if err != nil || c3.Leaf.SerialNumber.Cmp(leaf.SerialNumber) == 0 {
		t.Fatal("not renewed before expiry")
	}
	// A new root re-signs every leaf.
	oldPool := ca2.Pool()
	n, _, err := ca2.RegenerateRoot()
	if err != nil || n != 1 {
		t.Fatalf("regenerate: %d %v", n, err)
	}
	c4, _ := ca2.Certificate("site.p2p", netip.Addr{})
	if _, err := c4.Leaf.Verify(x509.VerifyOptions{Roots: ca2.Pool(), DNSName: "site.p2p", CurrentTime: now}); err != nil {
		t.Fatalf("re-signed leaf: %v", err)
	}
	if _, err := c4.Leaf.Verify(x509.VerifyOptions{Roots: oldPool, DNSName: "site.p2p", CurrentTime: now}); err == nil {
		t.Fatal("re-signed leaf still verifies against the old root")
	}
	for _, bad := range []string{"", "localhost", "../x.p2p", "a..b", "UPPER.p2p", "x_y.p2p"} {
		if _, err := ca2.Certificate(bad, netip.Addr{}); err == nil {
			t.Errorf("issued for %q", bad)
		}
	}
	if ok, err := ca2.Delete("site.p2p"); !ok || err != nil {
		t.Fatalf("delete: %v %v", ok, err)
	}
	if list, _ := ca2.List(); len(list) != 0 {
		t.Fatalf("after delete: %v", list)
	}
}

// BenchmarkCachedCertificate: what a TLS handshake asks of the CA for a
// name whose leaf is cached (the GetCertificate of every handshake but
// the first).
func BenchmarkCachedCertificate(b *testing.B) {
	ca, err := Open(b.TempDir(), nil)
	if err != nil {
		b.Fatal(err)
	}
	if _, err := ca.Certificate("site.p2p", netip.Addr{}); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := ca.Certificate("site.p2p", netip.Addr{}); err != nil {
			b.Fatal(err)
		}
	}
}

// A leaf on disk that another root signed (a data folder restored from
// elsewhere, a root replaced by hand) is not handed out: a new one is
// issued under this CA's root, and checked once, not at each handshake.
func TestLeafOfAnotherRootIsReissued(t *testing.T) {
	dirA, dirB := t.TempDir(), t.TempDir()
	a, err := Open(dirA, nil)
	if err != nil {
		t.Fatal(err)
	}
	b, err := Open(dirB, nil)
	if err != nil {
		t.Fatal(err)
	}
	foreign, err := b.Certificate("site.p2p", netip.Addr{})
	if err != nil {
		t.Fatal(err)
	}
	pem, err := os.ReadFile(b.leafPath("site.p2p"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Dir(a.leafPath("site.p2p")), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(a.leafPath("site.p2p"), pem, 0o600); err != nil {
		t.Fatal(err)
	}
	for range 2 { // issued, then from the cache
		got, err := a.Certificate("site.p2p", netip.Addr{})
		if err != nil {
			t.Fatal(err)
		}
		if got.Leaf.SerialNumber.Cmp(foreign.Leaf.SerialNumber) == 0 {
			t.Fatal("the other root's leaf was handed out")
		}
		if _, err := got.Leaf.Verify(x509.VerifyOptions{Roots: a.Pool(), DNSName: "site.p2p"}); err != nil {
			t.Fatalf("the leaf handed out does not verify against this root: %v", err)
		}
	}
}

// A domain as long as a name may be (253 bytes) gets its leaf like any
// other, though "<domain>.pem" is longer than a file name may be (255
// bytes): issued, listed, kept across a restart, shown and deleted.
func TestLeafOfLongestDomain(t *testing.T) {
	dir := t.TempDir()
	ca, err := Open(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	long := strings.Repeat("a", 63) + "." + strings.Repeat("b", 63) + "." + strings.Repeat("c", 63) + "." + strings.Repeat("d", 57) + ".p2p"
	if len(long) != 253 || !ValidDomain(long) {
		t.Fatalf("test name: %d bytes", len(long))
	}
	issued, err := ca.Issue(long, netip.Addr{})
	if err != nil {
		t.Fatalf("Issue(%d-byte domain) = %v", len(long), err)
	}
	list, err := ca.List()
	if err != nil || len(list) != 1 || list[0].Domain != long {
		t.Fatalf("List() = %v, %v; want the one leaf of %s", list, err, long)
	}
	restarted, err := Open(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	c, err := restarted.Certificate(long, netip.Addr{})
	if err != nil || c.Leaf.SerialNumber.Text(16) != issued.Serial {
		t.Fatalf("Certificate after a restart: %v, %v; want the saved leaf %s", c, err, issued.Serial)
	}
	if _, err := restarted.PEM(long); err != nil {
		t.Fatalf("PEM: %v", err)
	}
	if ok, err := restarted.Delete(long); !ok || err != nil {
		t.Fatalf("Delete = %v, %v", ok, err)
	}
	if list, err := restarted.List(); err != nil || len(list) != 0 {
		t.Fatalf("List() after Delete = %v, %v", list, err)
	}
}

// regenerate-cert while a handshake's issue for the same domain is in
// flight: the leaf Issue made is the one saved and served, not the
// handshake's that finished after it.
func TestIssueOvertakesHandshakeInFlight(t *testing.T) {
	var hold atomic.Bool
	reached, release := make(chan struct{}), make(chan struct{})
	ca, err := Open(t.TempDir(), func() time.Time {
		if hold.CompareAndSwap(true, false) {
			close(reached)
			<-release
		}
		return time.Now()
	})
	if err != nil {
		t.Fatal(err)
	}
	hold.Store(true) // the next leaf issued stops at its clock reading
	type result struct {
		c   *tls.Certificate
		err error
	}
	hs := make(chan result, 1)
	go func() {
		c, err := ca.Certificate("a.p2p", netip.Addr{})
		hs <- result{c, err}
	}()
	<-reached // the handshake's leaf is being issued
	issued, err := ca.Issue("a.p2p", netip.MustParseAddr("10.9.0.2"))
	if err != nil {
		t.Fatal(err)
	}
	close(release)
	if r := <-hs; r.err != nil {
		t.Fatalf("handshake: %v", r.err)
	}

	served, err := ca.Certificate("a.p2p", netip.Addr{})
	if err != nil {
		t.Fatal(err)
	}
	if got := served.Leaf.SerialNumber.Text(16); got != issued.Serial {
		t.Fatalf("served leaf serial %s after Issue made %s: the handshake's leaf, issued before, won", got, issued.Serial)
	}
	b, err := ca.PEM("a.p2p")
	if err != nil {
		t.Fatal(err)
	}
	blk, _ := pem.Decode(b)
	x, err := x509.ParseCertificate(blk.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	if got := x.SerialNumber.Text(16); got != issued.Serial {
		t.Fatalf("saved leaf serial %s after Issue made %s", got, issued.Serial)
	}
}
