package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"time"

	"peerdns/internal/sysdns"
)

// runSysDNS is `peerdns install-dns` (install) and `peerdns
// uninstall-dns`: it writes (or removes) the OS resolver configuration
// itself, so `sudo peerdns install-dns` works while the node runs as an
// ordinary user.
//
// It routes .p2p, the names given with --suffixes, and ADMIN_DOMAIN and
// PROFILE_DOMAIN when set (as the node reads them), and nothing it is
// only told: whatever answers on the admin port is not known to be the
// node (while the node is down, any local user can listen on 7710, and
// on the DNS port), and this runs as root, so a name routed on its word
// (com, bank.example) would send the machine's lookups of it to that
// user. The node's other names (GET /api/resolved-domains: a claimed
// nas.lan) are listed in a note with the --suffixes that routes them.
// POST /api/install-dns, in the node itself, routes them all.
//
// The DNS address is --dns-addr, else PEERDNS_DNS_ADDR, else 127.0.0.1:53
// with --system (or PEERDNS_SYSTEM), where a node started so listens,
// else 127.0.0.1:7753.
func runSysDNS(install bool, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	name := "uninstall-dns"
	if install {
		name = "install-dns"
	}
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	setUsage(fs)
	dnsAddr := fs.String("dns-addr", envOr(getenv, "PEERDNS_DNS_ADDR", "127.0.0.1:7753"), "the node's DNS address (ip:port; default 127.0.0.1:53 with --system)")
	system := fs.Bool("system", false, "the node runs with --system: its DNS listens on port 53")
	adminAddr := fs.String("admin-addr", envOr(getenv, "PEERDNS_ADMIN_ADDR", "127.0.0.1:7710"), "admin API of the running node, asked for its other domains (listed, not routed)")
	extra := fs.String("suffixes", "", "further comma-separated suffixes to send to the node (\"p2p\" always is)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if v := getenv("PEERDNS_SYSTEM"); v != "" && !set["system"] {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return fmt.Errorf("PEERDNS_SYSTEM: %q is not a boolean", v)
		}
		*system = b
	}
	if *system && !set["dns-addr"] && getenv("PEERDNS_DNS_ADDR") == "" {
		*dnsAddr = "127.0.0.1:53"
	}
	o := sysdns.Options{Addr: *dnsAddr, Getenv: getenv}
	var res sysdns.Result
	var err error
	if install {
		var configured []string // as the node reads them; under .p2p, routed anyway
		for _, k := range []string{"ADMIN_DOMAIN", "PROFILE_DOMAIN"} {
			if v := strings.TrimSpace(getenv(k)); v != "" {
				configured = append(configured, v)
			}
		}
		given := append(splitList(*extra), sysdns.Routed(configured)[1:]...)
		o.Suffixes = given
		names, nerr := nodeNames(*adminAddr)
		if nerr != nil {
			fmt.Fprintf(stderr, "note: %v\n", nerr)
		} else if left := notGiven(sysdns.Routed(names), given); len(left) > 0 {
			fmt.Fprintf(stderr, "note: the node at %s also answers %s, not routed: a name outside .p2p is routed only when named here (--suffixes %s)\n",
				*adminAddr, strings.Join(left, ", "), strings.Join(left, ","))
		}
		res, err = sysdns.Install(o)
	} else {
		res, err = sysdns.Uninstall(o)
	}
	var nr *sysdns.NeedsRootError
	if errors.As(err, &nr) {
		return fmt.Errorf("%s needs root: run `sudo peerdns %s`, or these commands:\n  %s", nr.Action, strings.Join(append([]string{name}, args...), " "), strings.Join(nr.Commands, "\n  "))
	}
	if err != nil {
		return err
	}
	for _, p := range res.Written {
		fmt.Fprintf(stdout, "wrote %s\n", p)
	}
	for _, p := range res.Removed {
		fmt.Fprintf(stdout, "removed %s\n", p)
	}
	for _, c := range res.Commands {
		fmt.Fprintf(stdout, "ran %s\n", strings.Join(c, " "))
	}
	for _, n := range res.Notes {
		fmt.Fprintf(stdout, "note: %s\n", n)
	}
	if install {
		fmt.Fprintf(stdout, "%s (%s): %s go to %s\n", res.Layout, res.Dir, strings.Join(res.Suffixes, ", "), res.Server)
	}
	return nil
}

// notGiven are the suffixes of routed, as sysdns.Routed gives them, that
// given does not name, leaving out .p2p (always routed) and what is not
// a domain name (printed to the operator's terminal).
func notGiven(routed, given []string) []string {
	have := map[string]bool{"p2p": true}
	for _, g := range given {
		have[strings.Trim(strings.ToLower(strings.TrimSpace(g)), ".")] = true
	}
	var out []string
	for _, r := range routed {
		if !have[r] && domainLike(r) {
			have[r] = true
			out = append(out, r)
		}
	}
	sort.Strings(out)
	return out
}

// domainLike reports whether s is made of letters, digits, '-', '_' and
// '.' only (ASCII).
func domainLike(s string) bool {
	for _, c := range []byte(s) {
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.') {
			return false
		}
	}
	return s != ""
}

// nodeNames asks the running node for the domains it answers.
func nodeNames(adminAddr string) ([]string, error) {
	c := &http.Client{Timeout: 3 * time.Second}
	resp, err := c.Get("http://" + adminAddr + "/api/resolved-domains")
	if err != nil {
		return nil, fmt.Errorf("node not reachable at %s", adminAddr)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("node at %s answered %d", adminAddr, resp.StatusCode)
	}
	var list []struct {
		Domain string `json:"domain"`
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, 16<<20)).Decode(&list); err != nil {
		return nil, fmt.Errorf("node at %s: %v", adminAddr, err)
	}
	out := make([]string, 0, len(list))
	for _, d := range list {
		out = append(out, d.Domain)
	}
	return out, nil
}
