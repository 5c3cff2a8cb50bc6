package peer

import (
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/scheduler"

	"peerdns/messages"
	"peerdns/transport"
)

// Messages between the supervisor, its sessions and their goroutines.

// newConn: a dialer or the accept loop has a connection.
type newConn struct {
	conn transport.Conn
	addr string // dialed address, "" for inbound
	// path, via: how the connection reaches the peer when the maker
	// knows better than "direct" (reach.go): "punched" via the
	// introducer; other transports set their own ("tcp", "relayed" via
	// the relay).
	path, via string
	// quicRetry: made by a QUIC retry (quicretry.go), which waits for
	// its end.
	quicRetry bool
}

// endpointClosed: the endpoint's Accept reports it is closed.
type endpointClosed struct{}

// dialGaveUp: a dialer for an address learned second hand stopped (e:
// its entry, which another dialer may have replaced at addr since).
type dialGaveUp struct {
	addr, peer string
	e          *dialerEntry
}

// dialFailed: a dial attempt failed.
type dialFailed struct {
	addr, peer string
	err        error
}

// tick drives every timer of the family (tests send their own).
type tick struct {
	now time.Time
	// staleAfter is the silence that makes a peer silent now (0: the
	// session's configured StaleAfter)
	staleAfter time.Duration
	// interval is the ticker's period (0: work is due at its full
	// interval, see due)
	interval time.Duration
}

// due reports whether what is done every `every` on ticks of period
// tick is due at now, last done at last. A tick's time is the ticker's
// plus its goroutine's wake-up, so ticks come a period apart only give
// or take that: compared with every itself, about every other tick read
// a few microseconds short, and a 1 s ping went out every 1-2 s, which
// left a peer under load one late ping from silent. Half a tick of slack
// makes the work due on the tick it is meant for, whatever its interval.
func due(now, last time.Time, every, tick time.Duration) bool {
	return now.Sub(last) >= every-tick/2
}

// frame: the reader goroutine decoded a frame.
type frame struct{ m *messages.Envelope }

// connDown: the reader goroutine stopped; the connection is gone.
type connDown struct{ err error }

// sessionUp: the handshake completed both ways.
type sessionUp struct {
	pid    *actor.PID
	id     string
	hello  *messages.Hello
	remote string
	out    bool
}

// sessionIssue: a session refused or was refused, or broke the protocol.
type sessionIssue struct {
	id, kind, reason string
}

// peersLearned: a peer told us whom it knows.
type peersLearned struct {
	from  string
	peers []messages.PeerInfo
}

// redeemJoin asks the supervisor to admit a joiner (answered with redeemResult).
type redeemJoin struct {
	peer string
	req  *messages.JoinRequest
}

// redeemResult answers redeemJoin: exactly one of accept and refuse is set.
type redeemResult struct {
	accept *messages.Accept
	refuse *messages.Refuse
}

// admitNeighbour asks the supervisor whether a peer that dialed us may
// join the active view (answered with admitResult).
type admitNeighbour struct {
	peer       string
	neighbours int // the priority its hello carried
}

// admitResult answers admitNeighbour: when not ok, sample goes with the
// refusal.
type admitResult struct {
	ok     bool
	sample []messages.PeerInfo
}

// viewFull: a peer we dialed refused us because its view is full, and
// named other peers in sample.
type viewFull struct {
	id     string
	sample []messages.PeerInfo
}

// inviteRefused: the inviter refused the join request this session
// carried, with the code and reason it sent (clipped).
type inviteRefused struct{ peer, code, reason string }

// joined: the session's invite was accepted and the ledger joined.
type joined struct{ network, root string }

// pushOps: live ops for the session's peer.
type pushOps struct{ ops []*messages.Op }

// askAgain: our ledger restarted; ask the peer for what it lacks (a
// want), as after a gap.
type askAgain struct{}

// sendPeers: the supervisor's current peer list, to share with the peer.
type sendPeers struct{ peers []messages.PeerInfo }

// sessionStats is the per-peer state the supervisor shows in diagnostics.
type sessionStats struct {
	lastSeen time.Time
	rtt      time.Duration
	lazy     bool // we announce to the peer
	pruned   bool // the peer announces to us
	sessionCounts
}

// sessionCounts are a session's counters, which only grow: the
// diagnostics show them summed over every session since start.
type sessionCounts struct {
	opsSent     int64
	opsReceived int64
	opsDup      int64 // received ops the ledger already had
	// ops of opsSent sent because the peer's vector, a want or a graft
	// showed it lacked them (the rest were pushed as our ledger applied
	// them)
	opsRepaired int64
	opsGrafted  int64 // of opsRepaired: asked for by a graft
	// signatures of received ops checked here, and taken on another
	// session's check (applied.Checked)
	sigChecks, sigReused int64
	wants                int64 // gap repairs we asked for
	// digests the peer sent that matched our vector, and that did not
	// (answered with our full vector)
	digestsEqual, digestsDiffer int64
	// Plumtree: op ids announced to the peer, ids grafted from it, and
	// times we pruned the link (session_lazy.go)
	ihaveSent, grafts, prunes int64
	// announced or grafted ids, and received ops' keys, naming a writer
	// by a short id we could not resolve
	idsUnknown int64
}

// add adds o to c.
func (c *sessionCounts) add(o sessionCounts) {
	c.opsSent += o.opsSent
	c.opsReceived += o.opsReceived
	c.opsDup += o.opsDup
	c.opsRepaired += o.opsRepaired
	c.opsGrafted += o.opsGrafted
	c.sigChecks += o.sigChecks
	c.sigReused += o.sigReused
	c.wants += o.wants
	c.digestsEqual += o.digestsEqual
	c.digestsDiffer += o.digestsDiffer
	c.ihaveSent += o.ihaveSent
	c.grafts += o.grafts
	c.prunes += o.prunes
	c.idsUnknown += o.idsUnknown
}

// statsReport carries a session's stats to the supervisor (on every tick).
type statsReport struct {
	pid *actor.PID
	id  string
	st  sessionStats
}

// announceTunnels: Mesh.Announce changed our set; the supervisor sends
// the newest set to every session.
type announceTunnels struct{}

// sendTunnels: our announced set for the session's peer (sorted, shared:
// never modified).
type sendTunnels struct{ ids []string }

// tunnelsAnnounced: the peer announced ids (already validated), or sent
// an announcement that failed validation (refused says why).
type tunnelsAnnounced struct {
	pid     *actor.PID
	id      string
	ids     []string
	refused string
}

// peerSilent: a session's peer went silent (nothing heard for
// StaleAfter) or was heard again.
type peerSilent struct {
	pid    *actor.PID
	id     string
	silent bool
}

// sendLeave: the supervisor drops the session's peer from its active
// view; the session sends the leave and closes.
type sendLeave struct{ sample []messages.PeerInfo }

// connReplaced: the peer closed a session's connection as replaced by
// another (transport.ReplacedByPeer); the session waits for the
// supervisor to stop it, so the entry is marked before its Terminated.
type connReplaced struct {
	pid *actor.PID
	id  string
}

// sessionEnded: a session that ended without a leave; sent to ourselves
// so that the messages it sent before stopping are handled first.
type sessionEnded struct{ pid *actor.PID }

// peerLeft: the session's peer dropped us from its active view.
type peerLeft struct {
	pid    *actor.PID
	id     string
	sample []messages.PeerInfo
}

// overlayFrame: an overlay frame the supervisor handles (view.go,
// heartbeat.go).
type overlayFrame struct {
	from string
	pid  *actor.PID
	m    *messages.Envelope
}

// frameTo asks the supervisor to send env on peer's session as it is
// (tests play a neighbour that sends bad overlay frames).
type frameTo struct {
	peer string
	env  *messages.Envelope
}

// sendLater sends msg to pid after d, from sys's root context
// (protoactor's scheduler). Nothing cancels it: the receiver checks on
// arrival whether the message still means anything.
func sendLater(sys *actor.ActorSystem, pid *actor.PID, d time.Duration, msg any) {
	scheduler.NewTimerScheduler(sys.Root).SendOnce(d, pid, msg)
}
