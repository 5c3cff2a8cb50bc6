// Package sysdns points the operating system's resolver at the node for
// the node's suffixes only (split DNS), and takes that back: the
// `peerdns install-dns` / `uninstall-dns` sub-commands and the admin
// endpoints POST /api/install-dns and /api/uninstall-dns.
//
// Two layouts:
//
//   - systemd-resolved (Linux): one drop-in,
//     /etc/systemd/resolved.conf.d/peerdns.conf, with
//     `DNS=127.0.0.1:<port>` and `Domains=~p2p ~<suffix> ...` (routing-only
//     domains: only those names go to the node), then
//     `systemctl reload-or-restart systemd-resolved`. The `ip:port` form of
//     DNS= needs systemd-resolved 246 or later; on port 53 the plain
//     address is written and any version works.
//   - macOS: one file per suffix in /etc/resolver (resolver(5)), with
//     `nameserver` and `port` lines; mDNSResponder reads them on change.
//
// Every file written starts with Header. Install and Uninstall never
// write over, or remove, a file without it: a file of the operator's
// own is reported, not touched. In the systemd-resolved layout the
// drop-in is the only file they touch, even if another carries Header.
//
// An empty file at a name they write (the drop-in; in the macOS layout
// a routed suffix's file) is taken as theirs: it is what a power loss
// can leave of a file just written whose data had not reached the disk
// (the rename had), and it holds nobody's configuration. Install writes
// over it and Uninstall removes it, rather than leaving the operator to
// delete it by hand. Install syncs each file before renaming it into
// place, and the folder after, so its own files are not left so.
//
// The folders can be moved with PEERDNS_RESOLVED_DIR (systemd-resolved
// layout) and PEERDNS_RESOLVER_DIR (macOS layout), for tests and for
// hosts managed by hand; with either set, no reload command runs and no
// root is needed.
//
// This package must never touch a resolver file it did not create, and
// never edit /etc/resolv.conf.
package sysdns

import (
	"errors"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"regexp"
	"runtime"
	"sort"
	"strconv"
	"strings"
)

// Header is the first line of every file this package writes; a file
// without it is not ours.
const Header = "# Written by peerdns install-dns; `peerdns uninstall-dns` removes it. Do not edit."

// Layout names.
const (
	LayoutResolved = "systemd-resolved"
	LayoutMacOS    = "macos-resolver"
)

// Default folders.
const (
	DefaultResolvedDir = "/etc/systemd/resolved.conf.d"
	DefaultResolverDir = "/etc/resolver"
	dropIn             = "peerdns.conf"
)

// MinResolvedPortVersion is the first systemd-resolved that reads
// `DNS=ip:port` (systemd v246 NEWS).
const MinResolvedPortVersion = 246

// Options say what to install where. Zero values take the defaults.
type Options struct {
	// Addr is the node's DNS address (host:port). An unspecified host
	// (0.0.0.0, ::) becomes the loopback address of its family.
	Addr string
	// Suffixes are the domain suffixes to send to the node ("p2p", ...);
	// "p2p" is always added.
	Suffixes []string
	// Getenv reads PEERDNS_RESOLVED_DIR and PEERDNS_RESOLVER_DIR;
	// default os.Getenv.
	Getenv func(string) string
	// GOOS picks the layout when no folder is overridden; default
	// runtime.GOOS.
	GOOS string
	// Run runs a command (the reload, the version check); default
	// exec.Command(...).CombinedOutput.
	Run func(argv []string) ([]byte, error)
	// LookPath finds a program; default exec.LookPath.
	LookPath func(string) (string, error)
	// Root reports whether we may write the system folders; default
	// os.Geteuid() == 0.
	Root func() bool
}

// Result says what was done, for the CLI and the admin endpoint.
type Result struct {
	Layout   string     `json:"layout"`
	Dir      string     `json:"dir"`
	Server   string     `json:"server"`             // what the OS resolver now asks, ip:port
	Suffixes []string   `json:"suffixes"`           // routed to the node
	Written  []string   `json:"written,omitempty"`  // files created or rewritten
	Removed  []string   `json:"removed,omitempty"`  // files removed
	Kept     []string   `json:"kept,omitempty"`     // files left alone: not ours
	Commands [][]string `json:"commands,omitempty"` // commands run, as argument lists
	Notes    []string   `json:"notes,omitempty"`
}

// NeedsRootError is returned when the folders are the system's and we
// are not root; Commands are the exact shell lines to run instead.
type NeedsRootError struct {
	Action   string // "install-dns" or "uninstall-dns"
	Commands []string
}

func (e *NeedsRootError) Error() string {
	return fmt.Sprintf("%s needs root: run\n  %s", e.Action, strings.Join(e.Commands, "\n  "))
}

// ErrNotOurs is wrapped by errors about a file this package did not write.
var ErrNotOurs = errors.New("not written by peerdns")

func (o *Options) defaults() {
	if o.Getenv == nil {
		o.Getenv = os.Getenv
	}
	if o.GOOS == "" {
		o.GOOS = runtime.GOOS
	}
	if o.Run == nil {
		o.Run = func(argv []string) ([]byte, error) { return exec.Command(argv[0], argv[1:]...).CombinedOutput() }
	}
	if o.LookPath == nil {
		o.LookPath = exec.LookPath
	}
	if o.Root == nil {
		o.Root = func() bool { return os.Geteuid() == 0 }
	}
}

// plan is where and how: the layout, its folder, and whether it is a
// folder the caller chose (then no reload runs and no root is needed).
type plan struct {
	layout, dir string
	override    bool
}

func (o *Options) plan() (plan, error) {
	if d := o.Getenv("PEERDNS_RESOLVED_DIR"); d != "" {
		return plan{LayoutResolved, d, true}, nil
	}
	if d := o.Getenv("PEERDNS_RESOLVER_DIR"); d != "" {
		return plan{LayoutMacOS, d, true}, nil
	}
	switch o.GOOS {
	case "darwin":
		return plan{LayoutMacOS, DefaultResolverDir, false}, nil
	case "linux":
		if _, err := os.Stat("/run/systemd/resolve"); err == nil {
			return plan{LayoutResolved, DefaultResolvedDir, false}, nil
		}
		if _, err := o.LookPath("resolvectl"); err == nil {
			return plan{LayoutResolved, DefaultResolvedDir, false}, nil
		}
		return plan{}, errors.New("systemd-resolved is not running here: point your resolver (dnsmasq, unbound, ...) at the node for the .p2p suffix by hand; see README.md, \"Resolving .p2p names\"")
	}
	return plan{}, fmt.Errorf("install-dns is not supported on %s: point your resolver at the node for the .p2p suffix by hand", o.GOOS)
}

// server is the address the OS resolver should ask.
func server(addr string) (netip.AddrPort, error) {
	ap, err := netip.ParseAddrPort(addr)
	if err != nil {
		return ap, fmt.Errorf("dns address %q: want ip:port", addr)
	}
	ip := ap.Addr().Unmap()
	if ip.IsUnspecified() {
		ip = netip.AddrFrom4([4]byte{127, 0, 0, 1})
		if ap.Addr().Is6() && !ap.Addr().Is4In6() {
			ip = netip.IPv6Loopback()
		}
	}
	return netip.AddrPortFrom(ip, ap.Port()), nil
}

var labelRE = regexp.MustCompile(`^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$`)

// suffixes cleans the list: lowercased, no dots at the ends, valid
// names only, "p2p" included, sorted, no repeats.
func suffixes(in []string) ([]string, error) {
	set := map[string]bool{"p2p": true}
	for _, s := range in {
		s = strings.Trim(strings.ToLower(strings.TrimSpace(s)), ".")
		if s == "" {
			continue
		}
		for _, l := range strings.Split(s, ".") {
			if !labelRE.MatchString(l) {
				return nil, fmt.Errorf("suffix %q is not a domain name", s)
			}
		}
		set[s] = true
	}
	out := make([]string, 0, len(set))
	for s := range set {
		out = append(out, s)
	}
	sort.Strings(out)
	return out, nil
}

// ours reports whether path exists and is ours: it starts with Header,
// or, at a name this package writes (byName), it is empty.
func ours(path string, byName bool) (exists, mine bool, err error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return false, false, nil
	}
	if err != nil {
		return false, false, err
	}
	return true, byName && len(b) == 0 || strings.HasPrefix(string(b), Header+"\n"), nil
}

// resolvedVersion is systemd-resolved's version from `resolvectl
// --version` or `systemctl --version` ("systemd 252 (252.22-1)"); 0 when
// neither tells.
func (o *Options) resolvedVersion() (int, string) {
	for _, tool := range []string{"resolvectl", "systemctl"} {
		if _, err := o.LookPath(tool); err != nil {
			continue
		}
		out, err := o.Run([]string{tool, "--version"})
		if err != nil {
			continue
		}
		if v := parseSystemdVersion(string(out)); v > 0 {
			return v, tool
		}
	}
	return 0, ""
}

var systemdVersionRE = regexp.MustCompile(`(?m)^systemd (\d+)`)

func parseSystemdVersion(s string) int {
	m := systemdVersionRE.FindStringSubmatch(s)
	if m == nil {
		return 0
	}
	v, _ := strconv.Atoi(m[1])
	return v
}

// content is what each file holds: the drop-in for systemd-resolved, one
// file per suffix for macOS.
func content(layout string, srv netip.AddrPort, sfx []string) map[string]string {
	files := map[string]string{}
	switch layout {
	case LayoutResolved:
		dnsLine := srv.Addr().String()
		if srv.Port() != 53 {
			dnsLine = srv.String() // needs resolved ≥ 246
		}
		routed := make([]string, len(sfx))
		for i, s := range sfx {
			routed[i] = "~" + s // routing-only domain: these names, nothing else
		}
		files[dropIn] = fmt.Sprintf("%s\n[Resolve]\nDNS=%s\nDomains=%s\n", Header, dnsLine, strings.Join(routed, " "))
	case LayoutMacOS:
		for _, s := range sfx {
			files[s] = fmt.Sprintf("%s\nnameserver %s\nport %d\n", Header, srv.Addr(), srv.Port())
		}
	}
	return files
}

var reloadResolved = []string{"systemctl", "reload-or-restart", "systemd-resolved"}

// shellQuote quotes s for a POSIX shell.
func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// Routed is what to route to the node for these names (claimed p2p
// domains and internal domains): "p2p" for everything under .p2p, and
// each other name itself, so the OS sends the node those names and
// nothing else of their parent (a claimed "nas.lan" routes nas.lan, not
// all of .lan).
func Routed(names []string) []string {
	out := []string{"p2p"}
	for _, n := range names {
		n = strings.Trim(strings.ToLower(n), ".")
		if n == "" || n == "p2p" || strings.HasSuffix(n, ".p2p") {
			continue
		}
		out = append(out, n)
	}
	return out
}
