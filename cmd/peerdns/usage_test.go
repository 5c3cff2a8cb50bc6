package main

import (
	"net"
	"strings"
	"testing"
)

func noEnv(string) string { return "" }

func TestHelpVersionAndUsageErrors(t *testing.T) {
	for _, tt := range []struct {
		name     string
		args     []string
		code     int
		stdout   string // must contain
		stderr   string // must contain
		errCount int    // times stderr must contain errOnce
		errOnce  string
	}{
		{name: "help", args: []string{"--help"}, code: 0, stdout: "commands:"},
		{name: "h", args: []string{"-h"}, code: 0, stdout: "peerdns agent"},
		{name: "help command", args: []string{"help"}, code: 0, stdout: "peerdns invite"},
		{name: "version flag", args: []string{"--version"}, code: 0, stdout: "peerdns 0."},
		{name: "node help lists commands and flags", args: []string{"node", "--help"}, code: 0, stderr: "-admin-addr", errCount: 1, errOnce: "commands:"},
		{name: "unknown flag reported once", args: []string{"node", "--nope"}, code: 2, errCount: 1, errOnce: "flag provided but not defined: -nope"},
		{name: "stray argument", args: []string{"node", "extra"}, code: 2, errCount: 1, errOnce: "unexpected arguments"},
		{name: "version takes no arguments", args: []string{"version", "extra"}, code: 2, errCount: 1, errOnce: "unexpected arguments: [extra]"},
		{name: "invite ttl under a second", args: []string{"invite", "--admin-addr", "127.0.0.1:1", "--ttl", "500ms"}, code: 2, errCount: 1, errOnce: "--ttl"},
		{name: "invite ttl of zero", args: []string{"invite", "--admin-addr", "127.0.0.1:1", "--ttl", "0s"}, code: 2, errCount: 1, errOnce: "--ttl"},
		{name: "invite ttl of a fraction of a second", args: []string{"invite", "--admin-addr", "127.0.0.1:1", "--ttl", "1500ms"}, code: 2, errCount: 1, errOnce: "--ttl"},
		{name: "invite ttl over 30 days", args: []string{"invite", "--admin-addr", "127.0.0.1:1", "--ttl", "721h"}, code: 2, errCount: 1, errOnce: "--ttl"},
		{name: "node commands go to package cli", args: []string{"status", "--admin-addr", "127.0.0.1:1"}, code: 1, errCount: 1, errOnce: "peerdns status: cannot reach a node at 127.0.0.1:1"},
		{name: "unknown command", args: []string{"bogus"}, code: 2, errCount: 1, errOnce: `unknown command "bogus"`},
		{name: "bad recursion ACL", args: []string{"node", "--dns-recursion-allow", "not-a-net"}, code: 1, errCount: 1, errOnce: "dns-recursion-allow"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var out, errOut strings.Builder
			code := run(tt.args, noEnv, &out, &errOut)
			if code != tt.code {
				t.Fatalf("run(%q) = %d, want %d\nstdout: %s\nstderr: %s", tt.args, code, tt.code, out.String(), errOut.String())
			}
			if !strings.Contains(out.String(), tt.stdout) {
				t.Errorf("stdout %q does not contain %q", out.String(), tt.stdout)
			}
			if !strings.Contains(errOut.String(), tt.stderr) {
				t.Errorf("stderr %q does not contain %q", errOut.String(), tt.stderr)
			}
			if tt.errOnce != "" {
				if n := strings.Count(errOut.String(), tt.errOnce); n != tt.errCount {
					t.Errorf("stderr has %q %d times, want %d:\n%s", tt.errOnce, n, tt.errCount, errOut.String())
				}
			}
		})
	}
}

func TestRecursionACLFromEnv(t *testing.T) {
	var out strings.Builder
	env := map[string]string{"PEERDNS_DNS_RECURSION_ALLOW": "10.0.0.0/8, ::1"}
	cfg, err := parseNodeFlags(nil, func(k string) string { return env[k] }, &out)
	if err != nil {
		t.Fatal(err)
	}
	if len(cfg.DNSRecursionAllow) != 2 || cfg.DNSRecursionAllow[0].String() != "10.0.0.0/8" || cfg.DNSRecursionAllow[1].String() != "::1/128" {
		t.Fatalf("DNSRecursionAllow = %v", cfg.DNSRecursionAllow)
	}
	cfg, err = parseNodeFlags(nil, noEnv, &out)
	if err != nil || cfg.DNSRecursionAllow != nil {
		t.Fatalf("default DNSRecursionAllow = %v, %v; want nil (the built-in list)", cfg.DNSRecursionAllow, err)
	}
}

// A start-up error is one clear line and exit code 1, never a panic.
func TestBusyPortIsOneLineAndExitOne(t *testing.T) {
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	var out, errOut strings.Builder
	code := run([]string{"node", "--data", t.TempDir(), "--admin-addr", busy.Addr().String(),
		"--dns-addr", "127.0.0.1:0", "--p2p-addr", "127.0.0.1:0", "--upstream", "127.0.0.1:1"}, noEnv, &out, &errOut)
	want := "peerdns node: admin: listen " + busy.Addr().String() + ": address already in use\n"
	if code != 1 || !strings.HasSuffix(errOut.String(), want) || strings.Contains(errOut.String(), "panic") {
		t.Fatalf("exit %d, stderr:\n%s\nwant exit 1 ending in %q", code, errOut.String(), want)
	}
}
