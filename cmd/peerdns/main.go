// Command peerdns runs a peer-to-peer naming node (`peerdns node`, the
// default) or a host metrics agent (`peerdns agent`); `peerdns invite`
// asks a running node for a one-time invite and `peerdns version` prints
// the version; status, domains, records, peers, tunnels, logs and metrics
// (package cli) speak to a running node's admin API. This package only
// parses flags, wires parts together, dispatches and handles signals.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"peerdns/cmd/peerdns/cli"
	"peerdns/cmd/peerdns/node"
	"peerdns/internal/procs"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "0.1.0-dev"

func main() {
	if cmd, _ := command(os.Args[1:]); cmd == "node" {
		// GODEBUG is read when the runtime starts: the node runs itself
		// again with the setting (procs.SysmonTrace says why).
		if err := procs.ExecWithSysmonAwake(); err != nil {
			fmt.Fprintf(os.Stderr, "peerdns: running with Go's default sysmon: %v\n", err)
		}
	}
	os.Exit(run(os.Args[1:], os.Getenv, os.Stdout, os.Stderr))
}

// command splits args into the sub-command ("node" when none is named;
// "help" for -h and friends) and its arguments.
func command(args []string) (cmd string, rest []string) {
	if len(args) == 0 {
		return "node", args
	}
	switch args[0] {
	case "-h", "-help", "--help", "help":
		return "help", args[1:]
	case "-version", "--version":
		return "version", args[1:]
	}
	if a := args[0]; a != "" && a[0] != '-' {
		return a, args[1:]
	}
	return "node", args
}

// run dispatches a sub-command and returns the exit code: 0 on success,
// 1 when the command failed, 2 for a usage error.
func run(args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	cmd, args := command(args)
	if cmd == "help" {
		usage(stdout)
		return 0
	}
	ctx, stop := stopOnSignal()
	defer stop()
	if cli.IsCommand(cmd) {
		return cli.Run(ctx, cmd, args, getenv, stdout, stderr)
	}
	var err error
	switch cmd {
	case "node":
		err = runNode(ctx, args, getenv, stderr)
	case "agent":
		err = runAgent(ctx, args, getenv, stdout, stderr)
	case "invite":
		err = runInvite(ctx, args, getenv, stdout, stderr)
	case "install-dns", "uninstall-dns":
		err = runSysDNS(cmd == "install-dns", args, getenv, stdout, stderr)
	case "version":
		fs := flag.NewFlagSet("version", flag.ContinueOnError)
		fs.SetOutput(stderr)
		setUsage(fs)
		if err = parseFlags(fs, args); err == nil {
			fmt.Fprintf(stdout, "peerdns %s\n", version)
		}
	default:
		fmt.Fprintf(stderr, "peerdns: unknown command %q\n", cmd)
		usage(stderr)
		return 2
	}
	switch {
	case err == nil, errors.Is(err, flag.ErrHelp):
		return 0
	case errors.Is(err, errUsage):
		// The flag package has printed the problem and the usage already.
		return 2
	case errors.Is(err, errInterrupted):
		fmt.Fprintf(stderr, "peerdns %s: %v\n", cmd, err)
		return cli.ExitInterrupted
	}
	fmt.Fprintf(stderr, "peerdns %s: %v\n", cmd, err)
	return 1
}

// errUsage marks a command-line error that was already reported.
var errUsage = errors.New("usage error")

// errInterrupted marks a command ended by SIGINT or SIGTERM before the
// node answered: exit 130, as the commands of package cli.
var errInterrupted = errors.New("interrupted")

// parseFlags parses args with fs; a bad flag or a stray argument is
// reported once, with the usage, and comes back as errUsage.
func parseFlags(fs *flag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return errUsage
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(fs.Output(), "unexpected arguments: %v\n", fs.Args())
		fs.Usage()
		return errUsage
	}
	return nil
}

// usageText is the whole command line; each sub-command's -h prints it
// before its own flags.
const usageText = `peerdns: a peer-to-peer naming node and a host metrics agent, in one binary.

usage:
  peerdns [node] [--data DIR] [--admin-addr A] [--dns-addr A] [--http-addr A]
                 [--https-addr A] [--p2p-addr A] [--bootstrap ADDR,...]
                 [--join INVITE] [--upstream ADDR,...] [--system]
                 [--dns-recursion-allow NETS] [--dot-addr A] [--dns-query-log]
                 [--advertise-addr ADDR,...]
  peerdns agent  [--data DIR]
  peerdns agent  allow <key> <admin|viewer|child> | deny <key> | peers | key
  peerdns agent  call <key@host:port> <method> [args] [--timeout D]
  peerdns invite [--admin-addr A] [--ttl D] [--timeout D]
  peerdns install-dns   [--dns-addr A] [--system] [--admin-addr A] [--suffixes S,...]
  peerdns uninstall-dns
  peerdns version
  peerdns help

commands:
  node     run a naming node (the default)
  agent    run the host metrics agent (Netdata-compatible API on 127.0.0.1:18888,
           admin RPC on the peer transport, UDP 127.0.0.1:18889); allow/deny/peers
           edit its peer allowlist, key prints its and the operator's keys, call
           calls an agent: info, get /api/..., retention.set tier0=S tier1=S,
           prune before=UNIX [chart=ID], functions.list, functions.run NAME [k=v],
           logs audit|journal|anomaly [limit=N]
  invite   print a one-time invite from the running node, for --join on another
  install-dns    send .p2p (and --suffixes) to the node: systemd-resolved
                 drop-in or macOS /etc/resolver files (PEERDNS_RESOLVED_DIR,
                 PEERDNS_RESOLVER_DIR move them); needs root
  uninstall-dns  remove what install-dns wrote
  version  print the version

Every node flag also reads PEERDNS_<FLAG> from the environment
(e.g. PEERDNS_ADMIN_ADDR); a flag on the command line wins.
`

func usage(w io.Writer) {
	fmt.Fprint(w, usageText)
	fmt.Fprintf(w, "\nspeaking to a running node (every one takes --admin-addr A, --json, --timeout D):\n%s%s", cli.Usage, cliExitCodes)
}

// cliExitCodes are the exit codes of the commands of package cli.
const cliExitCodes = `exit codes: 0 done; 1 no node answers at the address (down, or not a peerdns
node); 2 usage error; 3 the node refused the request; 4 no such domain or record;
130 interrupted before the node answered
`

// setUsage makes fs print the whole command line and then its own flags.
func setUsage(fs *flag.FlagSet) {
	fs.Usage = func() {
		usage(fs.Output())
		fmt.Fprintf(fs.Output(), "\nflags of %s:\n", fs.Name())
		fs.PrintDefaults()
	}
}

func runNode(ctx context.Context, args []string, getenv func(string) string, stderr io.Writer) error {
	cfg, err := parseNodeFlags(args, getenv, stderr)
	if err != nil {
		return err
	}
	cfg.Version = version
	stopProfile, err := startProfile(getenv)
	if err != nil {
		return err
	}
	defer stopProfile()
	n, err := node.Start(cfg, stderr)
	if err != nil {
		return err
	}
	// Work served on every core at once: DNS queries, and the edge's
	// requests to servers on this node (per 100 ms tick).
	parallel := procs.AnyOf(procs.Grew(n.DNSQueries, procs.DNSRate/10), procs.Grew(n.EdgeLocalExchanges, procs.EdgeRate/10))
	if maxProcs := procs.Start(ctx, getenv, parallel, func(from, to int, cores float64) {
		n.Core().Info("GOMAXPROCS changed", "from", from, "to", to, "cores_used", fmt.Sprintf("%.2f", cores))
	}); maxProcs > 0 {
		n.Core().Info("GOMAXPROCS follows demand", "min", 1, "max", maxProcs)
	}
	n.Core().Info("sysmon", "never_deep_sleeps", procs.SysmonAwake(getenv), "godebug", getenv("GODEBUG"))
	select {
	case <-ctx.Done():
		n.Core().Info("shutting down")
		stopProfile()
		n.Stop()
		return nil
	case err := <-n.Fatal():
		// The part that failed has logged it; run prints it once more as
		// the last line, with the exit code 1.
		n.Stop()
		return err
	}
}

// stopOnSignal is a context that ends at the first SIGINT or SIGTERM.
// That signal gives both their default action back before the context
// ends (so before anything a stop does, its "shutting down" line
// included): a second one ends a stop that hangs (a client holding a
// request open) at once, as a crash would.
func stopOnSignal() (context.Context, func()) {
	ctx, cancel := context.WithCancel(context.Background())
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	go func() {
		select {
		case <-sigs:
		case <-ctx.Done():
		}
		signal.Stop(sigs)
		cancel()
	}()
	return ctx, cancel
}
