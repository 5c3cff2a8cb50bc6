// Package agent runs `peerdns agent`: a per-second host metrics agent with
// a Netdata-compatible read API.
//
// The pieces: agent/collect reads the system charts every second into
// agent/store (tier 0: in-memory float32 rings of 1-second points; tier 1:
// per-minute min/max/sum/count kept in memory and in an append-only file);
// agent/health evaluates the built-in alert rules and records transitions;
// agent/ml flags each collected point as anomalous or not (run in the
// collection goroutine right after each second's points are stored);
// agent/weights ranks dimensions by how much they changed in a window;
// agent/query turns store windows into Netdata-shaped query results; and
// agent/api serves the REST API with fasthttp. Run wires them together
// and, when its context is done, stops all of them: every goroutine it
// started has returned and the store is flushed before it returns.
//
// The store is a plain mutex-guarded structure (one lock per chart), not a
// protoactor actor: the agent is not part of the node's actor tree, and
// the REST read path must not pay an actor round-trip per request; a query
// copies the window it needs under the chart's lock and renders outside it.
//
// Files: everything lives under DATA/agent/: identity.key (the agent's own
// Ed25519 key, the peer key shown by / and /api/v3/tunnel), the tier-1
// file and the alert transitions, plus exports/ unless AGENT_EXPORT_DIR
// points elsewhere, peers.json and audit.log (agent/rpc) and
// retention.json (the retention set over the RPC, used at the next start
// unless the Config sets one).
//
// On the peer transport (peer.go): agent/rpc serves the admin RPC on
// AGENT_PEER_ADDR, agent/fleet makes the agent a parent (AGENT_PARENT=1)
// or streams it to one (AGENT_PARENT_DEST=<key>@<addr>), and
// agent/remotewrite sends points to AGENT_REMOTE_WRITE_URL. Run starts them
// before the REST server and stops them after it.
package agent
