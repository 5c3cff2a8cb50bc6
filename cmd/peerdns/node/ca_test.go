package node

import (
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"peerdns/http/admin"
	"peerdns/internal/certs"
	"peerdns/internal/testutil"
	"peerdns/messages"
)

// awaitAdvice waits for the core log's regenerate-ca advice naming gap.
func awaitAdvice(t *testing.T, base, gap string) {
	t.Helper()
	testutil.Eventually(t, 10*time.Second, func() error {
		var logs struct{ Lines []string }
		mustJSON(t, "GET", base+"/api/logs/core?lines=500", "", 200, &logs)
		for _, l := range logs.Lines {
			if strings.Contains(l, "regenerate-ca") && strings.Contains(l, gap) {
				return nil
			}
		}
		return fmt.Errorf("no regenerate-ca advice naming %s in the core log:\n%s", gap, strings.Join(logs.Lines, "\n"))
	})
}

func caStatusOn(t *testing.T, n *Node) admin.CAStatus {
	var st admin.CAStatus
	mustJSON(t, "GET", "http://"+n.AdminAddr()+"/api/ca-status", "", 200, &st)
	return st
}

// The node's root is constrained to what it serves; generate-cert for a
// name outside answers 400 with the reason and issues nothing; a local
// record under a new suffix makes the node offer regenerate-ca, after
// which the name is issued.
func TestCANameConstraints(t *testing.T) {
	n := newTestNode(t, t.TempDir())
	base := "http://" + n.AdminAddr()
	st := caStatusOn(t, n)
	if !st.Constrained || !slices.Contains(st.Permitted.DNS, "p2p") || st.RegenerateAdvised || !strings.Contains(st.Allows, "only names under") {
		t.Fatalf("ca-status of a new node: %+v", st)
	}
	if !slices.Contains(st.Permitted.IP, "127.77.0.0/16") {
		t.Fatalf("root IP ranges %v lack the default subnet", st.Permitted.IP)
	}
	root := n.CA().Root()
	if !root.PermittedDNSDomainsCritical {
		t.Fatal("name constraints not critical")
	}

	mustJSON(t, "POST", base+"/api/generate-cert", `{"domain":"cert.p2p"}`, 200, nil)
	code, body := call(t, "POST", base+"/api/generate-cert", `{"domain":"www.example.com"}`)
	if code != 400 || !strings.Contains(body, "www.example.com") || !strings.Contains(body, "does not serve") {
		t.Fatalf("generate-cert outside the constraints = %d %q, want 400 with the reason", code, body)
	}
	var names []string
	mustJSON(t, "GET", base+"/api/certs", "", 200, &names)
	if !slices.Equal(names, []string{"cert.p2p"}) {
		t.Fatalf("certificates %v, want cert.p2p alone", names)
	}

	// A local record under a new suffix: offered, refused until regenerated.
	mustJSON(t, "POST", base+"/api/add-local-dns", `{"name":"nas.home","type":"A","ttl":60,"data":"127.0.0.9"}`, 200, nil)
	testutil.Eventually(t, 10*time.Second, func() error {
		if st = caStatusOn(t, n); !st.RegenerateAdvised || !slices.Equal(st.Missing.DNS, []string{"home"}) {
			return fmt.Errorf("ca-status after a record under .home: %+v", st)
		}
		return nil
	})
	code, body = call(t, "POST", base+"/api/generate-cert", `{"domain":"nas.home"}`)
	if code != 400 || !strings.Contains(body, "regenerate") {
		t.Fatalf("generate-cert under the new suffix = %d %q, want 400 advising regenerate-ca", code, body)
	}
	mustJSON(t, "POST", base+"/api/regenerate-ca", "", 200, nil)
	if st = caStatusOn(t, n); st.RegenerateAdvised || !slices.Contains(st.Permitted.DNS, "home") {
		t.Fatalf("ca-status after regenerate-ca: %+v", st)
	}
	mustJSON(t, "POST", base+"/api/generate-cert", `{"domain":"nas.home"}`, 200, nil)
}

// install-ca puts the root in a temporary system folder and in the NSS
// database under HOME (checked with certutil -L); uninstall-ca takes both
// out again.
func TestInstallCANSS(t *testing.T) {
	certutil, err := exec.LookPath("certutil")
	if err != nil {
		t.Skip("certutil not found: apt-get install libnss3-tools")
	}
	home := t.TempDir()
	t.Setenv("HOME", home)
	trust := t.TempDir()
	t.Setenv("PEERDNS_CA_TRUST_DIR", trust)
	db := filepath.Join(home, ".pki", "nssdb")
	if err := os.MkdirAll(db, 0o700); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(certutil, "-N", "-d", "sql:"+db, "--empty-password").CombinedOutput(); err != nil {
		t.Fatalf("certutil -N: %v: %s", err, out)
	}
	// A Firefox profile too.
	ff := filepath.Join(home, ".mozilla", "firefox", "abcd.default-release")
	if err := os.MkdirAll(ff, 0o700); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(certutil, "-N", "-d", "sql:"+ff, "--empty-password").CombinedOutput(); err != nil {
		t.Fatalf("certutil -N: %v: %s", err, out)
	}
	listed := func(dir string) string {
		out, err := exec.Command(certutil, "-L", "-d", "sql:"+dir).CombinedOutput()
		if err != nil {
			t.Fatalf("certutil -L: %v: %s", err, out)
		}
		return string(out)
	}

	n := newTestNode(t, t.TempDir())
	base := "http://" + n.AdminAddr()
	code, body := call(t, "POST", base+"/api/install-ca", "")
	if code != 200 || !strings.HasPrefix(body, "OK\n") || !strings.Contains(body, "copied to "+filepath.Join(trust, "peerdns-root.crt")) ||
		!strings.Contains(body, "added \"peerdns local root CA\" (trusted for TLS servers) to "+db) || !strings.Contains(body, ff) {
		t.Fatalf("install-ca = %d %q", code, body)
	}
	for _, d := range []string{db, ff} {
		if l := listed(d); !strings.Contains(l, admin.NSSNickname) || !strings.Contains(l, "C,,") {
			t.Fatalf("certutil -L in %s after install-ca:\n%s", d, l)
		}
	}
	// The NSS copy is the node's root.
	out, err := exec.Command(certutil, "-L", "-d", "sql:"+db, "-n", admin.NSSNickname, "-a").Output()
	if err != nil || strings.TrimSpace(strings.ReplaceAll(string(out), "\r", "")) != strings.TrimSpace(string(n.CA().RootPEM())) {
		t.Fatalf("NSS holds another certificate: %v\n%s", err, out)
	}
	// Installing again replaces, not duplicates.
	mustJSON(t, "POST", base+"/api/install-ca", "", 200, nil)
	if c := strings.Count(listed(db), admin.NSSNickname); c != 1 {
		t.Fatalf("%d copies after a second install-ca", c)
	}

	code, body = call(t, "POST", base+"/api/uninstall-ca", "")
	if code != 200 || !strings.Contains(body, "removed "+filepath.Join(trust, "peerdns-root.crt")) || !strings.Contains(body, "removed \"peerdns local root CA\" from "+db) {
		t.Fatalf("uninstall-ca = %d %q", code, body)
	}
	for _, d := range []string{db, ff} {
		if l := listed(d); strings.Contains(l, admin.NSSNickname) {
			t.Fatalf("certutil -L in %s after uninstall-ca:\n%s", d, l)
		}
	}
	if _, err := os.Stat(filepath.Join(trust, "peerdns-root.crt")); !os.IsNotExist(err) {
		t.Fatalf("system copy left: %v", err)
	}
	code, body = call(t, "POST", base+"/api/uninstall-ca", "")
	if code != 200 || !strings.Contains(body, "does not hold it") || !strings.Contains(body, "was not there") {
		t.Fatalf("second uninstall-ca = %d %q", code, body)
	}
}

// A node whose root was made before name constraints keeps it and its
// behaviour, says so in ca-status, and regenerate-ca constrains it.
func TestCAUnconstrainedRootKept(t *testing.T) {
	dir := t.TempDir()
	if _, err := certs.Open(filepath.Join(dir, "ca"), nil); err != nil {
		t.Fatal(err)
	}
	n := newTestNode(t, dir)
	base := "http://" + n.AdminAddr()
	st := caStatusOn(t, n)
	if st.Constrained || !st.RegenerateAdvised || !strings.Contains(st.Advice, "regenerate-ca") || !strings.Contains(st.Allows, "any name") {
		t.Fatalf("ca-status with an old root: %+v", st)
	}
	mustJSON(t, "POST", base+"/api/generate-cert", `{"domain":"www.example.com"}`, 200, nil)
	code, body := call(t, "POST", base+"/api/regenerate-ca", "")
	if code != 200 || !strings.Contains(body, "dropped www.example.com") {
		t.Fatalf("regenerate-ca = %d %q, want the out-of-scope leaf named as dropped", code, body)
	}
	if st = caStatusOn(t, n); !st.Constrained || st.RegenerateAdvised {
		t.Fatalf("ca-status after regenerate-ca: %+v", st)
	}
	if code, _ := call(t, "POST", base+"/api/generate-cert", `{"domain":"www.example.com"}`); code != 400 {
		t.Fatalf("generate-cert outside after regenerate-ca = %d, want 400", code)
	}
}

// A subnet saved through POST /api/subnets is an IP range the root does
// not cover: ca-status names it at once, and the node offers
// regenerate-ca in its core log without waiting for a domain or a
// record to change; regenerate-ca then covers it. (No domain is claimed:
// a new subnet allocates only after a restart, and nothing here may put
// an address on the host's interfaces.)
func TestCASubnetAdvised(t *testing.T) {
	n := newTestNode(t, t.TempDir())
	base := "http://" + n.AdminAddr()
	var subs struct{ Subnets []messages.Subnet }
	mustJSON(t, "GET", base+"/api/subnets", "", 200, &subs)
	if len(subs.Subnets) != 1 {
		t.Fatalf("default subnets %+v", subs.Subnets)
	}
	def := subs.Subnets[0]
	body := fmt.Sprintf(`{"subnets":[{"base":%q,"cidr":%d,"startIndex":%d},{"base":"198.51.100.0","cidr":24,"startIndex":10,"name":"lan"}]}`,
		def.Base, def.CIDR, def.StartIndex)
	mustJSON(t, "POST", base+"/api/subnets", body, 200, nil)
	if st := caStatusOn(t, n); !st.RegenerateAdvised || !slices.Equal(st.Missing.IP, []string{"198.51.100.0/24"}) {
		t.Fatalf("ca-status after a new subnet: %+v", st)
	}
	awaitAdvice(t, base, "198.51.100.0/24")
	mustJSON(t, "POST", base+"/api/regenerate-ca", "", 200, nil)
	if st := caStatusOn(t, n); st.RegenerateAdvised || !slices.Contains(st.Permitted.IP, "198.51.100.0/24") {
		t.Fatalf("ca-status after regenerate-ca: %+v", st)
	}
}

// An internal domain outside the root (a plugin's, under a suffix the
// node did not serve) makes the node advise regenerate-ca, although the
// scope is checked only on views whose internal domains changed: the
// views of claims before and after it change p2p domains alone.
func TestCAInternalDomainAdvised(t *testing.T) {
	n := newTestNode(t, t.TempDir())
	base := "http://" + n.AdminAddr()
	mustJSON(t, "POST", base+"/api/add-domain", `{"domain":"before.p2p","hash":"hs://`+strings.Repeat("ab", 32)+`"}`, 200, nil)
	res, err := n.root.System.Root.RequestFuture(n.ledger, &messages.SetInternalDomains{Owner: "plugins", Domains: map[string]netip.Addr{"tools.lan": netip.MustParseAddr("127.0.0.1")}}, 5*time.Second).Result()
	if err != nil {
		t.Fatal(err)
	}
	if r := res.(*messages.SetInternalDomainsReply); len(r.Refused) > 0 {
		t.Fatalf("internal domain refused: %v", r.Refused)
	}
	mustJSON(t, "POST", base+"/api/add-domain", `{"domain":"after.p2p","hash":"hs://`+strings.Repeat("ab", 32)+`"}`, 200, nil)
	if st := caStatusOn(t, n); !st.RegenerateAdvised || !slices.Contains(st.Missing.DNS, "tools.lan") {
		t.Fatalf("ca-status after a new internal domain: %+v", st)
	}
	awaitAdvice(t, base, "tools.lan")
}
