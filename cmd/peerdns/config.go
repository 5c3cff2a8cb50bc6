package main

import (
	"flag"
	"fmt"
	"io"
	"strconv"
	"strings"

	"peerdns/actors/settings"
	"peerdns/cmd/peerdns/node"
	nodedns "peerdns/dns"
)

// parseNodeFlags parses args of `peerdns node` with env fallbacks.
func parseNodeFlags(args []string, getenv func(string) string, stderr io.Writer) (node.Config, error) {
	var c node.Config
	fs := flag.NewFlagSet("node", flag.ContinueOnError)
	fs.SetOutput(stderr)
	setUsage(fs)
	var bootstrap, upstream, recursion, advertise string
	fs.StringVar(&c.Data, "data", "./peerdns-data", "data directory")
	fs.StringVar(&c.AdminAddr, "admin-addr", "127.0.0.1:7710", "admin HTTP API address")
	fs.StringVar(&c.DNSAddr, "dns-addr", "127.0.0.1:7753", "DNS address (UDP and TCP)")
	fs.StringVar(&c.HTTPAddr, "http-addr", "127.0.0.1:7780", "edge HTTP address")
	fs.StringVar(&c.HTTPSAddr, "https-addr", "127.0.0.1:7743", "edge HTTPS address")
	fs.StringVar(&c.DoTAddr, "dot-addr", "", "DNS-over-TLS address, e.g. 127.0.0.1:853 (default: off)")
	fs.BoolVar(&c.DNSQueryLog, "dns-query-log", false, "log DNS queries (at most 50 lines a second, dns channel) and count them per client")
	fs.StringVar(&c.P2PAddr, "p2p-addr", "0.0.0.0:7740", "peer address: QUIC on UDP, and TCP on the same port")
	fs.StringVar(&bootstrap, "bootstrap", "", "comma-separated peer addresses to dial (host:port, or peer id@host:port)")
	fs.StringVar(&advertise, "advertise-addr", "", "comma-separated public or port-forwarded peer addresses (host:port) to advertise")
	fs.StringVar(&c.Join, "join", "", "invite to join an existing network")
	fs.StringVar(&upstream, "upstream", "", "comma-separated upstream DNS servers (default: /etc/resolv.conf)")
	fs.BoolVar(&c.System, "system", false, "use system ports: DNS :53, edge :80/:443")
	fs.StringVar(&recursion, "dns-recursion-allow", "", "client networks that get DNS recursion, e.g. \"10.0.0.0/8, ::1\"; \"none\" for nobody (default: loopback and private ranges)")

	// Environment first, so explicit flags override it; a bad value
	// counts only if no flag replaces it.
	envErrs := map[string]error{}
	fs.VisitAll(func(f *flag.Flag) {
		if v := getenv("PEERDNS_" + strings.ToUpper(strings.ReplaceAll(f.Name, "-", "_"))); v != "" {
			if err := f.Value.Set(v); err != nil {
				envErrs[f.Name] = fmt.Errorf("PEERDNS_%s: %v", strings.ToUpper(strings.ReplaceAll(f.Name, "-", "_")), err)
			}
		}
	})
	set := map[string]bool{}
	if err := parseFlags(fs, args); err != nil {
		return c, err
	}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	var envErr error
	fs.VisitAll(func(f *flag.Flag) { // in name order: the same one reported every run
		if err := envErrs[f.Name]; err != nil && !set[f.Name] && envErr == nil {
			envErr = err
		}
	})
	if envErr != nil {
		return c, envErr
	}
	c.Sources = settingSources(set, getenv, c.System)
	if err := checkFlagSettings(fs, c.Sources); err != nil {
		return c, err
	}
	if err := applyEnvOnly(&c, getenv); err != nil {
		return c, err
	}
	if c.System {
		if !set["dns-addr"] && getenv("PEERDNS_DNS_ADDR") == "" {
			c.DNSAddr = "0.0.0.0:53"
		}
		if !set["http-addr"] && getenv("PEERDNS_HTTP_ADDR") == "" {
			c.HTTPAddr = "0.0.0.0:80"
		}
		if !set["https-addr"] && getenv("PEERDNS_HTTPS_ADDR") == "" {
			c.HTTPSAddr = "0.0.0.0:443"
		}
	}
	acl, err := nodedns.ParsePrefixes(recursion)
	if err != nil {
		return c, fmt.Errorf("dns-recursion-allow: %w", err)
	}
	c.DNSRecursionAllow = acl
	c.Bootstrap = splitList(bootstrap)
	c.Advertise = splitList(advertise)
	c.Upstream = splitList(upstream)
	c.AdminDomain = envOr(getenv, "ADMIN_DOMAIN", "admin.p2p")
	c.AdminAllowedHosts = splitList(getenv("ADMIN_ALLOWED_HOSTS"))
	c.ProfileDomain = envOr(getenv, "PROFILE_DOMAIN", "profile.p2p")
	c.SubnetBase = getenv("SUBNET_BASE")
	if v := getenv("INITIAL_IP_INDEX"); v != "" {
		i, err := strconv.Atoi(strings.TrimSpace(v))
		if err != nil {
			return c, fmt.Errorf("INITIAL_IP_INDEX %q is not a number", v)
		}
		c.InitialIPIndex = i
	}
	c.LogLevel = envOr(getenv, "LOG_LEVEL", "info")
	return c, nil
}

// flagSettings maps flags to the settings (actors/settings) they pin.
var flagSettings = map[string]string{
	"admin-addr": "ADMIN_ADDR", "dns-addr": "DNS_ADDR", "http-addr": "HTTP_ADDR", "https-addr": "HTTPS_ADDR",
	"p2p-addr": "P2P_ADDR", "bootstrap": "BOOTSTRAP_PEERS", "upstream": "UPSTREAM_DNS",
	"advertise-addr":      "ADVERTISE_ADDR",
	"dns-recursion-allow": "DNS_RECURSION_ALLOW", "dot-addr": "DOT_ADDR", "dns-query-log": "DNS_QUERY_LOG",
}

// checkedFlags are the flags whose values are checked here as
// update-settings checks their setting, because nothing at start would
// refuse a bad one: --advertise-addr is only told to peers, so one that
// is not host:port was advertised and put in invites as it was. (The
// listen addresses, upstreams and recursion networks fail the start when
// bad; a bad bootstrap address is logged and skipped.)
var checkedFlags = []string{"advertise-addr"}

// checkFlagSettings checks checkedFlags' values (sources: where each
// setting came from); the error names the flag, or the variable the
// value came from.
func checkFlagSettings(fs *flag.FlagSet, sources map[string]string) error {
	for _, f := range checkedFlags {
		name := flagSettings[f]
		d, ok := settings.Lookup(name)
		if !ok || sources[name] == "" {
			continue
		}
		v := fs.Lookup(f).Value.String()
		err := d.Validate(v)
		switch {
		case err == nil:
		case sources[name] == "flag":
			return fmt.Errorf("--%s: %v", f, err)
		default:
			return fmt.Errorf("PEERDNS_%s: %v", strings.ToUpper(strings.ReplaceAll(f, "-", "_")), err)
		}
	}
	return nil
}

// envSettings are the settings read from the environment only.
var envSettings = []string{"LOG_LEVEL", "ADMIN_DOMAIN", "PROFILE_DOMAIN", "ADMIN_ALLOWED_HOSTS", "SUBNET_BASE", "INITIAL_IP_INDEX"}

// settingSources says which settings the command line (set: the flags
// given) or the environment gave: those win over saved settings.
// --system, when on (system), pins the addresses it moves, with the
// source that turned it on.
func settingSources(set map[string]bool, getenv func(string) string, system bool) map[string]string {
	src := map[string]string{}
	for f, name := range flagSettings {
		switch {
		case set[f]:
			src[name] = "flag"
		case getenv("PEERDNS_"+strings.ToUpper(strings.ReplaceAll(f, "-", "_"))) != "":
			src[name] = "env"
		}
	}
	if system {
		from := "env"
		if set["system"] {
			from = "flag"
		}
		for _, name := range []string{"DNS_ADDR", "HTTP_ADDR", "HTTPS_ADDR"} {
			if src[name] == "" {
				src[name] = from
			}
		}
	}
	for _, name := range envSettings {
		if getenv(name) != "" {
			src[name] = "env"
		}
	}
	return src
}

func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

func envOr(getenv func(string) string, k, def string) string {
	if v := getenv(k); v != "" {
		return v
	}
	return def
}
