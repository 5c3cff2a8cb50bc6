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
// Files: server.go (Server, routing, CORS, query arguments), hostpath.go
// (the /host/<name>/ switch), json.go (the
// JSON helpers: writeJSON, nullFloat, ordered objects), host.go (what the
// machine is), info.go (index, info, db, versions, settings, health),
// nodes.go (v2 nodes, fleet, stream path, tunnel), charts.go (charts,
// contexts, search), data.go (data queries and their one-second cache),
// allmetrics.go (shell and JSON), prometheus.go (the exposition),
// prometheus_collected.go (source=as-collected), export.go (snapshots and
// their files), alerts.go, badge.go, ai.go, processes.go, logs.go,
// weights.go (the weights answer; the scoring is agent/weights),
// correlations.go (metric_correlations, weights in Netdata's older layout),
// fleet.go (the parent's children in the listings, the node filter that
// hands a query to a child's server, the RPC's state), promname.go,
// data2.go (v2/v3 data), v2.go (v2/v3 contexts, q, alerts,
// alert_transitions, alert_config), v2more.go (functions, me, settings,
// progress, stream_info, ml_info, dbengine_stats, registry).
//
// # v1 and v2/v3
//
// v1 answers keep Netdata 1.37's v1 shapes. v2 and v3 answer as Netdata's
// v2/v3 do, over the same store, alert engine and detector: data (the v2
// query model and json2, agent/query), contexts, q, nodes, alerts,
// alert_transitions, alert_config, functions, me and settings have their
// v2 shapes there; every other command is the same under every prefix.
// The shapes follow Netdata's sources (src/web/api/formatters/
// jsonwrap-v2.c, jsonwrap-summary-*.c, json/json.c, src/database/contexts/
// api_v2_contexts*.c and query_target.c, src/web/api/v2, v3,
// src/registry; as they stood with the contract read here, and as of
// 2026-08 where the newer sources changed an answer: view.cardinality
// and the summary lists left whole, see below) where its
// OpenAPI contract (src/web/api/netdata-swagger.yaml) disagrees: the contract's
// data answer carries latest_values, view_latest_values and
// chart_variables, which the json2 writer (rrdr_json_wrapper_begin2/end2)
// never emits, so json2 has none of them; the contract's versions object
// lacks routing_hard_hash, which version_hashes_api_v2 always writes (1),
// so json2 and v2/v3 versions carry it; the sources' short keys (sl, ex,
// qr, ds, is, sts, ...) are the default and options=long-json-keys gives
// the long ones, as in the sources. testdata/netdata-v2 holds the shapes, written from the
// sources, that contract_test.go holds every v2/v3 answer against.
//
// v2/v3 data decisions. Defaults are Netdata's v2 ones, not the spec
// table's v1 ones: format json2, the last 600 seconds, every stored point
// of the window (points=0), group_by=dimension, aggregation=average,
// time_group=average. Every format is the result member of the v2
// envelope, as Netdata writes it (its v2 data always sets jsonwrap):
// json adds anomaly_rates (the result's layout with each point's anomaly
// rate, Netdata's default return-jwar), csv and the other text formats
// are a string, and jsonp and datasource call their function with the
// whole envelope. The summary's six lists (nodes, contexts, instances,
// dimensions, labels, alerts) keep their long names under both key sets,
// as jsonwrap-v2.c passes them; minimal-stats leaves out what
// jsonwrap-v2.c leaves out with it: versions, the nodes' status, the
// counts, the summary's alerts, totals, functions, agents and timings
// (api, summary with its statistics, result, db and view stay). v1's chart= and context= are read as
// instances= and contexts= (chart= also as the scope), so a v1 URL asked
// of v2 selects the same metrics. Selectors are Netdata's simple patterns
// (',' or '|' between words, as its web separators; a space is part of a
// word; '*' wildcards, '!' negation, first match decides); a selector
// that matches nothing is an empty answer (200), not an error. An
// instances selector is matched, as in Netdata's query target, against
// the chart's id, its name, id@machine_guid and name@hostname (how its v2
// dashboards name an instance), and id@node_id. Instances carry two
// labels, _collect_plugin and _collect_module (those Netdata puts on every
// chart); a label selector is key:value words grouped by key, as
// Netdata's pattern array groups them: one key's words are tried in
// order (the first matching word decides, '!' excludes) and every key
// must match, so labels=a:1|a:2|b:x is (a:1 or a:2) and b:x. Netdata
// rebuilds each word from its parsed text, which loses the word's '*'
// and '!'; here they keep their meaning, as the contract documents simple
// patterns. A word without ':' matches an instance with such a label key.
// alerts= queries only the instances with an alert matching by name or
// name:STATUS (this agent's alerts), as Netdata's query target does.
// Bad input: an unknown group_by word, aggregation or time_group is a 400
// naming it (Netdata silently falls back, which draws a different chart
// than asked); group_by=label without group_by_label is a 400; points
// below 0 or above 86,400 and time_resampling outside 0-86,400 are 400;
// cardinality_limit above 10,000 is clamped to 10,000 and 1 is read as 2
// (one kept, the rest folded). cardinality_limit folds the result's
// columns as Netdata does (the largest kept, largest first, the rest
// summed into "remaining N dimensions"); the summary lists are not cut
// (Netdata's newest cuts them only with its cardinality-limit-all
// option), and view.cardinality {folded, cut} says how many columns
// were folded and the largest folded |sum|, as Netdata's newer sources
// write it (the sources of the contract's time have no such member and cut the summary lists too). each selector (scope_*, nodes, contexts, instances, dimensions, labels, alerts) is at most 4096 bytes, as
// weights' filters (longer: 400). timeout= is clamped to 60 s, and a query
// without one gets 5 s: past it the answer is 504. A query that would copy
// more than 4M stored points (every dimension of every chart over the
// whole retention) is a 400 before any copy, as on v1, and so is one
// whose answer would hold more than 4M values (points × columns, or × an
// instance's dimensions: query.MaxAnswerCells), however little of its
// window is stored. Two passes of
// group_by are served (group_by/group_by[0] and group_by[1], each with its
// group_by_label and aggregation; the second groups the first's groups by
// the attributes of their metrics); group_by[2] and later are not. In parent
// mode a v2/v3 data query covers this agent and every child (the fleet
// lends the API its children's stores): scope_nodes and nodes are
// patterns over GUID, node id and hostname, group_by=node groups by node,
// and an instance group is named id@machine_guid (name@hostname) on one
// node or many, as Netdata names it, the plain id only when node is a
// grouping too; only this
// agent's own alerts are in the summary. Functions are not attached to instances (they run on the
// peer-to-peer RPC), so json2's functions list is empty.
//
// Other v2/v3 decisions. A context's first_entry (contexts, q) is the
// oldest point the store holds, tier 1's when older, the same for every
// context: the store keeps no first time per chart (Netdata keeps one per
// context); last_entry is now for a collected context and its newest
// point otherwise, as Netdata writes them. alerts answers what options names (summary:
// the per-name alerts list; instances and values: alert_instances) and,
// like Netdata, the summary alone when options names none of them. q
// lists each matching context as contexts does plus match (what matched
// first, in Netdata's order); q is Netdata's search pattern, a
// case-insensitive simple pattern in substring mode (',' or '|' between
// words, a space inside a word; a plain word matches inside a string,
// "cpu*" or "a*b" glob the whole string, "!word" excludes the strings it
// matches; the first matching word decides). alert_transitions keeps
// the transitions of its after/before window (unix seconds, or seconds
// back from now; 0 is a bound not given, as in Netdata), as Netdata's
// query of its transitions table does; contexts keeps the contexts with
// data in it. alert_config takes
// config= (a config_hash_id, as alerts and alarms publish it): none is a
// 400, an unknown one a 404. settings (v3) is Netdata's dashboard settings
// file at version 1 (the agent stores none: its API is read-only), beside
// the agent's own settings. me says auth "none": the local API is
// anonymous. progress answers 404 for every transaction: no function runs
// as an HTTP transaction here. registry answers hello as an agent without
// a registry (registry "", cloud disabled) under every prefix (Netdata's
// dashboard asks v1) and refuses access, delete, search and switch with
// 403. metric_correlations is weights' older name,
// answered as Netdata answers it: ks2 by default and its charts layout
// (correlated_charts, correlated_dimensions) beside the v1 header. ml_info reports the
// detector's last tick; dbengine_stats the two tiers' figures.
//
// Host switch. /host/<name>/<path> answers <path> for the host name
// names (hostname, machine GUID, node id or key), as Netdata does: this
// agent, or in parent mode a child (Netdata's dashboard builds these
// URLs from info's mirrored_hosts); any other name is Netdata's 404
// "This netdata does not maintain a database for host: <name>".
//
// Parent mode. With Options.Fleet, a request (other than v2/v3 data, see
// below) whose scope_nodes, nodes or node argument names one child (GUID, node id, hostname or key) is
// answered by that child's own Server over its store, so every command
// answers for a child exactly as it does locally; listings (nodes,
// node_instances, fleet, stream_path, tunnel) are never handed over. A
// child streams its metrics and nothing else: its process table (501) and
// its logs of every source (503) stay on it, and the parent says so
// instead of answering with its own table or an empty log.
//
// # Decisions where the spec is silent
//
// CORS. Access-Control-Allow-Origin is "*" or exactly AGENT_REST_CORS, on
// every answer including errors, preflights and a parent's answers for
// a child (the child's server is the parent's; its own CORS is not
// used). Netdata 1.37 echoes the Origin with
// Access-Control-Allow-Credentials: true; this agent does not,
// so no page can widen its access by sending an Origin. Dashboards on
// another origin still read the API: nothing here needs cookies.
//
// Private reads. processes (command lines carry tokens and passwords)
// and logs of the journal or the audit trail are refused to a request
// that shows a web page, as export?write=1 is below: CORS "*" would let
// any page read them. The anomaly log stays open, as the metrics.
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
// routing_hard_hash is left out of v1 because nothing is routed (v2/v3
// write Netdata's constant 1). functions lists the jobs the peer-to-peer
// admin RPC (agent/rpc) runs, and nothing when it is off. ai/snapshot
// sums up the anomaly detector's events when Options.Anomaly is set and
// otherwise says {"available": false} instead of counting zero anomalies
// that no detector looked for.
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
// Comment lines. The shell and Prometheus formats write a chart's id,
// name, context, family and units into comment lines (as Netdata does);
// a line break there (a mount point's path, a child's stream) becomes a
// space, so no chart can add a command to a script that runs the shell
// format or a series to a scrape. For the same reason allmetrics'
// prefix= must be a Prometheus metric name of at most 256 bytes (400
// otherwise; Netdata writes it as given).
//
// Idle connections. A keep-alive connection between requests holds no
// buffer (fasthttp's ReduceMemoryUsage): its read and write buffers and
// its last answer go back to their pools, so many open connections cost
// a goroutine each, not the largest answer each was ever sent.
//
// Encoding. Cold paths build structs or maps and go through writeJSON
// (encoding/json); the measured hot paths are written by hand and name
// their benchmark: data (agent/query), allmetrics prometheus
// (BenchmarkPrometheus, BenchmarkPrometheus1300) and json
// (BenchmarkAllmetricsJSON). A value that may be missing is a nullFloat,
// which encodes NaN and infinities as null.
package api
