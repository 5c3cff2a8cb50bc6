package node

import "log/slog"

// storeLog is where a store says it repaired a torn last write at open
// (store.Options.Log): the node's stderr, since the stores open before
// the log channels exist.
func (n *Node) storeLog() *slog.Logger {
	return slog.New(slog.NewTextHandler(n.stderr, nil)).With("component", "store")
}
