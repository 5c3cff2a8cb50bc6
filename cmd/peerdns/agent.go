package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"runtime/debug"

	"peerdns/agent"
	"peerdns/cmd/peerdns/node"
)

// runAgent runs the metrics agent: `peerdns agent [--data DIR]`, the rest
// of its configuration from AGENT_* environment variables. Its data lives
// in DATA/agent, beside (never inside) a node's files.
func runAgent(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	if len(args) > 0 && agentAdminCommands[args[0]] {
		return runAgentAdmin(ctx, args[0], args[1:], getenv, stdout, stderr)
	}
	fs := flag.NewFlagSet("agent", flag.ContinueOnError)
	fs.SetOutput(stderr)
	setUsage(fs)
	data := fs.String("data", envOr(getenv, "PEERDNS_DATA", "./peerdns-data"), "data directory")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	cfg, err := agent.ConfigFromEnv(*data)
	if err != nil {
		return err
	}
	// One agent per folder, locked before anything there is written: a
	// second would share the stores and the audit log of the first.
	if err := os.MkdirAll(cfg.Dir, 0o700); err != nil {
		return fmt.Errorf("agent data dir: %w", err)
	}
	unlock, err := node.LockData(cfg.Dir, "agent")
	if err != nil {
		return err
	}
	defer unlock()
	level, err := node.ParseLevel(getenv("LOG_LEVEL"))
	if err != nil {
		return err
	}
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))
	if getenv("GOGC") == "" {
		debug.SetGCPercent(agentGCPercent)
	}
	return agent.Run(ctx, cfg, log)
}

// agentGCPercent is the agent process's GOGC unless the environment sets
// one. Its heap is mostly long-lived float arrays (tier 0, tier 1) and it
// allocates little a second, so collecting at half Go's default growth
// costs next to nothing: side by side on one machine, an agent at 50 held
// 17.0 MiB of anonymous memory after 47 minutes and one at 100 21.5 MiB
// after 38, at 0.75 against 0.78% of a core over their lifetimes
// (bench/README.md, "Memory").
const agentGCPercent = 50
