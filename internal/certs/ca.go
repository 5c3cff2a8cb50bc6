// Package certs is the node's own certificate authority: an ECDSA P-256
// root made on first start (DATA/ca/root.pem, its key root-key.pem 0600;
// a new root passes through root-next.pem, see newRoot) and a leaf per
// domain, issued on first use and kept in
// DATA/ca/leaves/<domain>.pem (certificate and key, 0600; a domain too
// long for a file name, long-<hash>.pem, see leafFile).
//
// A leaf's names are the domain, *.domain and, when given, the domain's
// local IP; it is valid for LeafLifetime (90 days) and issued again when
// less than RenewBefore (30 days) is left, at its next use. Issuing uses
// crypto/x509 from the standard library. A root made through
// OpenScoped carries name constraints (scope.go). The TLS handshake asks
// Certificate: a cached leaf costs a map read; the first handshake for a
// domain waits for that one issue (concurrent handshakes for the same
// domain share it), later ones read the cache.
package certs

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"
)

// Lifetimes.
const (
	RootLifetime = 10 * 365 * 24 * time.Hour
	LeafLifetime = 90 * 24 * time.Hour
	RenewBefore  = 30 * 24 * time.Hour
)

// CA issues and caches leaf certificates. Safe for concurrent use.
type CA struct {
	dir   string
	now   func() time.Time
	scope func() Scope // what a new root may sign for; nil: no constraints

	// saveMu orders the saves of leaves and the change of root: a leaf's
	// file is written and cached under it, so the file and the cache end
	// with the same leaf, and one issued from a replaced root, or
	// overtaken by Issue, is neither saved nor cached (store).
	saveMu sync.Mutex
	mu     sync.Mutex // guards root and leaves
	root   *x509.Certificate
	key    *ecdsa.PrivateKey
	rootPE []byte
	leaves map[string]*leaf
	issue  map[string]*issuing // in-flight issues by domain
}

type leaf struct {
	cert *tls.Certificate
	x509 *x509.Certificate
	// root is the root the leaf was last found signed by (fresh; under
	// CA.mu), nil before it was checked: a root is replaced, never
	// changed in place, so the check is made once per leaf and root,
	// not once per handshake.
	root *x509.Certificate
}

type issuing struct {
	done chan struct{}
	l    *leaf
	err  error
}

// Open loads the CA in dir (DATA/ca), making the root on first use. A
// root it makes has no name constraints (tools and tests); the node
// opens its CA with OpenScoped.
func Open(dir string, now func() time.Time) (*CA, error) { return OpenScoped(dir, now, nil) }

// OpenScoped is Open for a CA whose new roots (the first one, and every
// RegenerateRoot) are constrained to scope(), read at the moment the root
// is made. A root already on disk is kept as it is, constrained or not.
func OpenScoped(dir string, now func() time.Time, scope func() Scope) (*CA, error) {
	if now == nil {
		now = time.Now
	}
	if err := os.MkdirAll(filepath.Join(dir, "leaves"), 0o700); err != nil {
		return nil, fmt.Errorf("ca folder: %w", err)
	}
	ca := &CA{dir: dir, now: now, scope: scope, leaves: map[string]*leaf{}, issue: map[string]*issuing{}}
	if err := ca.loadRoot(); err != nil {
		if !errors.Is(err, os.ErrNotExist) {
			return nil, err
		}
		if err := ca.newRoot(ca.currentScope()); err != nil {
			return nil, err
		}
	}
	return ca, nil
}

func (ca *CA) rootPath() string    { return filepath.Join(ca.dir, "root.pem") }
func (ca *CA) rootKeyPath() string { return filepath.Join(ca.dir, "root-key.pem") }

// nextPath is DATA/ca/root-next.pem: a new root's certificate and key
// while newRoot writes them to their two files.
func (ca *CA) nextPath() string { return filepath.Join(ca.dir, "root-next.pem") }

func (ca *CA) loadRoot() error {
	if next, err := os.ReadFile(ca.nextPath()); err == nil {
		// A new root whose switch was cut short: finish it.
		certPEM, keyPEM, err := splitPair(next)
		if err != nil {
			return fmt.Errorf("ca root: %s: %w", ca.nextPath(), err)
		}
		if err := ca.install(certPEM, keyPEM); err != nil {
			return fmt.Errorf("ca root: %w", err)
		}
	} else if !errors.Is(err, os.ErrNotExist) {
		return err
	}
	certPEM, err := os.ReadFile(ca.rootPath())
	if err != nil {
		return err
	}
	keyPEM, err := os.ReadFile(ca.rootKeyPath())
	if err != nil {
		return err
	}
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return fmt.Errorf("ca root: %w", err)
	}
	cert, err := x509.ParseCertificate(pair.Certificate[0])
	if err != nil {
		return fmt.Errorf("ca root: %w", err)
	}
	key, ok := pair.PrivateKey.(*ecdsa.PrivateKey)
	if !ok {
		return errors.New("ca root key is not ECDSA")
	}
	ca.root, ca.key, ca.rootPE = cert, key, certPEM
	return nil
}

// currentScope is the scope for a new root (nil: no constraints). It is
// read before ca.mu is taken: the node's scope function asks an actor.
func (ca *CA) currentScope() *Scope {
	if ca.scope == nil {
		return nil
	}
	s := ca.scope()
	return &s
}

// newRoot makes a new root, constrained to scope when it is not nil, and
// writes it (replacing any). The pair is written whole to root-next.pem
// first, then to root-key.pem and root.pem, then root-next.pem goes: a
// crash between the two files would otherwise leave a key and a
// certificate that do not match, a CA that does not open. From
// root-next.pem the next start (loadRoot) finishes the switch; an error
// after it was written leaves the switch to the next start too, and the
// running CA on its old root.
func (ca *CA) newRoot(scope *Scope) error {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	now := ca.now()
	tpl := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: "peerdns local root CA", Organization: []string{"peerdns"}},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(RootLifetime),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLenZero:        true,
	}
	if scope != nil {
		constrain(tpl, *scope)
		tpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
	}
	der, err := x509.CreateCertificate(rand.Reader, tpl, tpl, &key.PublicKey, key)
	if err != nil {
		return err
	}
	cert, _ := x509.ParseCertificate(der)
	certPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	kb, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return err
	}
	keyPEM := pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb})
	if err := writeFile(ca.nextPath(), append(append([]byte{}, certPEM...), keyPEM...), 0o600); err != nil {
		return err
	}
	if err := ca.install(certPEM, keyPEM); err != nil {
		return err
	}
	ca.root, ca.key, ca.rootPE = cert, key, certPEM
	return nil
}

// install writes a root's key and certificate to their files, then
// removes root-next.pem, which holds both until they are there.
func (ca *CA) install(certPEM, keyPEM []byte) error {
	if err := writeFile(ca.rootKeyPath(), keyPEM, 0o600); err != nil {
		return err
	}
	if err := writeFile(ca.rootPath(), certPEM, 0o644); err != nil {
		return err
	}
	if err := os.Remove(ca.nextPath()); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return nil
}

// splitPair splits root-next.pem into its certificate and key, PEM,
// once they are found to be a pair.
func splitPair(b []byte) (certPEM, keyPEM []byte, err error) {
	if _, err := tls.X509KeyPair(b, b); err != nil {
		return nil, nil, err
	}
	for {
		var blk *pem.Block
		if blk, b = pem.Decode(b); blk == nil {
			return certPEM, keyPEM, nil
		}
		if blk.Type == "CERTIFICATE" {
			certPEM = pem.EncodeToMemory(blk)
		} else {
			keyPEM = pem.EncodeToMemory(blk)
		}
	}
}

// RootPEM is the root certificate, PEM.
func (ca *CA) RootPEM() []byte {
	ca.mu.Lock()
	defer ca.mu.Unlock()
	return append([]byte(nil), ca.rootPE...)
}

// Root is the root certificate (shared: do not modify).
func (ca *CA) Root() *x509.Certificate {
	ca.mu.Lock()
	defer ca.mu.Unlock()
	return ca.root
}

// Scope is what the node serves now (empty without a scope function).
func (ca *CA) Scope() Scope {
	if ca.scope == nil {
		return Scope{}.Normalize()
	}
	return ca.scope().Normalize()
}

// RootPath is DATA/ca/root.pem.
func (ca *CA) RootPath() string { return ca.rootPath() }

// Pool is a cert pool holding the root (for clients in tests and tools).
func (ca *CA) Pool() *x509.CertPool {
	p := x509.NewCertPool()
	p.AppendCertsFromPEM(ca.RootPEM())
	return p
}

func serial() *big.Int {
	n, _ := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	return n
}

// writeFile writes b to path atomically (temp file, rename).
func writeFile(path string, b []byte, mode os.FileMode) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), ".tmp-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(b); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Chmod(mode); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return err
	}
	if afterWrite != nil {
		afterWrite()
	}
	return nil
}

// afterWrite, when set (by tests), runs after each of writeFile's
// renames: a test ends the goroutine there to leave the folder as a
// crash would.
var afterWrite func()

// ValidDomain checks a name a leaf may be issued for.
func ValidDomain(d string) bool {
	if d == "" || len(d) > 253 || !strings.Contains(d, ".") {
		return false
	}
	for _, l := range strings.Split(d, ".") {
		if l == "" || len(l) > 63 || l[0] == '-' || l[len(l)-1] == '-' {
			return false
		}
		for i := 0; i < len(l); i++ {
			c := l[i]
			if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-') {
				return false
			}
		}
	}
	return true
}

// ipOf turns an address into the SAN form.
func ipOf(a netip.Addr) net.IP {
	if !a.IsValid() {
		return nil
	}
	return net.IP(a.Unmap().AsSlice())
}
