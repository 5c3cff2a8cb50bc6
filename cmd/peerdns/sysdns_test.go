package main

import (
	"net"
	"net/http"
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

// install-dns runs as root and what answers on the admin port may be
// anyone's (the node down, a user listening on 7710): a name it gives
// outside .p2p is listed, not routed, unless --suffixes names it.
func TestInstallDNSRoutesOnlyNamesGiven(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Server", "peerdns")
		w.Write([]byte(`[{"domain":"com"},{"domain":"bank.example"},{"domain":"x.p2p"},{"domain":"nas.lan"},{"domain":"a\u001b[2Jb"}]`))
	})}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })

	dir := filepath.Join(t.TempDir(), "resolver")
	env := map[string]string{"PEERDNS_RESOLVER_DIR": dir, "PEERDNS_ADMIN_ADDR": ln.Addr().String(),
		"ADMIN_DOMAIN": "admin.p2p", "PROFILE_DOMAIN": "profile.home"}
	getenv := func(k string) string { return env[k] }
	var out, errOut strings.Builder
	if code := run([]string{"install-dns", "--suffixes", "nas.lan"}, getenv, &out, &errOut); code != 0 {
		t.Fatalf("install-dns = %d\n%s%s", code, out.String(), errOut.String())
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var files []string
	for _, e := range ents {
		files = append(files, e.Name())
	}
	if strings.Join(files, " ") != "nas.lan p2p profile.home" {
		t.Errorf("routed %v, want nas.lan, p2p and profile.home only\n%s", files, out.String())
	}
	if !strings.Contains(errOut.String(), "also answers bank.example, com, not routed") {
		t.Errorf("stderr does not list the names not routed: %q", errOut.String())
	}
	if strings.Contains(errOut.String(), "\x1b") {
		t.Errorf("stderr carries the answer's escape: %q", errOut.String())
	}
}

// A node started with --system answers DNS on port 53: install-dns
// --system (or PEERDNS_SYSTEM) points there unless --dns-addr says.
func TestInstallDNSSystemPort(t *testing.T) {
	for _, c := range []struct {
		args []string
		env  map[string]string
		port string
	}{
		{[]string{"--system"}, nil, "53"},
		{nil, map[string]string{"PEERDNS_SYSTEM": "true"}, "53"},
		{[]string{"--system", "--dns-addr", "127.0.0.1:5353"}, nil, "5353"},
		{[]string{"--system"}, map[string]string{"PEERDNS_DNS_ADDR": "127.0.0.1:5354"}, "5354"},
		{nil, nil, "7753"},
	} {
		dir := filepath.Join(t.TempDir(), "resolver")
		env := map[string]string{"PEERDNS_RESOLVER_DIR": dir, "PEERDNS_ADMIN_ADDR": "127.0.0.1:1"}
		for k, v := range c.env {
			env[k] = v
		}
		var out, errOut strings.Builder
		if code := run(append([]string{"install-dns"}, c.args...), func(k string) string { return env[k] }, &out, &errOut); code != 0 {
			t.Fatalf("%v %v: install-dns = %d\n%s", c.args, c.env, code, errOut.String())
		}
		b, err := os.ReadFile(filepath.Join(dir, "p2p"))
		if err != nil || !strings.Contains(string(b), "port "+c.port+"\n") {
			t.Errorf("%v %v: %q, %v; want port %s", c.args, c.env, b, err, c.port)
		}
	}
}
