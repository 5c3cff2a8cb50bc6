package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"peerdns/cmd/peerdns/cli"
	"peerdns/messages"
	"peerdns/transport"
)

// runInvite asks the running node (through its admin API) for a one-time
// invite and prints it on stdout, so `peerdns node --join $(peerdns invite)`
// works on another machine. --admin-addr takes host:port or a URL
// (http://host:port), and --timeout bounds the wait, as in the commands
// of package cli; ctx ending (Ctrl-C) ends the wait with errInterrupted.
func runInvite(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("invite", flag.ContinueOnError)
	fs.SetOutput(stderr)
	setUsage(fs)
	addr := fs.String("admin-addr", envOr(getenv, "PEERDNS_ADMIN_ADDR", "127.0.0.1:7710"), "admin API address of the running node")
	ttl := fs.Duration("ttl", 24*time.Hour, "how long the invite stays valid: whole seconds, 1s to 720h")
	timeout := fs.Duration("timeout", 10*time.Second, "how long to wait for the node")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *timeout <= 0 {
		fmt.Fprintln(stderr, "peerdns invite: --timeout must be positive")
		return errUsage
	}
	// The node takes whole seconds, 1 to 30 days' worth.
	if *ttl < time.Second || *ttl > messages.MaxInviteTTL || *ttl%time.Second != 0 {
		fmt.Fprintf(stderr, "peerdns invite: --ttl %v: want whole seconds from 1s to %v\n", *ttl, messages.MaxInviteTTL)
		return errUsage
	}
	body := fmt.Sprintf(`{"ttlSeconds":%d}`, int64(ttl.Seconds()))
	base := *addr
	if !strings.Contains(base, "://") {
		base = "http://" + base
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, strings.TrimRight(base, "/")+"/api/invites", strings.NewReader(body))
	if err != nil {
		fmt.Fprintf(stderr, "peerdns invite: bad --admin-addr %q: %v\n", *addr, err)
		return errUsage
	}
	req.Header.Set("Content-Type", "application/json")
	c := &http.Client{Timeout: *timeout}
	resp, err := c.Do(req)
	if err != nil && ctx.Err() != nil {
		return fmt.Errorf("%w before %s answered", errInterrupted, *addr)
	}
	if err != nil {
		return fmt.Errorf("is the node running? %w", err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil && ctx.Err() != nil {
		return fmt.Errorf("%w before %s answered", errInterrupted, *addr)
	}
	// What the node sent is shown as one short printable line: an answer
	// may carry anything, control sequences for the terminal included.
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("node answered %d: %s", resp.StatusCode, cli.Message(b))
	}
	var out struct {
		Invite    string `json:"invite"`
		ExpiresAt int64  `json:"expiresAt"`
	}
	if err := json.Unmarshal(b, &out); err != nil || out.Invite == "" {
		return fmt.Errorf("unexpected answer from node: %s", cli.Message(b))
	}
	// Printed only if it is one: a script puts it on a --join line.
	if _, err := transport.ParseInvite(out.Invite); err != nil {
		return fmt.Errorf("the node's answer is not an invite: %s", cli.Message([]byte(err.Error())))
	}
	fmt.Fprintln(stdout, out.Invite)
	fmt.Fprintf(stderr, "expires %s\n", time.UnixMilli(out.ExpiresAt).UTC().Format(time.RFC3339))
	return nil
}
