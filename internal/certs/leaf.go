package certs

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"
)

// ErrBadDomain: no certificate is issued for a name that is not a domain.
var ErrBadDomain = errors.New("not a domain name")

// Info describes one leaf (GET /api/certs).
type Info struct {
	Domain    string   `json:"domain"`
	Serial    string   `json:"serial"`
	NotBefore int64    `json:"notBefore"` // ms
	NotAfter  int64    `json:"notAfter"`  // ms
	Names     []string `json:"names"`
	IPs       []string `json:"ips"`
	Issuer    string   `json:"issuer"`
}

func (ca *CA) leafPath(domain string) string {
	return filepath.Join(ca.dir, "leaves", leafFile(domain))
}

// maxFileName is the longest file name the usual file systems take
// (ext4, XFS, APFS, NTFS: 255 bytes).
const maxFileName = 255

// longPrefix starts the file name of a leaf whose domain is too long for
// "<domain>.pem" (the name has no dot, so it is not a domain's).
const longPrefix = "long-"

// leafFile is domain's file name in leaves/: "<domain>.pem", or, for a
// domain too long for that (252 and 253 bytes, valid DNS names),
// "long-<sha256 of domain>.pem"; List reads the domain of such a file
// from its certificate.
func leafFile(domain string) string {
	if len(domain)+len(".pem") <= maxFileName {
		return domain + ".pem"
	}
	sum := sha256.Sum256([]byte(domain))
	return longPrefix + hex.EncodeToString(sum[:]) + ".pem"
}

// Certificate returns the leaf for domain (lower case, no trailing dot),
// issuing it when there is none or it is due for renewal. ip, when valid,
// goes in its names at issue.
func (ca *CA) Certificate(domain string, ip netip.Addr) (*tls.Certificate, error) {
	if !ValidDomain(domain) {
		return nil, fmt.Errorf("%w: %q", ErrBadDomain, domain)
	}
	ca.mu.Lock()
	if l := ca.leaves[domain]; l != nil && ca.fresh(l) {
		ca.mu.Unlock()
		return l.cert, nil
	}
	// One issue per domain; concurrent handshakes wait for it. Checked
	// before the file: an issue in flight writes the file before it
	// caches the leaf, and reading it then would hand out a second copy.
	if in := ca.issue[domain]; in != nil {
		ca.mu.Unlock()
		<-in.done
		if in.err != nil {
			return nil, in.err
		}
		return in.l.cert, nil
	}
	if l, err := ca.loadLeaf(domain); err == nil && ca.fresh(l) {
		ca.leaves[domain] = l
		ca.mu.Unlock()
		return l.cert, nil
	}
	in := &issuing{done: make(chan struct{})}
	ca.issue[domain] = in
	root, key := ca.root, ca.key
	ca.mu.Unlock()

	l, file, err := ca.newLeaf(root, key, domain, ip)
	if err == nil {
		// Overtaken by Issue (which took the issue off ca.issue) or by a
		// new root: this handshake gets its leaf, the node keeps theirs.
		_, err = ca.store(domain, l, file, func() bool { return ca.issue[domain] == in && ca.root == root })
	}
	in.l, in.err = l, err
	ca.mu.Lock()
	if ca.issue[domain] == in {
		delete(ca.issue, domain)
	}
	ca.mu.Unlock()
	close(in.done)
	if in.err != nil {
		return nil, in.err
	}
	return in.l.cert, nil
}

// fresh: the leaf is from the current root and not due for renewal.
// Called with ca.mu held, on every handshake for a cached leaf: the
// signature (an ECDSA verification, and two names rendered) is checked
// only when the root is not the one the leaf was last found signed by.
func (ca *CA) fresh(l *leaf) bool {
	if l.root != ca.root {
		if l.x509.Issuer.String() != ca.root.Subject.String() || l.x509.CheckSignatureFrom(ca.root) != nil {
			return false
		}
		l.root = ca.root
	}
	return ca.now().Add(RenewBefore).Before(l.x509.NotAfter)
}

func (ca *CA) loadLeaf(domain string) (*leaf, error) {
	b, err := os.ReadFile(ca.leafPath(domain))
	if err != nil {
		return nil, err
	}
	pair, err := tls.X509KeyPair(b, b)
	if err != nil {
		return nil, err
	}
	x, err := x509.ParseCertificate(pair.Certificate[0])
	if err != nil {
		return nil, err
	}
	pair.Leaf = x
	return &leaf{cert: &pair, x509: x}, nil
}

// newLeaf issues a leaf and returns it with its file (certificate and
// key, PEM) for store. A domain outside root's name constraints gets no
// leaf (ErrOutsideScope); an IP outside them is left out. The leaf is
// verified against root, so a constraint this code misreads shows up as
// an error, not as a certificate every client refuses.
func (ca *CA) newLeaf(root *x509.Certificate, rootKey *ecdsa.PrivateKey, domain string, ip netip.Addr) (*leaf, []byte, error) {
	if !AllowsName(root, domain) {
		// No advice here: a handshake must not ask the node what it
		// serves (an actor round trip) for every refused name. Issue adds
		// it for the API.
		return nil, nil, outside(domain, root, nil)
	}
	if ip.IsValid() && !AllowsIP(root, ip) {
		ip = netip.Addr{}
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	now := ca.now()
	tpl := &x509.Certificate{
		SerialNumber: serial(),
		Subject:      pkix.Name{CommonName: domain},
		DNSNames:     []string{domain, "*." + domain},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(LeafLifetime),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	if a := ipOf(ip); a != nil {
		tpl.IPAddresses = []net.IP{a}
	}
	der, err := x509.CreateCertificate(rand.Reader, tpl, root, &key.PublicKey, rootKey)
	if err != nil {
		return nil, nil, fmt.Errorf("issue %s: %w", domain, err)
	}
	kb, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, nil, err
	}
	x, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, nil, fmt.Errorf("issue %s: %w", domain, err)
	}
	if Constrained(root) {
		pool := x509.NewCertPool()
		pool.AddCert(root)
		if _, err := x.Verify(x509.VerifyOptions{Roots: pool, DNSName: domain, CurrentTime: now}); err != nil {
			return nil, nil, fmt.Errorf("%w: %s: %v", ErrOutsideScope, domain, err)
		}
	}
	certPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	keyPEM := pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb})
	l := &leaf{cert: &tls.Certificate{Certificate: [][]byte{der, root.Raw}, PrivateKey: key, Leaf: x}, x509: x, root: root}
	return l, append(append([]byte{}, certPEM...), keyPEM...), nil
}

// store saves l (file, from newLeaf) as domain's leaf and caches it,
// unless current, called with ca.mu held, says it was overtaken
// meanwhile (nil: never); it reports whether it stored. The issue in
// flight for domain, if any, is overtaken by it.
func (ca *CA) store(domain string, l *leaf, file []byte, current func() bool) (bool, error) {
	ca.saveMu.Lock()
	defer ca.saveMu.Unlock()
	ca.mu.Lock()
	ok := current == nil || current()
	ca.mu.Unlock()
	if !ok {
		return false, nil
	}
	if err := writeFile(ca.leafPath(domain), file, 0o600); err != nil {
		return false, fmt.Errorf("save %s: %w", domain, err)
	}
	ca.mu.Lock()
	ca.leaves[domain] = l
	delete(ca.issue, domain)
	ca.mu.Unlock()
	return true, nil
}

// Issue issues a new leaf for domain now (generate-cert, regenerate-cert:
// a new serial), replacing the one cached.
func (ca *CA) Issue(domain string, ip netip.Addr) (Info, error) {
	if !ValidDomain(domain) {
		return Info{}, fmt.Errorf("%w: %q", ErrBadDomain, domain)
	}
	ca.mu.Lock()
	root, key := ca.root, ca.key
	ca.mu.Unlock()
	l, file, err := ca.newLeaf(root, key, domain, ip)
	if errors.Is(err, ErrOutsideScope) && !AllowsName(root, domain) {
		return Info{}, outside(domain, root, ca.scope)
	}
	if err != nil {
		return Info{}, err
	}
	if _, err := ca.store(domain, l, file, nil); err != nil {
		return Info{}, err
	}
	return info(domain, l.x509), nil
}

// Delete removes domain's leaf (a later handshake issues a new one).
func (ca *CA) Delete(domain string) (bool, error) {
	if !ValidDomain(domain) {
		return false, fmt.Errorf("%w: %q", ErrBadDomain, domain)
	}
	ca.mu.Lock()
	delete(ca.leaves, domain)
	ca.mu.Unlock()
	err := os.Remove(ca.leafPath(domain))
	if errors.Is(err, os.ErrNotExist) {
		return false, nil
	}
	return err == nil, err
}

// List describes every saved leaf, by domain.
func (ca *CA) List() ([]Info, error) {
	ents, err := os.ReadDir(filepath.Join(ca.dir, "leaves"))
	if err != nil {
		return nil, err
	}
	out := []Info{}
	for _, e := range ents {
		d, ok := strings.CutSuffix(e.Name(), ".pem")
		if ok && !ValidDomain(d) && strings.HasPrefix(d, longPrefix) {
			d = longDomain(filepath.Join(ca.dir, "leaves", e.Name()))
		}
		if !ok || !ValidDomain(d) || leafFile(d) != e.Name() {
			continue
		}
		l, err := ca.loadLeaf(d)
		if err != nil {
			continue
		}
		out = append(out, info(d, l.x509))
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Domain < out[j].Domain })
	return out, nil
}

// longDomain is the domain of the leaf in path, a long-<hash>.pem file:
// its certificate's subject ("" when it does not read).
func longDomain(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	for {
		var blk *pem.Block
		if blk, b = pem.Decode(b); blk == nil {
			return ""
		}
		if blk.Type == "CERTIFICATE" {
			x, err := x509.ParseCertificate(blk.Bytes)
			if err != nil {
				return ""
			}
			return x.Subject.CommonName
		}
	}
}

// PEM is domain's saved certificate (not its key), PEM.
func (ca *CA) PEM(domain string) ([]byte, error) {
	if !ValidDomain(domain) {
		return nil, fmt.Errorf("%w: %q", ErrBadDomain, domain)
	}
	l, err := ca.loadLeaf(domain)
	if err != nil {
		return nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: l.x509.Raw}), nil
}

// RegenerateRoot makes a new root and issues every saved leaf again
// from it (keeping each one's names), returning how many. A leaf whose
// domain the new root may not sign for is deleted and named in dropped.
func (ca *CA) RegenerateRoot() (n int, dropped []string, err error) {
	list, err := ca.List()
	if err != nil {
		return 0, nil, err
	}
	scope := ca.currentScope()
	ca.saveMu.Lock()
	ca.mu.Lock()
	err = ca.newRoot(scope)
	ca.leaves = map[string]*leaf{}
	root, key := ca.root, ca.key
	ca.mu.Unlock()
	ca.saveMu.Unlock()
	if err != nil {
		return 0, nil, err
	}
	for _, i := range list {
		var ip netip.Addr
		if len(i.IPs) > 0 {
			ip, _ = netip.ParseAddr(i.IPs[0])
		}
		l, file, err := ca.newLeaf(root, key, i.Domain, ip)
		if errors.Is(err, ErrOutsideScope) {
			if err := os.Remove(ca.leafPath(i.Domain)); err != nil && !errors.Is(err, os.ErrNotExist) {
				return n, dropped, err
			}
			dropped = append(dropped, i.Domain)
			continue
		}
		if err != nil {
			return n, dropped, err
		}
		stored, err := ca.store(i.Domain, l, file, func() bool { return ca.root == root })
		if err != nil {
			return n, dropped, err
		}
		if stored {
			n++
		}
	}
	return n, dropped, nil
}

func info(domain string, x *x509.Certificate) Info {
	i := Info{Domain: domain, Serial: x.SerialNumber.Text(16), NotBefore: x.NotBefore.UnixMilli(), NotAfter: x.NotAfter.UnixMilli(),
		Names: x.DNSNames, IPs: []string{}, Issuer: x.Issuer.CommonName}
	for _, ip := range x.IPAddresses {
		i.IPs = append(i.IPs, ip.String())
	}
	return i
}
