// Package stats is the node's stats sampler, an actor. On every tick
// (Deps.Interval, a second) while the samples have a reader (Demand: a
// WebSocket update-stats subscriber, or a read of the latest sample in
// the last Warm), at the first tick of each minute, and when asked
// (SampleNow: a reader found the latest sample stale), it builds the stats
// payload of GET /api/stats from the node's counters and the answers of
// the peer, ledger and tunnel actors, and:
//
//   - publishes it (Deps.Published: GET /api/stats and the WebSocket's
//     stats-snapshot read the latest);
//   - sends it to the WebSocket hub as one update-stats message, the same
//     bytes for every subscriber (messages.StatsUpdate);
//   - publishes update-health on the event stream when the health status
//     (Deps.Health, the function GET /api/health answers with) changes
//     (checked every tick, sampled or not);
//   - once a minute keeps a sample in node.db ("stats:h:<unix minute>",
//     24 h kept, across restarts), which History reads for GET
//     /api/stats/historical.
//
// The drive figures (the data folder's size, a walk of every file in
// it, and its file system's space) are taken again every 10 s
// (driveEvery), not every sample: they move slowly.
//
// A sample asks three actors with a second's deadline each; ticks that
// come while a sample is still running are dropped, not queued, so a
// slow actor slows the payload's rate, never the sampler's mailbox.
//
// CPU and memory: every tunnel server and client runs inside this one
// process, so there is no per-tunnel CPU or memory to measure. Each
// tunnel child reports the node process's own figures (pid, CPU % over
// the last sample, RSS) marked "shared": true, next to its own
// connections and bytes, which are per tunnel.
package stats
