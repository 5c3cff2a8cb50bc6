package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"time"
)

// Exit codes (see the package doc).
const (
	ExitOK       = 0
	ExitNoNode   = 1
	ExitUsage    = 2
	ExitRefused  = 3
	ExitNotFound = 4
	// ExitInterrupted is the shell's code for a command ended by SIGINT
	// (128+2).
	ExitInterrupted = 130
)

// Commands are the sub-commands this package runs.
var Commands = []string{"status", "domains", "records", "peers", "tunnels", "logs", "metrics"}

// IsCommand reports whether name is one of Commands.
func IsCommand(name string) bool {
	for _, c := range Commands {
		if c == name {
			return true
		}
	}
	return false
}

// Usage is the command lines of this package's commands, for the
// binary's help.
const Usage = `  peerdns status   [--admin-addr A] [--json]
  peerdns domains  [--json]                      list resolved domains
  peerdns domains  add DOMAIN HASH [--ssl]       claim a domain for a tunnel hash
  peerdns domains  remove DOMAIN                 remove this node's claim
  peerdns domains  show DOMAIN [--json]          consensus and services of a domain
  peerdns records  [--json]                      list local DNS records
  peerdns records  add NAME TYPE VALUE [--ttl N] A, AAAA, CNAME, TXT, NS, PTR; MX "PREF HOST";
                                                 SRV "PRIO WEIGHT PORT TARGET"
  peerdns records  remove NAME [TYPE]            remove the local records of NAME (of TYPE)
  peerdns peers    [--json]                      known peers: state, path, round-trip time, packets lost
  peerdns tunnels  [--json]                      tunnel servers and clients with their traffic
  peerdns logs     [CHANNEL] [--lines N] [-f]    a log channel (core, proxy, httpProxy, dns,
                                                 plugins, tunnel); -f follows it live
  peerdns metrics  [PREFIX...] [--json]          the node's Prometheus metrics
`

// exitError is a failure with its exit code; msg is the one line for
// stderr.
type exitError struct {
	code int
	msg  string
}

func (e *exitError) Error() string { return e.msg }

func fail(code int, format string, args ...any) error {
	return &exitError{code: code, msg: fmt.Sprintf(format, args...)}
}

// env are the settings every command shares.
type env struct {
	c      *client
	json   bool
	stdout io.Writer
	ctx    context.Context
}

// Run runs the command cmd with its arguments and returns the exit code.
// Errors go to stderr as one line "peerdns CMD: message".
func Run(ctx context.Context, cmd string, args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	err := run(ctx, cmd, args, getenv, stdout, stderr)
	if err == nil || errors.Is(err, flag.ErrHelp) {
		return ExitOK
	}
	var ee *exitError
	if !errors.As(err, &ee) {
		ee = &exitError{code: ExitNoNode, msg: err.Error()}
	}
	if ee.code != ExitUsage || ee.msg != "" {
		fmt.Fprintf(stderr, "peerdns %s: %s\n", cmd, oneLine(ee.msg))
	}
	return ee.code
}

// oneLine keeps an error on one line of printable text, whatever a
// node put in it: line breaks and tabs become spaces, the rest as
// printable writes it.
func oneLine(s string) string {
	return printable(strings.TrimSpace(s), true)
}

func run(ctx context.Context, cmd string, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet(cmd, flag.ContinueOnError)
	fs.SetOutput(stderr)
	def := getenv("PEERDNS_ADMIN_ADDR")
	if def == "" {
		def = "127.0.0.1:7710"
	}
	addr := fs.String("admin-addr", def, "admin API address of the running node (PEERDNS_ADMIN_ADDR)")
	asJSON := fs.Bool("json", false, "print JSON for scripts instead of tables")
	timeout := fs.Duration("timeout", 10*time.Second, "how long to wait for the node")
	// Command-specific flags; each command checks the ones it takes.
	ssl := fs.Bool("ssl", false, "domains add: the tunnel speaks HTTPS/WSS")
	ttl := fs.Int("ttl", 300, "records add: TTL in seconds")
	lines := fs.Int("lines", 50, "logs: lines of history to print")
	follow := fs.Bool("f", false, "logs: follow the channel live (until interrupted)")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage:\n%s\nflags:\n", Usage)
		fs.PrintDefaults()
	}
	pos, err := parseInterspersed(fs, args)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return &exitError{code: ExitUsage} // the flag package printed it
	}
	if *timeout <= 0 {
		return fail(ExitUsage, "--timeout must be positive")
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	e := &env{c: newClient(*addr, *timeout), json: *asJSON, stdout: stdout, ctx: ctx}
	e.c.ctx = ctx
	only := func(allowed ...string) error {
		for name := range set {
			switch name {
			case "admin-addr", "json", "timeout":
				continue
			}
			ok := false
			for _, a := range allowed {
				ok = ok || a == name
			}
			if !ok {
				return fail(ExitUsage, "flag --%s does not apply here", name)
			}
		}
		return nil
	}
	switch cmd {
	case "status":
		if err := noArgs(pos, only()); err != nil {
			return err
		}
		return e.status()
	case "domains":
		return e.domains(pos, *ssl, only)
	case "records":
		return e.records(pos, *ttl, only)
	case "peers":
		if err := noArgs(pos, only()); err != nil {
			return err
		}
		return e.peers()
	case "tunnels":
		if err := noArgs(pos, only()); err != nil {
			return err
		}
		return e.tunnels()
	case "logs":
		if err := only("lines", "f"); err != nil {
			return err
		}
		if len(pos) > 1 {
			return fail(ExitUsage, "logs takes one channel, got %q", pos)
		}
		ch := "core"
		if len(pos) == 1 {
			ch = pos[0]
		}
		if *lines < 0 {
			return fail(ExitUsage, "--lines must be 0 or more")
		}
		if *follow {
			return e.follow(ch, *lines)
		}
		return e.logs(ch, *lines)
	case "metrics":
		if err := only(); err != nil {
			return err
		}
		return e.metrics(pos)
	}
	return fail(ExitUsage, "unknown command %q", cmd)
}

func noArgs(pos []string, err error) error {
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return fail(ExitUsage, "unexpected arguments %q", pos)
	}
	return nil
}

// parseInterspersed parses flags anywhere among the arguments (the flag
// package stops at the first non-flag): `domains add x.p2p HASH --ssl`.
// "--" ends the flags.
func parseInterspersed(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		rest := fs.Args()
		if len(rest) == 0 {
			return pos, nil
		}
		if len(args) > len(rest) && args[len(args)-len(rest)-1] == "--" {
			return append(pos, rest...), nil
		}
		pos = append(pos, rest[0])
		args = rest[1:]
	}
}
