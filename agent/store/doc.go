// Package store holds the agent's metrics: tier 0, an in-memory ring of
// 1-second points per dimension (float32, NaN = gap, 4 bytes a second)
// kept in blocks of 64 seconds, where a block whose seconds all hold one
// value (an idle dimension, a gap) is a single float32 (ring.go), plus a
// parallel bitset of anomaly bits (1 bit a second), and
// tier 1, per-minute min/max/sum/count/anomalous per dimension, kept in
// memory in 6-hour chunks (14 bytes a minute for the chunk being filled,
// which grows as its minutes come;
// earlier chunks packed with byte planes + zstd: from ~10 bytes a day for
// an all-zero dimension to ~70% of the unpacked 20160 bytes a day for pure
// noise) and persisted in an append-only file (DIR/tier1.dat, see file.go)
// that is replayed at Open and compacted when it has doubled. The
// anomalous count of a minute is the number of its points flagged by
// MarkAnomalous (agent/ml flags each point right after it is collected);
// it is persisted with the minute, so an anomaly rate can be asked of any
// window of either tier.
//
// The store is a plain structure with a map lock and one lock per chart,
// not an actor: the agent is not part of the node's actor tree, collectors
// append once a second, and the REST read path copies a window under one
// chart lock without a mailbox round-trip.
//
// Retention is relative to the newest point of each chart (and to the wall
// clock when the file is loaded, so minutes older than the tier-1 retention
// are dropped at restart). The package never does HTTP and never collects.
//
// Files: db.go (DB, Open, Append, Close), anomaly.go (MarkAnomalous),
// registry.go (chart definitions: Register, Remove, Charts, Chart), ring.go
// (tier 0), read.go (window copies: Query, Latest, Held, Stats),
// persist.go (tier-1 load, flush, compaction), file.go (the tier-1 record
// format), series.go (one chart's rings and chunks), pack.go (sealed
// chunks).
package store
