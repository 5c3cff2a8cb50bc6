package sysdns

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func env(kv ...string) func(string) string {
	return func(k string) string {
		for i := 0; i+1 < len(kv); i += 2 {
			if kv[i] == k {
				return kv[i+1]
			}
		}
		return ""
	}
}

func noTools(string) (string, error) { return "", errors.New("not found") }

func read(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestInstallResolved(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "resolved.conf.d")
	o := Options{Addr: "0.0.0.0:7753", Suffixes: []string{"lan", "P2P.", "home.arpa"}, Getenv: env("PEERDNS_RESOLVED_DIR", dir), LookPath: noTools}
	res, err := Install(o)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "peerdns.conf")
	want := Header + "\n[Resolve]\nDNS=127.0.0.1:7753\nDomains=~home.arpa ~lan ~p2p\n"
	if got := read(t, path); got != want {
		t.Fatalf("drop-in =\n%s\nwant\n%s", got, want)
	}
	if res.Layout != LayoutResolved || len(res.Written) != 1 || res.Written[0] != path || res.Server != "127.0.0.1:7753" {
		t.Fatalf("result = %+v", res)
	}
	if len(res.Commands) != 0 {
		t.Fatalf("an overridden folder must not reload anything: %v", res.Commands)
	}
	// Port 53: the plain address, which every resolved version reads.
	o.Addr = "127.0.0.1:53"
	if _, err := Install(o); err != nil {
		t.Fatal(err)
	}
	if got := read(t, path); !strings.Contains(got, "\nDNS=127.0.0.1\n") {
		t.Fatalf("port 53 drop-in = %s", got)
	}
	res, err = Uninstall(o)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) || len(res.Removed) != 1 {
		t.Fatalf("after uninstall: stat err %v, removed %v", err, res.Removed)
	}
	// Nothing left: uninstall again says so.
	if res, err = Uninstall(o); err != nil || len(res.Removed) != 0 || len(res.Notes) == 0 {
		t.Fatalf("second uninstall = %+v, %v", res, err)
	}
}

func TestNeverTouchesOthersFiles(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "peerdns.conf")
	mine := "[Resolve]\nDNS=10.0.0.1\n"
	if err := os.WriteFile(path, []byte(mine), 0o644); err != nil {
		t.Fatal(err)
	}
	o := Options{Addr: "127.0.0.1:7753", Getenv: env("PEERDNS_RESOLVED_DIR", dir), LookPath: noTools}
	if _, err := Install(o); !errors.Is(err, ErrNotOurs) {
		t.Fatalf("Install over a foreign drop-in: err = %v, want ErrNotOurs", err)
	}
	res, err := Uninstall(o)
	if err != nil || len(res.Kept) != 1 {
		t.Fatalf("Uninstall = %+v, %v; want the file kept", res, err)
	}
	if got := read(t, path); got != mine {
		t.Fatalf("foreign drop-in changed to %q", got)
	}

	// macOS: a foreign file for one suffix is kept, the others written.
	rdir := t.TempDir()
	foreign := filepath.Join(rdir, "lan")
	if err := os.WriteFile(foreign, []byte("nameserver 192.168.1.1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	o = Options{Addr: "127.0.0.1:7753", Suffixes: []string{"lan"}, Getenv: env("PEERDNS_RESOLVER_DIR", rdir)}
	res, err = Install(o)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Kept) != 1 || res.Kept[0] != foreign || len(res.Written) != 1 {
		t.Fatalf("Install = %+v", res)
	}
	if _, err := Uninstall(o); err != nil {
		t.Fatal(err)
	}
	if got := read(t, foreign); got != "nameserver 192.168.1.1\n" {
		t.Fatalf("foreign resolver file changed to %q", got)
	}
	if _, err := os.Stat(filepath.Join(rdir, "p2p")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("p2p file not removed: %v", err)
	}
}

// In the systemd-resolved layout the drop-in is the one file Install
// writes: another file of the folder is left alone even when it carries
// our header (a copy the operator made), as Uninstall leaves it.
func TestInstallResolvedLeavesOtherDropIns(t *testing.T) {
	dir := t.TempDir()
	other := filepath.Join(dir, "50-lan.conf")
	copied := Header + "\n[Resolve]\nDNS=192.168.1.1\nDomains=~lan\n"
	if err := os.WriteFile(other, []byte(copied), 0o644); err != nil {
		t.Fatal(err)
	}
	o := Options{Addr: "127.0.0.1:7753", Getenv: env("PEERDNS_RESOLVED_DIR", dir), LookPath: noTools}
	res, err := Install(o)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Removed) != 0 {
		t.Fatalf("Install removed %v", res.Removed)
	}
	if got := read(t, other); got != copied {
		t.Fatalf("%s changed to %q", other, got)
	}
	if res, err = Uninstall(o); err != nil || len(res.Removed) != 1 || filepath.Base(res.Removed[0]) != "peerdns.conf" {
		t.Fatalf("Uninstall = %+v, %v", res, err)
	}
	if got := read(t, other); got != copied {
		t.Fatalf("%s changed to %q by Uninstall", other, got)
	}
}

func TestInstallMacOS(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "resolver")
	o := Options{Addr: "127.0.0.1:7753", Suffixes: []string{"lan", "dev.lan"}, Getenv: env("PEERDNS_RESOLVER_DIR", dir)}
	res, err := Install(o)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"p2p", "lan", "dev.lan"} {
		want := Header + "\nnameserver 127.0.0.1\nport 7753\n"
		if got := read(t, filepath.Join(dir, s)); got != want {
			t.Errorf("%s = %q, want %q", s, got, want)
		}
	}
	if res.Layout != LayoutMacOS || len(res.Written) != 3 {
		t.Fatalf("result = %+v", res)
	}
	// A suffix no longer claimed loses its file on the next install.
	o.Suffixes = []string{"lan"}
	if res, err = Install(o); err != nil {
		t.Fatal(err)
	}
	if len(res.Removed) != 1 || filepath.Base(res.Removed[0]) != "dev.lan" {
		t.Fatalf("reinstall removed %v, want dev.lan", res.Removed)
	}
	if res, err = Uninstall(o); err != nil || len(res.Removed) != 2 {
		t.Fatalf("Uninstall = %+v, %v", res, err)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 0 {
		t.Fatalf("left in %s: %v", dir, ents)
	}
}

func TestNeedsRoot(t *testing.T) {
	o := Options{Addr: "127.0.0.1:7753", Getenv: env(), GOOS: "darwin", Root: func() bool { return false }}
	_, err := Install(o)
	var nr *NeedsRootError
	if !errors.As(err, &nr) {
		t.Fatalf("Install as non-root: err = %v, want NeedsRootError", err)
	}
	want := "printf '%s\\n' '" + Header + "' 'nameserver 127.0.0.1' 'port 7753' | sudo tee '/etc/resolver/p2p' >/dev/null"
	if len(nr.Commands) != 2 || nr.Commands[1] != want {
		t.Fatalf("commands = %q\nwant [mkdir, %q]", nr.Commands, want)
	}
	if _, err := os.Stat("/etc/resolver/p2p"); err == nil && os.Geteuid() != 0 {
		t.Log("a real /etc/resolver/p2p exists on this machine; not ours to check")
	}
}

func TestOldResolvedRefusesPort(t *testing.T) {
	o := Options{Addr: "127.0.0.1:7753", Getenv: env(), GOOS: "linux", Root: func() bool { return true },
		LookPath: func(s string) (string, error) { return "/usr/bin/" + s, nil },
		Run: func(argv []string) ([]byte, error) {
			if argv[1] != "--version" {
				t.Fatalf("ran %v", argv)
			}
			return []byte("systemd 245 (245.4-4ubuntu3)\n+PAM +AUDIT\n"), nil
		}}
	if _, err := Install(o); err == nil || !strings.Contains(err.Error(), "needs 246") {
		t.Fatalf("Install with resolved 245 on port 7753: err = %v", err)
	}
}

func TestParseSystemdVersion(t *testing.T) {
	for _, tt := range []struct {
		in   string
		want int
	}{
		{"systemd 252 (252.22-1~deb12u1)\n+PAM", 252},
		{"systemd 245 (245.4-4ubuntu3)", 245},
		{"resolvectl: unknown option", 0},
		{"", 0},
	} {
		if got := parseSystemdVersion(tt.in); got != tt.want {
			t.Errorf("parseSystemdVersion(%q) = %d, want %d", tt.in, got, tt.want)
		}
	}
}

func TestBadInput(t *testing.T) {
	dir := t.TempDir()
	for _, tt := range []struct {
		name string
		o    Options
	}{
		{"host name", Options{Addr: "localhost:53"}},
		{"bad suffix", Options{Addr: "127.0.0.1:53", Suffixes: []string{"a b"}}},
		{"bad label", Options{Addr: "127.0.0.1:53", Suffixes: []string{"-x.lan"}}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			tt.o.Getenv = env("PEERDNS_RESOLVER_DIR", dir)
			if _, err := Install(tt.o); err == nil {
				t.Fatal("no error")
			}
		})
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 0 {
		t.Fatalf("bad input wrote %v", ents)
	}
}

// An empty file at a name Install writes is what a power loss leaves of
// a file just written whose data had not reached the disk. It is taken
// as ours: Install writes it whole and Uninstall removes it. Install
// refused it ("not ours") and Uninstall left it, so the operator had to
// find it and delete it by hand. An empty file at another name is still
// not ours.
func TestEmptyFileAtOurNameIsOurs(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "peerdns.conf")
	o := Options{Addr: "127.0.0.1:7753", Getenv: env("PEERDNS_RESOLVED_DIR", dir), LookPath: noTools}
	for _, step := range []string{"install", "uninstall"} {
		if err := os.WriteFile(path, nil, 0o644); err != nil {
			t.Fatal(err)
		}
		if step == "install" {
			if _, err := Install(o); err != nil {
				t.Fatalf("Install over an empty drop-in: %v", err)
			}
			if got, want := read(t, path), Header+"\n[Resolve]\nDNS=127.0.0.1:7753\nDomains=~p2p\n"; got != want {
				t.Fatalf("drop-in = %q, want %q", got, want)
			}
			continue
		}
		if res, err := Uninstall(o); err != nil || len(res.Removed) != 1 {
			t.Fatalf("Uninstall of an empty drop-in = %+v, %v", res, err)
		}
		if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("empty drop-in left: %v", err)
		}
	}

	rdir := t.TempDir()
	o = Options{Addr: "127.0.0.1:7753", Suffixes: []string{"lan"}, Getenv: env("PEERDNS_RESOLVER_DIR", rdir)}
	for _, name := range []string{"p2p", "other"} {
		if err := os.WriteFile(filepath.Join(rdir, name), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	res, err := Install(o)
	if err != nil || len(res.Kept) != 0 || len(res.Written) != 2 {
		t.Fatalf("Install over an empty p2p file = %+v, %v", res, err)
	}
	if got, want := read(t, filepath.Join(rdir, "p2p")), Header+"\nnameserver 127.0.0.1\nport 7753\n"; got != want {
		t.Fatalf("p2p = %q, want %q", got, want)
	}
	if err := os.WriteFile(filepath.Join(rdir, "lan"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if res, err = Uninstall(o); err != nil || len(res.Removed) != 2 {
		t.Fatalf("Uninstall = %+v, %v", res, err)
	}
	ents, _ := os.ReadDir(rdir)
	if len(ents) != 1 || ents[0].Name() != "other" {
		t.Fatalf("left in %s: %v, want only the empty file of another name", rdir, ents)
	}
}
