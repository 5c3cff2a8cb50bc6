// Command agentmain runs the metrics agent alone (agent.Run with the
// AGENT_* environment), for bench/agent/compare.sh when the peerdns
// command does not have the agent sub-command wired yet.
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"peerdns/agent"
)

func main() {
	data := flag.String("data", "peerdns-data", "data directory (the agent uses DATA/agent)")
	flag.Parse()
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	cfg, err := agent.ConfigFromEnv(*data)
	if err != nil {
		fmt.Fprintln(os.Stderr, "agent:", err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := agent.Run(ctx, cfg, log); err != nil {
		fmt.Fprintln(os.Stderr, "agent:", err)
		os.Exit(1)
	}
}
