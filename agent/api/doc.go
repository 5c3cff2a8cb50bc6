// Package api serves the agent's Netdata-compatible REST API
// (/api/v1, /api/v2, /api/v3) with fasthttp.
//
// It owns routing, the JSON, text and SVG answers and the export files.
// It reads the store (agent/store), the alert engine (agent/health), the
// process table (agent/procs) and the log sources (agent/logs) and never
// changes them: the only writes it makes are export?write=1, into the
// export directory, and the audit entries that record those. It must never echo a request's Origin, never let a
// request name a file, and never report a value it did not measure.
//
// Files: server.go (Server, routing, CORS, query arguments), json.go (the
// JSON helpers: writeJSON, nullFloat, ordered objects), host.go (what the
// machine is), info.go (index, info, db, versions, settings, health),
// nodes.go (v2 nodes, fleet, stream path, tunnel), charts.go (charts,
// contexts, search), data.go (data queries and their one-second cache),
// allmetrics.go (shell and JSON), prometheus.go (the exposition),
// prometheus_collected.go (source=as-collected), export.go (snapshots and
// their files), alerts.go, badge.go, ai.go, processes.go, logs.go,
// weights.go (the weights answer; the scoring is agent/weights),
// fleet.go (the parent's children in the listings, the node filter that
// hands a query to a child's server, the RPC's state), promname.go.
//
// Parent mode. With Options.Fleet, a request whose scope_nodes, nodes or
// node argument names one child (GUID, node id, hostname or key) is
// answered by that child's own Server over its store, so every command
// answers for a child exactly as it does locally; listings (nodes,
// node_instances, fleet, stream_path, tunnel) are never handed over.
//
// # Decisions where the spec is silent
//
// CORS. Access-Control-Allow-Origin is "*" or exactly AGENT_REST_CORS, on
// every answer including errors and preflights. Netdata 1.37 echoes the
// Origin with Access-Control-Allow-Credentials: true; this agent does not,
// so no page can widen its access by sending an Origin. Dashboards on
// another origin still read the API: nothing here needs cookies.
//
// Export writes. export?write=1 is a GET (the spec's), so it is guarded
// like a form post: it is refused with 403 when the request shows a
// browser on another site (Sec-Fetch-Site cross-site or same-site, an
// Origin or Referer that is not this agent) or a Host that is not
// localhost, an IP address or this machine's name (DNS rebinding). curl
// and scripts send none of these and are unaffected. Reading the snapshot
// (no write) stays open, like every other read. The agent names the file
// (peerdns-agent-<UTC second>-<counter>.json|prom) in the export
// directory; query arguments never reach the path. At most 100 exports
// and 256 MiB are kept, the oldest removed first, and only files named
// like exports are ever removed; one export over 16 MiB, or a full disk,
// is a 507.
//
// Honest values. collecting (health, node_instances) and collected
// (contexts) are true while the newest stored point is at most staleAfter
// (10) seconds old; /health turns 503 "stale" after that, once the agent
// has run that long. The local node's state is "reachable" because it is
// the one answering (Netdata says "stale" only for children whose stream
// is gone); whether it still collects is the instance's collecting.
// versions' hashes are computed (FNV-1a over chart definitions and node
// GUIDs, the newest point, the latest alert transition and evaluation);
// routing_hard_hash is left out because nothing is routed. functions lists
// the jobs the peer-to-peer admin RPC (agent/rpc) runs, and nothing when
// it is off. ai/snapshot sums up the anomaly detector's events when
// Options.Anomaly is set and otherwise says {"available": false} instead
// of counting zero anomalies that no detector looked for.
//
// Missing log sources. logs answers 503 with a sentence naming the cause
// when its source is not there (AGENT_JOURNAL=0, no journalctl or journal
// files, no anomaly detector): the request was fine, the service is not
// available on this host. processes answers 501 without /proc.
//
// Long arguments. The request buffer is 16 KiB (fasthttp's default is 4),
// so a 10 KB q or cursor reaches its handler and gets a 400 that names the
// argument; every echoed argument is cut to 64 bytes.
//
// Encoding. Cold paths build structs or maps and go through writeJSON
// (encoding/json); the measured hot paths are written by hand and name
// their benchmark: data (agent/query), allmetrics prometheus
// (BenchmarkPrometheus, BenchmarkPrometheus1300) and json
// (BenchmarkAllmetricsJSON). A value that may be missing is a nullFloat,
// which encodes NaN and infinities as null.
package api
