package certs

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

func testScope() Scope {
	return Scope{Suffixes: []string{"p2p", "admin.p2p", "Home.", "dev.lan"}, Ranges: []netip.Prefix{
		netip.MustParsePrefix("127.77.0.0/16"), netip.MustParsePrefix("127.77.1.0/24"), netip.MustParsePrefix("198.51.100.0/24")}}
}

func openScoped(t *testing.T, scope func() Scope) (*CA, string) {
	t.Helper()
	dir := t.TempDir()
	ca, err := OpenScoped(dir, nil, scope)
	if err != nil {
		t.Fatal(err)
	}
	return ca, dir
}

func TestScopeNormalize(t *testing.T) {
	got := testScope().Normalize()
	want := Scope{Suffixes: []string{"dev.lan", "home", "p2p"}, Ranges: []netip.Prefix{
		netip.MustParsePrefix("127.77.0.0/16"), netip.MustParsePrefix("198.51.100.0/24")}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("Normalize = %+v, want %+v", got, want)
	}
}

// A new root carries critical name constraints and the serverAuth usage;
// names inside are issued, names outside refused with the reason.
func TestConstrainedRootIssues(t *testing.T) {
	scope := testScope()
	ca, _ := openScoped(t, func() Scope { return scope })
	root := ca.Root()
	if !root.PermittedDNSDomainsCritical || !reflect.DeepEqual(root.PermittedDNSDomains, []string{"dev.lan", "home", "p2p"}) {
		t.Fatalf("root DNS constraints %v (critical %v)", root.PermittedDNSDomains, root.PermittedDNSDomainsCritical)
	}
	if len(root.PermittedIPRanges) != 2 || !reflect.DeepEqual(root.ExtKeyUsage, []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}) {
		t.Fatalf("root IP ranges %v, EKU %v", root.PermittedIPRanges, root.ExtKeyUsage)
	}
	tests := []struct {
		name   string
		domain string
		ip     string
		ok     bool
		wantIP bool
	}{
		{"p2p domain with its IP", "site.p2p", "127.77.0.9", true, true},
		{"local record suffix", "nas.home", "", true, false},
		{"deeper under a suffix", "a.b.dev.lan", "", true, false},
		{"IP outside the ranges is left out", "web.p2p", "10.1.2.3", true, false},
		{"public name refused", "example.com", "", false, false},
		{"suffix lookalike refused", "evilp2p.com", "", false, false},
		{"sibling of a suffix refused", "prod.lan", "", false, false},
	}
	pool := ca.Pool()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var ip netip.Addr
			if tt.ip != "" {
				ip = netip.MustParseAddr(tt.ip)
			}
			info, err := ca.Issue(tt.domain, ip)
			if !tt.ok {
				if !errors.Is(err, ErrOutsideScope) || !strings.Contains(err.Error(), tt.domain) {
					t.Fatalf("Issue(%q) = %+v, %v; want ErrOutsideScope naming it", tt.domain, info, err)
				}
				if _, err := os.Stat(ca.leafPath(tt.domain)); !os.IsNotExist(err) {
					t.Fatalf("a leaf was saved for %s", tt.domain)
				}
				if _, err := ca.Certificate(tt.domain, ip); !errors.Is(err, ErrOutsideScope) {
					t.Fatalf("Certificate(%q) = %v, want ErrOutsideScope", tt.domain, err)
				}
				return
			}
			if err != nil {
				t.Fatalf("Issue(%q) = %v", tt.domain, err)
			}
			if got := len(info.IPs) == 1; got != tt.wantIP {
				t.Fatalf("Issue(%q) IPs %v, want an IP: %v", tt.domain, info.IPs, tt.wantIP)
			}
			c, err := ca.Certificate(tt.domain, ip)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := c.Leaf.Verify(x509.VerifyOptions{Roots: pool, DNSName: "x." + tt.domain}); err != nil {
				t.Fatalf("leaf for *.%s: %v", tt.domain, err)
			}
		})
	}
}

// A name the node came to serve after the root was made is refused with
// the advice to regenerate; regenerate covers it and drops leaves the
// new root may not sign for; Missing tells the gap.
func TestScopeGrowsRegenerate(t *testing.T) {
	scope := Scope{Suffixes: []string{"p2p", "old.lan"}, Ranges: []netip.Prefix{netip.MustParsePrefix("127.77.0.0/16")}}
	ca, _ := openScoped(t, func() Scope { return scope })
	if _, err := ca.Issue("x.old.lan", netip.Addr{}); err != nil {
		t.Fatal(err)
	}
	scope = Scope{Suffixes: []string{"p2p", "home"}, Ranges: []netip.Prefix{netip.MustParsePrefix("127.77.0.0/16"), netip.MustParsePrefix("198.51.100.0/24")}}
	miss := Missing(ca.Root(), scope)
	if !reflect.DeepEqual(miss.Suffixes, []string{"home"}) || len(miss.Ranges) != 1 || miss.Ranges[0].String() != "198.51.100.0/24" {
		t.Fatalf("Missing = %+v", miss)
	}
	_, err := ca.Issue("nas.home", netip.Addr{})
	if !errors.Is(err, ErrOutsideScope) || !strings.Contains(err.Error(), "regenerate") {
		t.Fatalf("Issue for a new suffix: %v, want advice to regenerate", err)
	}
	n, dropped, err := ca.RegenerateRoot()
	if err != nil || n != 0 || !reflect.DeepEqual(dropped, []string{"x.old.lan"}) {
		t.Fatalf("RegenerateRoot = %d %v %v", n, dropped, err)
	}
	if _, err := ca.Issue("nas.home", netip.Addr{}); err != nil {
		t.Fatal(err)
	}
	if m := Missing(ca.Root(), scope); !m.Empty() {
		t.Fatalf("Missing after regenerate = %+v", m)
	}
}

// A root made without constraints (an older node's) keeps issuing for
// any valid name, and Missing reports nothing for it.
func TestUnconstrainedRootKeepsWorking(t *testing.T) {
	dir := t.TempDir()
	old, err := Open(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	if Constrained(old.Root()) {
		t.Fatal("Open made a constrained root")
	}
	ca, err := OpenScoped(dir, nil, func() Scope { return Scope{Suffixes: []string{"p2p"}} })
	if err != nil {
		t.Fatal(err)
	}
	if Constrained(ca.Root()) {
		t.Fatal("reopening constrained an existing root")
	}
	if _, err := ca.Issue("example.com", netip.Addr{}); err != nil {
		t.Fatalf("unconstrained root refused: %v", err)
	}
	if !Missing(ca.Root(), ca.Scope()).Empty() {
		t.Fatal("Missing on an unconstrained root")
	}
}

// forge signs a leaf for name with the root's own key, bypassing the
// CA's checks, as a thief holding root-key.pem would.
func forge(t *testing.T, dir, name string, ip net.IP) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "root-key.pem"))
	if err != nil {
		t.Fatal(err)
	}
	blk, _ := pem.Decode(b)
	rootKey, err := x509.ParseECPrivateKey(blk.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	rb, _ := os.ReadFile(filepath.Join(dir, "root.pem"))
	rblk, _ := pem.Decode(rb)
	root, err := x509.ParseCertificate(rblk.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tpl := &x509.Certificate{
		SerialNumber: serial(), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	if name != "" {
		tpl.DNSNames = []string{name}
	}
	if ip != nil {
		tpl.IPAddresses = []net.IP{ip}
	}
	der, err := x509.CreateCertificate(rand.Reader, tpl, root, &key.PublicKey, rootKey)
	if err != nil {
		t.Fatal(err)
	}
	return der
}

// Leaves forged with the root key outside its constraints are rejected
// by Go's verifier and by openssl verify; a forged leaf inside them
// passes both (so the rejections are the constraints, not the forging).
func TestForgedLeafRejected(t *testing.T) {
	ca, dir := openScoped(t, testScope)
	pool := ca.Pool()
	openssl, _ := exec.LookPath("openssl")
	tests := []struct {
		name string
		dns  string
		ip   net.IP
		ok   bool
	}{
		{"inside", "shop.p2p", nil, true},
		{"public name", "bank.example.com", nil, false},
		{"lookalike", "p2p.example.net", nil, false},
		{"ip outside", "", net.ParseIP("203.0.113.7").To4(), false},
		{"ip inside", "", net.ParseIP("198.51.100.7").To4(), true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			der := forge(t, dir, tt.dns, tt.ip)
			leaf, err := x509.ParseCertificate(der)
			if err != nil {
				t.Fatal(err)
			}
			opts := x509.VerifyOptions{Roots: pool}
			if tt.dns != "" {
				opts.DNSName = tt.dns
			}
			_, err = leaf.Verify(opts)
			if tt.ok != (err == nil) {
				t.Fatalf("Go verify of a forged %s leaf: %v, want ok=%v", tt.name, err, tt.ok)
			}
			var inv x509.CertificateInvalidError
			if !tt.ok && (!errors.As(err, &inv) || inv.Reason != x509.CANotAuthorizedForThisName) {
				t.Fatalf("Go verify: %v, want CANotAuthorizedForThisName", err)
			}
			if openssl == "" {
				return // reported once below
			}
			lf := filepath.Join(t.TempDir(), "leaf.pem")
			if err := os.WriteFile(lf, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
				t.Fatal(err)
			}
			out, err := exec.Command(openssl, "verify", "-CAfile", ca.RootPath(), "-purpose", "sslserver", lf).CombinedOutput()
			if tt.ok != (err == nil) {
				t.Fatalf("openssl verify of a forged %s leaf: %v: %s", tt.name, err, out)
			}
			if !tt.ok && !strings.Contains(string(out), "permitted subtree violation") {
				t.Fatalf("openssl refused for another reason: %s", out)
			}
		})
	}
	if openssl == "" {
		t.Skip("openssl not found (apt-get install openssl): only Go's verifier was checked")
	}
}
