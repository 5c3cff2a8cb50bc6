package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// `peerdns install-dns` and `uninstall-dns` write and remove the macOS
// resolver files in PEERDNS_RESOLVER_DIR; without a reachable node they
// route .p2p and --suffixes.
func TestInstallDNSCommand(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "resolver")
	env := map[string]string{"PEERDNS_RESOLVER_DIR": dir, "PEERDNS_ADMIN_ADDR": "127.0.0.1:1"}
	getenv := func(k string) string { return env[k] }
	var out, errOut strings.Builder
	if code := run([]string{"install-dns", "--dns-addr", "127.0.0.1:7753", "--suffixes", "home.arpa"}, getenv, &out, &errOut); code != 0 {
		t.Fatalf("install-dns = %d\n%s%s", code, out.String(), errOut.String())
	}
	for _, s := range []string{"p2p", "home.arpa"} {
		b, err := os.ReadFile(filepath.Join(dir, s))
		if err != nil || !strings.Contains(string(b), "port 7753\n") {
			t.Fatalf("%s: %q, %v", s, b, err)
		}
	}
	if !strings.Contains(errOut.String(), "not reachable") {
		t.Errorf("stderr does not say the node was not reached: %q", errOut.String())
	}
	out.Reset()
	if code := run([]string{"uninstall-dns"}, getenv, &out, &errOut); code != 0 {
		t.Fatalf("uninstall-dns = %d\n%s", code, errOut.String())
	}
	if strings.Count(out.String(), "removed ") != 2 {
		t.Fatalf("uninstall output: %q", out.String())
	}
}
