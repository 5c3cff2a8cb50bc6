// Package peer is the peer network's actor family: a peers supervisor
// (Actor) and one session actor per connected peer.
//
// The supervisor owns: the set of sessions, the dialers (bootstrap
// addresses, the join invite's addresses, known peers saved in the node
// store, peers learned by peer exchange: writers of the network only, see
// learn in addressbook.go), invite creation and redemption,
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
// # Paths
//
// A connection may run over QUIC, TCP or a relay (transport.PathOf); the
// session does not care. The supervisor dials a known peer that stays
// unconnected through a connected peer (relay.go), keeps dialing a
// relayed peer directly, and lets a better path replace a worse one for
// the same peer (QUIC over TCP over relayed) before the lower-id rule
// applies, draining the replaced connection's open streams.
//
// # Failure detection
//
// Every session pings its peer each PingInterval (1 s) and notes every
// frame it hears; both ends ping, so only the first ping and every tenth
// after it ask for a pong (the round trip the diagnostics show). A peer
// not heard from for StaleAfter (2.5 s; 3.5 s, StaleAfterSparse, once we
// know more than R writers) is silent: it stops counting in the
// connected set the ledger's quorum uses (the connection itself stays
// up; QUIC's own idle timeout, 20 s, closes it if the silence lasts), so
// a frozen or unplugged peer leaves activePeers 2.5 s after its last
// frame, at that instant and not at the next tick (silence.go). Its next
// frame brings it back at once. Silence is counted only while we read: when
// our ledger is behind, the session's reader stops at its ops credits
// and what the peer sent (its pings too) waits unread, so the time spent
// waiting counts as heard (session_io.go). Without that, a node whose
// ledger fell behind in a burst suspected every neighbour that kept
// sending, and the suspicions, refutations and re-evaluations that
// followed made every ledger fall further behind. Damping: a peer that went silent 3 times within
// 30 s, once heard again, counts only after 1 s more (the connection is
// up throughout), so a flapping link moves the quorum at most once a
// second. A peer that begins a frame and does not finish it (a length
// prefix or part of a body, then nothing, its connection kept alive) is
// the transport's to catch: the connection closes once the frame's
// deadline passes (transport.DefaultFrameTimeout, 30 s plus the frame's
// size at 64 kbit/s), and with it the session and its view slot; the
// diagnostics count it (stalledSessions, issue kind "stalled"). A peer
// that sends no whole frame at all for CloseSilentAfter (3 min) while
// its connection stays alive (QUIC keep-alives are answered by its QUIC
// stack whatever runs above it) is closed and counted the same way;
// that is longer than the slowest frame the transport lets through
// (158 s for 1 MiB), behind which the peer's pings wait.
//
// # Overlay
//
// Beyond ActiveView writers a node keeps a bounded active view of
// neighbours (view.go), learns peers by shuffling small random samples,
// counts writers it has no session with as active while their rare
// signed heartbeats keep arriving over the overlay (heartbeat.go) and no
// unrefuted signed suspicion of them is held (suspicion.go: the
// neighbours of a writer that goes silent or fails sign one and flood
// it; a live writer refutes it with a fresh heartbeat), and spreads ops
// along an eager spanning tree with lazy id announcements on the other
// links (session_lazy.go). Up to ActiveView writers every node keeps a
// session with every other and all of this reduces to the full mesh.
//
// # Reach
//
// Peers behind NATs find each other through the peers they share (see
// reach.go): hellos say where each side sees the other, an observed
// address two peers agree on is advertised, a peer introduces two of its
// peers that cannot dial each other and both punch from their one UDP
// socket, and a probe through a peer tells what NAT the node is behind.
//
// It must never: apply ops itself or decide whether an op is valid (the
// ledger does), or mutate another actor's state.
package peer
