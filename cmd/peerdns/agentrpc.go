package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"path/filepath"
	"strings"
	"time"

	"peerdns/agent/rpc"
	"peerdns/cmd/peerdns/cli"
	"peerdns/transport/identity"
)

// agentAdminCommands are the sub-commands of `peerdns agent` that manage
// the peer allowlist or call an agent over the peer transport:
//
//	peerdns agent allow <key> <admin|viewer|child>   [--data DIR]
//	peerdns agent deny <key>                         [--data DIR]
//	peerdns agent peers                              [--data DIR]
//	peerdns agent key                                [--data DIR]   this agent's and the operator's keys
//	peerdns agent call <key@host:port> <method> [args]  [--data DIR]
//
// call signs in with the operator key DATA/operator.key (created on first
// use; `peerdns agent key` prints it for the remote agent's allow).
var agentAdminCommands = map[string]bool{"allow": true, "deny": true, "peers": true, "key": true, "call": true}

func runAgentAdmin(ctx context.Context, cmd string, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("agent "+cmd, flag.ContinueOnError)
	fs.SetOutput(stderr)
	setUsage(fs)
	data := fs.String("data", envOr(getenv, "PEERDNS_DATA", "./peerdns-data"), "data directory")
	timeout := fs.Duration("timeout", 30*time.Second, "call: give up after this long")
	// Flags may come before or after the positional words.
	var pos []string
	for len(args) > 0 {
		if err := fs.Parse(args); err != nil {
			if err == flag.ErrHelp {
				return err
			}
			return errUsage
		}
		args = fs.Args()
		if len(args) > 0 {
			pos = append(pos, args[0])
			args = args[1:]
		}
	}
	agentDir := filepath.Join(*data, "agent")
	// need checks the count of positional words: n, or n and more when
	// form ends in "[args]".
	need := func(n int, form string) error {
		if len(pos) < n || len(pos) > n && !strings.HasSuffix(form, "[args]") {
			fmt.Fprintf(stderr, "usage: peerdns agent %s\n", form)
			return errUsage
		}
		return nil
	}
	switch cmd {
	case "allow":
		if err := need(2, "allow <key> <admin|viewer|child>"); err != nil {
			return err
		}
		if err := rpc.Allow(agentDir, pos[0], pos[1]); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "allowed %s as %s\n", pos[0], pos[1])
	case "deny":
		if err := need(1, "deny <key>"); err != nil {
			return err
		}
		if err := rpc.Deny(agentDir, pos[0]); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "denied %s\n", pos[0])
	case "peers":
		if err := need(0, "peers"); err != nil {
			return err
		}
		lines, err := rpc.List(agentDir)
		if err != nil {
			return err
		}
		for _, l := range lines {
			fmt.Fprintln(stdout, l)
		}
	case "key":
		if err := need(0, "key"); err != nil {
			return err
		}
		id, err := identity.LoadOrCreate(filepath.Join(agentDir, "identity.key"))
		if err != nil {
			return err
		}
		op, err := identity.LoadOrCreate(filepath.Join(*data, "operator.key"))
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "agent    %s\noperator %s\n", id.ID(), op.ID())
	case "call":
		if err := need(2, "call <key@host:port> <method> [args]"); err != nil {
			return err
		}
		// The target and the method's words are the command line's:
		// a mistake in them is a usage error, before any agent is dialled.
		key, addr, err := rpc.ParseTarget(pos[0])
		if err != nil {
			fmt.Fprintf(stderr, "peerdns agent call: %v\n", err)
			return errUsage
		}
		req, err := rpc.BuildRequest(pos[1], pos[2:])
		if err != nil {
			fmt.Fprintf(stderr, "peerdns agent call: %v\n", err)
			return errUsage
		}
		op, err := identity.LoadOrCreate(filepath.Join(*data, "operator.key"))
		if err != nil {
			return err
		}
		listen := "0.0.0.0:0"
		if host, _, _ := net.SplitHostPort(addr); host == "localhost" || (net.ParseIP(host) != nil && net.ParseIP(host).IsLoopback()) {
			listen = "127.0.0.1:0"
		}
		c, err := rpc.NewClient(op, listen)
		if err != nil {
			return err
		}
		defer c.Close()
		ctx, cancel := context.WithTimeout(ctx, *timeout)
		defer cancel()
		rep, err := c.Call(ctx, key, addr, req)
		if rep != nil && len(rep.Body) > 0 {
			// The reply is another host's: its lines are printed with
			// what does not print (an escape sequence, a C1 control or a
			// bidi override, in a JSON string too) as Go escapes.
			body := rep.Body
			var out bytes.Buffer
			if json.Indent(&out, body, "", "  ") == nil {
				body = out.Bytes()
			}
			for _, l := range strings.Split(strings.TrimSuffix(string(body), "\n"), "\n") {
				fmt.Fprintln(stdout, cli.Printable(l))
			}
		}
		if err != nil {
			return errors.New(cli.Message([]byte(err.Error()))) // the agent's error message is its own text too
		}
		return nil
	}
	return nil
}
