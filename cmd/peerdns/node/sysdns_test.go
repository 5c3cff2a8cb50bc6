package node

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"peerdns/internal/sysdns"
)

// POST /api/install-dns writes the systemd-resolved drop-in (into
// PEERDNS_RESOLVED_DIR) with the DNS server's real port and the node's
// names, and /api/uninstall-dns removes it; the macOS layout the same
// way with PEERDNS_RESOLVER_DIR.
func TestInstallDNSEndpoints(t *testing.T) {
	dir := t.TempDir()
	n := newTestNode(t, dir)
	base := "http://" + n.AdminAddr()
	addDomain(t, base, "nas.lan", hashA)

	resolved := filepath.Join(dir, "resolved.conf.d")
	t.Setenv("PEERDNS_RESOLVED_DIR", resolved)
	var res sysdns.Result
	mustJSON(t, "POST", base+"/api/install-dns", "", 200, &res)
	b, err := os.ReadFile(filepath.Join(resolved, "peerdns.conf"))
	if err != nil {
		t.Fatal(err)
	}
	want := "DNS=" + n.dns.Addr() + "\n"
	if !strings.Contains(string(b), want) || !strings.Contains(string(b), "~p2p") || !strings.Contains(string(b), "~nas.lan") {
		t.Fatalf("drop-in =\n%s\nwant %q, ~p2p and ~nas.lan", b, want)
	}
	mustJSON(t, "POST", base+"/api/uninstall-dns", "", 200, &res)
	if len(res.Removed) != 1 {
		t.Fatalf("uninstall = %+v", res)
	}
	if _, err := os.Stat(filepath.Join(resolved, "peerdns.conf")); !os.IsNotExist(err) {
		t.Fatalf("drop-in still there: %v", err)
	}

	t.Setenv("PEERDNS_RESOLVED_DIR", "")
	mac := filepath.Join(dir, "resolver")
	t.Setenv("PEERDNS_RESOLVER_DIR", mac)
	mustJSON(t, "POST", base+"/api/install-dns", "", 200, &res)
	for _, s := range []string{"p2p", "nas.lan"} {
		if _, err := os.Stat(filepath.Join(mac, s)); err != nil {
			t.Errorf("resolver file %s: %v", s, err)
		}
	}
	mustJSON(t, "POST", base+"/api/uninstall-dns", "", 200, &res)
	if ents, _ := os.ReadDir(mac); len(ents) != 0 {
		t.Fatalf("left in %s: %v", mac, ents)
	}
}
