// Command peerdns runs a peer-to-peer naming node (`peerdns node`, the
// default) or a host metrics agent (`peerdns agent`); `peerdns invite`
// asks a running node for a one-time invite and `peerdns version` prints
// the version. This package only parses flags, wires parts together and
// handles signals.
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

	"peerdns/internal/node"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "0.1.0-dev"

func main() {
	os.Exit(run(os.Args[1:], os.Getenv, os.Stdout, os.Stderr))
}

// run dispatches a sub-command and returns the exit code.
func run(args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	cmd := "node"
	if len(args) > 0 && len(args[0]) > 0 && args[0][0] != '-' {
		cmd, args = args[0], args[1:]
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	var err error
	switch cmd {
	case "node":
		err = runNode(ctx, args, getenv, stderr)
	case "agent":
		err = runAgent(ctx, args, getenv, stderr)
	case "invite":
		err = runInvite(args, getenv, stdout, stderr)
	case "version":
		fmt.Fprintf(stdout, "peerdns %s\n", version)
	case "help", "-h", "--help":
		usage(stdout)
	default:
		fmt.Fprintf(stderr, "peerdns: unknown command %q\n", cmd)
		usage(stderr)
		return 2
	}
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintf(stderr, "peerdns %s: %v\n", cmd, err)
		return 1
	}
	return 0
}

func usage(w io.Writer) {
	fmt.Fprint(w, `usage:
  peerdns [node] [--data DIR] [--admin-addr A] [--dns-addr A] [--http-addr A]
                 [--https-addr A] [--p2p-addr A] [--bootstrap ADDR,...]
                 [--join INVITE] [--upstream ADDR,...] [--system]
  peerdns agent [--data DIR]
  peerdns invite [--admin-addr A]
  peerdns version
Every node flag also reads PEERDNS_<FLAG> from the environment.
`)
}

func runNode(ctx context.Context, args []string, getenv func(string) string, stderr io.Writer) error {
	cfg, err := parseNodeFlags(args, getenv, stderr)
	if err != nil {
		return err
	}
	cfg.Version = version
	n, err := node.Start(cfg, stderr)
	if err != nil {
		return err
	}
	<-ctx.Done()
	n.Core().Info("shutting down")
	n.Stop()
	return nil
}
