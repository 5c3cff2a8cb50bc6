package peer

import (
	"context"
	"errors"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"peerdns/internal/applied"
	"peerdns/internal/stack"
	"peerdns/messages"
	"peerdns/transport"
)

// sessionConfig is what the supervisor gives a session at spawn.
type sessionConfig struct {
	conn transport.Conn
	// superseded is set by the supervisor before it stops the session
	// for another connection it kept with the peer: the session then
	// closes its own as replaced (transport.ReasonReplaced), which tells
	// the peer no failure happened. A flag, not a message: a Stop
	// overtakes messages, and a close made before it would reach the
	// session's reader first and read as a drop.
	superseded *atomic.Bool
	ledger     *actor.PID
	log        *slog.Logger
	now        func() time.Time
	// hello is our hello, a copy owned by the session.
	hello messages.Hello
	// joinInviter/joinNetwork are set while we are joining and this
	// connection goes to the inviter: we accept it on the invite's word.
	joinInviter, joinNetwork string

	syncInterval, pingInterval, handshakeTimeout, askTimeout time.Duration
	staleAfter                                               time.Duration
	closeSilentAfter                                         time.Duration // Deps.CloseSilentAfter
	batch                                                    int           // ops per GetOpsSince / frame
	queueSize                                                int           // outbound frames buffered before live ops are dropped
	mesh                                                     *Mesh
	applied                                                  *applied.Vector
	checked                                                  *applied.Checked // ops checked, not yet applied: shared by the sessions
	// lazyTimeout and grafts: Plumtree (session_lazy.go).
	lazyTimeout time.Duration
	grafts      *graftBook
	prune       bool       // ask the peer to announce, not push, from the start: we have EagerLinks feeds (feeds)
	lag         *ledgerLag // shared by the sessions: sizes repairs' freshness window
}

// session owns one connection. Fields are touched only from Receive,
// except out/done which the writer goroutine reads.
type session struct {
	cfg      sessionConfig
	peer     string
	behavior actor.Behavior
	out      chan outItem
	done     chan struct{}
	started  time.Time

	sentAccept, gotAccept, joinPending, closing bool
	silent                                      bool // told the supervisor the peer is silent
	silentLook                                  bool // a silentDue is scheduled (silence.go)
	peerHello                                   *messages.Hello
	stash                                       []*messages.Envelope

	peerVV     messages.VersionVector // what the peer is known to hold
	peerLinks  map[string]bool        // whom the peer said it is connected to
	sentVV     messages.VersionVector // highest seq sent per writer
	sentAt     map[string]time.Time   // when sentVV[writer] was last raised
	lastPeerVV messages.VersionVector // the peer's previous periodic vector
	syncing    bool
	pendingVV  messages.VersionVector
	// what asked for the running sync and the pending one, and the
	// writers whose fresh ops they send all the same (startSync)
	syncKind, pendingKind     syncKind
	syncExempt, pendingExempt map[string]bool
	syncOnly, pendingOnly     bool // the sync sends its exempt writers' ops alone (a graft's)
	havePending               bool
	lastVV                    time.Time
	// peerDigest is the peer's last digest, digestAt when we last sent
	// ours (session_sync.go: an idle link skips digests that would match).
	peerDigest []byte
	digestAt   time.Time
	lastPing   time.Time
	pings      int // pings sent; every pongEvery-th asks for a pong
	stats      sessionStats
	dropped    int
	// credits bound the ops frames handed to the ledger and not answered
	// yet: the reader takes one per ops frame and ApplyOps' reply gives it
	// back, so a peer sending faster than our ledger commits is slowed by
	// QUIC flow control instead of filling our mailbox.
	credits chan struct{}
	stall   readStall // the reader waiting for credits (session_io.go)
	// up is closed once the session is established: until then the
	// reader hands over no more than one frame that is not part of the
	// handshake (handshakeKind).
	up chan struct{}

	// stopStreams ends serveStreams (set once established).
	stopStreams context.CancelFunc
	// ownTunnels is our announced set as last handed to this session;
	// tunnelsDirty means the peer has not been sent it yet (the queue was
	// full), retried on every tick: with replace semantics a lost
	// announcement would leave the peer wrong until the next change.
	ownTunnels   []string
	tunnelsDirty bool
	// lz is the link's Plumtree state (session_lazy.go).
	lz lazyState
	// owed: ops the peer's vector holds and we lack (session_owed.go).
	owed owedState
}

// opsCredits is how many ops frames may wait for the ledger per peer.
const opsCredits = 8

func sessionProps(cfg sessionConfig) *actor.Props {
	return actor.PropsFromProducer(func() actor.Actor {
		s := &session{cfg: cfg, peer: cfg.conn.PeerID()}
		s.lz.pruned = cfg.prune && cfg.applied != nil // told the peer once established; reported as such from the start
		s.behavior = actor.NewBehavior()
		s.behavior.Become(s.handshaking)
		return s
	}, actor.WithDispatcher(stack.Actors))
}

// Receive dispatches to the current behaviour (handshaking → established).
func (s *session) Receive(c actor.Context) {
	switch m := c.Message().(type) {
	case *actor.Started:
		s.start(c)
		return
	case *actor.Stopping:
		if s.stopStreams != nil {
			s.stopStreams()
		}
		close(s.done)
		reason := "session stopped"
		if s.cfg.superseded.Load() {
			reason = transport.ReasonReplaced
		}
		_ = s.cfg.conn.Close(reason)
		return
	case *connDown:
		if transport.ReplacedByPeer(m.err) {
			// The peer kept another connection with us in this one's
			// place: no failure. The supervisor marks our entry so and
			// stops us; were we to stop ourselves, our Terminated would
			// reach it before any message saying why.
			s.closing = true
			s.cfg.log.Debug("peer kept another connection", "peer", short(s.peer))
			c.Send(c.Parent(), &connReplaced{pid: c.Self(), id: s.peer})
			return
		}
		if errors.Is(m.err, transport.ErrFrameStalled) {
			// The transport closed a peer that began a frame and did
			// not finish it (transport.DefaultFrameTimeout): its session
			// and view slot go, and the diagnostics count it.
			c.Send(c.Parent(), &sessionIssue{id: s.peer, kind: "stalled", reason: m.err.Error()})
		}
		if !s.closing {
			s.cfg.log.Info("peer disconnected", "peer", short(s.peer), "reason", errText(m.err))
		}
		c.Stop(c.Self())
		return
	case *frame:
		s.stats.lastSeen = s.cfg.now()
		if s.silent {
			s.silent = false
			c.Send(c.Parent(), &peerSilent{pid: c.Self(), id: s.peer})
		}
		if s.closing {
			if m.m.Kind == messages.KindOps {
				s.releaseCredit()
			}
			return
		}
		switch m.m.Kind {
		case messages.KindPing:
			if !m.m.Ping.NoPong {
				s.enqueue(&messages.Envelope{Kind: messages.KindPong, Ping: m.m.Ping})
			}
			return
		case messages.KindPong:
			s.stats.rtt = time.Duration(time.Now().UnixNano() - m.m.Ping.SentUnixNano)
			return
		case messages.KindRefuse:
			r := m.m.Refuse
			code, reason := clip(r.Code, 64), clip(r.Reason, 256) // the peer chose these
			if code == messages.RefuseViewFull && s.cfg.hello.Join == nil {
				// Not a fault: the peer's view is full; we try elsewhere.
				s.cfg.log.Debug("peer's active view is full", "peer", short(s.peer))
				c.Send(c.Parent(), &viewFull{id: s.peer, sample: r.Sample})
				s.closing = true
				_ = s.cfg.conn.Close("refused")
				return
			}
			s.cfg.log.Warn("peer refused the connection", "peer", short(s.peer), "code", code, "reason", reason)
			c.Send(c.Parent(), &sessionIssue{id: s.peer, kind: "refused-by-peer", reason: code + ": " + reason})
			if s.cfg.hello.Join != nil {
				c.Send(c.Parent(), &inviteRefused{peer: s.peer, code: code, reason: reason})
			}
			s.closing = true
			_ = s.cfg.conn.Close("refused")
			return
		}
	}
	if s.closing {
		return
	}
	s.behavior.Receive(c)
}

// refuse tells the peer why, logs it and closes the connection.
func (s *session) refuse(c actor.Context, code, reason string) {
	s.cfg.log.Warn("refusing peer", "peer", short(s.peer), "remote", s.cfg.conn.RemoteAddr().String(), "code", code, "reason", reason)
	c.Send(c.Parent(), &sessionIssue{id: s.peer, kind: "refused", reason: code + ": " + reason})
	s.closing = true
	select {
	case s.out <- outItem{env: &messages.Envelope{Kind: messages.KindRefuse, Refuse: &messages.Refuse{Code: code, Reason: reason}}, closeAfter: code}:
	default:
		_ = s.cfg.conn.Close(code)
	}
}

// refuseQuiet refuses as refuse does, for a reason that is no fault of
// the peer's (our view is full): nothing is logged above debug or
// reported as a connection issue.
func (s *session) refuseQuiet(code, reason string, sample []messages.PeerInfo) {
	s.cfg.log.Debug("refusing peer", "peer", short(s.peer), "code", code, "reason", reason)
	s.closing = true
	select {
	case s.out <- outItem{env: &messages.Envelope{Kind: messages.KindRefuse, Refuse: &messages.Refuse{Code: code, Reason: reason, Sample: sample}}, closeAfter: code}:
	default:
		_ = s.cfg.conn.Close(code)
	}
}

// protocolError closes a connection whose peer broke the protocol.
func (s *session) protocolError(c actor.Context, why string) {
	s.cfg.log.Warn("closing peer connection: protocol violation", "peer", short(s.peer), "reason", why)
	c.Send(c.Parent(), &sessionIssue{id: s.peer, kind: "protocol", reason: why})
	s.closing = true
	_ = s.cfg.conn.Close(why)
}

func copyVV(v messages.VersionVector) messages.VersionVector {
	out := make(messages.VersionVector, len(v))
	for k, n := range v {
		out[k] = n
	}
	return out
}

// clip bounds a peer-supplied string before it is logged or kept.
func clip(s string, n int) string {
	if len(s) > n {
		return s[:n] + "…"
	}
	return s
}

func short(id string) string {
	if len(id) > 16 {
		return id[:16]
	}
	return id
}

func errText(err error) string {
	if err == nil {
		return "none"
	}
	return err.Error()
}
