// Package peer is the peer network's actor family: a peers supervisor
// (Actor) and one session actor per connected peer.
//
// The supervisor owns: the set of sessions, the dialers (bootstrap
// addresses, the join invite's addresses, known peers saved in the node
// store, peers learned by peer exchange), invite creation and redemption,
// the network membership it learned from the ledger, and the diagnostics
// counters. A join that no retry can save (the invite is malformed or
// expired, or the inviter refused it for good) is reported once through
// Deps.Fatal; an inviter that cannot be reached is retried. It tells the
// ledger which writers are connected (messages.PeerSetChanged) and
// publishes the update-peers hint whenever that set changes. It keeps the
// Mesh (Deps.Mesh) that the tunnel layer reads: established connections
// and the tunnel ids their peers announce, published as snapshots.
//
// A session owns one transport.Conn: the handshake (hello, then accept or
// refuse with a reason), the replication session with that peer (version
// vector exchange on connect and every SyncInterval, live push of ops
// published as messages.OpsApplied, received ops handed to the ledger
// with ApplyOps), tunnel announcements both ways, handing the streams the
// peer opens to the Mesh's handler, and the peer's last-seen state. It
// reads and writes the connection in two goroutines of its own (plus one
// accepting streams once established) so Receive never blocks on the
// network; a session that fails is stopped, never restarted: its peer
// redials.
//
// It must never: apply ops itself or decide whether an op is valid (the
// ledger does), or mutate another actor's state.
package peer
