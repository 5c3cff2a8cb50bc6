package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"peerdns/internal/sysdns"
)

// runSysDNS is `peerdns install-dns` (install) and `peerdns
// uninstall-dns`: it writes (or removes) the OS resolver configuration
// itself, so `sudo peerdns install-dns` works while the node runs as an
// ordinary user. The names to route come from the running node's GET
// /api/resolved-domains when it answers (else only .p2p), plus
// --suffixes.
func runSysDNS(install bool, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	name := "uninstall-dns"
	if install {
		name = "install-dns"
	}
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	setUsage(fs)
	dnsAddr := fs.String("dns-addr", envOr(getenv, "PEERDNS_DNS_ADDR", "127.0.0.1:7753"), "the node's DNS address (ip:port)")
	adminAddr := fs.String("admin-addr", envOr(getenv, "PEERDNS_ADMIN_ADDR", "127.0.0.1:7710"), "admin API of the running node, asked for its domains")
	extra := fs.String("suffixes", "", "further comma-separated suffixes to send to the node (\"p2p\" always is)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	o := sysdns.Options{Addr: *dnsAddr, Getenv: getenv}
	var res sysdns.Result
	var err error
	if install {
		names, nerr := nodeNames(*adminAddr)
		if nerr != nil {
			fmt.Fprintf(stderr, "note: %v; routing .p2p and --suffixes only\n", nerr)
		}
		o.Suffixes = append(sysdns.Routed(names), splitList(*extra)...)
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
