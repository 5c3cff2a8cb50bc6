package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"

	"peerdns/agent"
	"peerdns/internal/node"
)

// runAgent runs the metrics agent: `peerdns agent [--data DIR]`, the rest
// of its configuration from AGENT_* environment variables. Its data lives
// in DATA/agent, beside (never inside) a node's files.
func runAgent(ctx context.Context, args []string, getenv func(string) string, stderr io.Writer) error {
	fs := flag.NewFlagSet("agent", flag.ContinueOnError)
	fs.SetOutput(stderr)
	data := fs.String("data", envOr(getenv, "PEERDNS_DATA", "./peerdns-data"), "data directory")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments: %v", fs.Args())
	}
	cfg, err := agent.ConfigFromEnv(*data)
	if err != nil {
		return err
	}
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: node.ParseLevel(envOr(getenv, "LOG_LEVEL", "info"))}))
	return agent.Run(ctx, cfg, log)
}
