package peer

import (
	"fmt"
	"log/slog"
	"math"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"peerdns/messages"
	"peerdns/transport"
)

// sessionConfig is what the supervisor gives a session at spawn.
type sessionConfig struct {
	conn   transport.Conn
	ledger *actor.PID
	log    *slog.Logger
	now    func() time.Time
	// hello is our hello, a copy owned by the session.
	hello messages.Hello
	// joinInviter/joinNetwork are set while we are joining and this
	// connection goes to the inviter: we accept it on the invite's word.
	joinInviter, joinNetwork string

	syncInterval, pingInterval, handshakeTimeout, askTimeout time.Duration
	batch                                                    int // ops per GetOpsSince / frame
	queueSize                                                int // outbound frames buffered before live ops are dropped
}

// outItem is one frame for the writer goroutine. closeAfter, when set,
// makes the writer close the connection after this frame (a refusal).
type outItem struct {
	env        *messages.Envelope
	closeAfter string
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
	peerHello                                   *messages.Hello
	stash                                       []*messages.Envelope

	peerVV      messages.VersionVector // what the peer is known to hold
	peerLinks   map[string]bool        // whom the peer said it is connected to
	sentVV      messages.VersionVector // highest seq sent per writer
	sentAt      map[string]time.Time   // when sentVV[writer] was last raised
	lastPeerVV  messages.VersionVector // the peer's previous periodic vector
	syncing     bool
	pendingVV   messages.VersionVector
	havePending bool
	lastVV      time.Time
	lastPing    time.Time
	stats       sessionStats
	dropped     int
	// credits bound the ops frames handed to the ledger and not answered
	// yet: the reader takes one per ops frame and ApplyOps' reply gives it
	// back, so a peer sending faster than our ledger commits is slowed by
	// QUIC flow control instead of filling our mailbox.
	credits chan struct{}
}

// opsCredits is how many ops frames may wait for the ledger per peer.
const opsCredits = 8

// maxStash bounds frames held back during the handshake; more are
// dropped (the next version-vector exchange repairs what was lost).
const maxStash = 256

// maxOpsFrameBytes keeps an ops frame well under transport.MaxFrameSize.
const maxOpsFrameBytes = 512 << 10

func sessionProps(cfg sessionConfig) *actor.Props {
	return actor.PropsFromProducer(func() actor.Actor {
		s := &session{cfg: cfg, peer: cfg.conn.PeerID()}
		s.behavior = actor.NewBehavior()
		s.behavior.Become(s.handshaking)
		return s
	})
}

// Receive dispatches to the current behaviour (handshaking → established).
func (s *session) Receive(c actor.Context) {
	switch m := c.Message().(type) {
	case *actor.Started:
		s.start(c)
		return
	case *actor.Stopping:
		close(s.done)
		_ = s.cfg.conn.Close("session stopped")
		return
	case *connDown:
		if !s.closing {
			s.cfg.log.Info("peer disconnected", "peer", short(s.peer), "reason", errText(m.err))
		}
		c.Stop(c.Self())
		return
	case *frame:
		s.stats.lastSeen = s.cfg.now()
		if s.closing {
			if m.m.Kind == messages.KindOps {
				s.releaseCredit()
			}
			return
		}
		switch m.m.Kind {
		case messages.KindPing:
			s.enqueue(&messages.Envelope{Kind: messages.KindPong, Ping: m.m.Ping})
			return
		case messages.KindPong:
			s.stats.rtt = time.Duration(time.Now().UnixNano() - m.m.Ping.SentUnixNano)
			return
		case messages.KindRefuse:
			r := m.m.Refuse
			code, reason := clip(r.Code, 64), clip(r.Reason, 256) // the peer chose these
			s.cfg.log.Warn("peer refused the connection", "peer", short(s.peer), "code", code, "reason", reason)
			c.Send(c.Parent(), &sessionIssue{id: s.peer, kind: "refused-by-peer", reason: code + ": " + reason})
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

func (s *session) start(c actor.Context) {
	s.started = s.cfg.now()
	s.stats.lastSeen = s.started
	s.out = make(chan outItem, s.cfg.queueSize)
	s.done = make(chan struct{})
	s.credits = make(chan struct{}, opsCredits)
	root, self, done, credits := c.ActorSystem().Root, c.Self(), s.done, s.credits
	conn := s.cfg.conn
	go func() {
		for {
			m, err := conn.Recv()
			select {
			case <-done:
				return // the session stopped and closed the connection
			default:
			}
			if err != nil {
				root.Send(self, &connDown{err: err})
				return
			}
			if m.Kind == messages.KindOps {
				select {
				case credits <- struct{}{}:
				case <-done:
					return
				}
			}
			root.Send(self, &frame{m: m})
		}
	}()
	go writeLoop(conn, s.out, s.done)
	h := s.cfg.hello
	s.enqueue(&messages.Envelope{Kind: messages.KindHello, Hello: &h})
}

// writeLoop writes queued frames until the session stops or the
// connection dies. Writes can block on flow control; that is why they
// happen here and not in Receive.
func writeLoop(conn transport.Conn, out <-chan outItem, done <-chan struct{}) {
	for {
		select {
		case it := <-out:
			if err := conn.Send(it.env); err != nil {
				_ = conn.Close("write failed")
				return
			}
			if it.closeAfter != "" {
				// Give the peer a moment to read the refusal and hang up
				// itself; closing at once could discard the frame.
				t := time.NewTimer(2 * time.Second)
				select {
				case <-conn.Done():
				case <-done:
				case <-t.C:
				}
				t.Stop()
				_ = conn.Close(it.closeAfter)
				return
			}
		case <-done:
			return
		case <-conn.Done():
			return
		}
	}
}

// enqueue hands a frame to the writer; false when the queue is full.
func (s *session) enqueue(m *messages.Envelope) bool {
	select {
	case s.out <- outItem{env: m}:
		return true
	default:
		s.dropped++
		return false
	}
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

// protocolError closes a connection whose peer broke the protocol.
func (s *session) protocolError(c actor.Context, why string) {
	s.cfg.log.Warn("closing peer connection: protocol violation", "peer", short(s.peer), "reason", why)
	c.Send(c.Parent(), &sessionIssue{id: s.peer, kind: "protocol", reason: why})
	s.closing = true
	_ = s.cfg.conn.Close(why)
}

// --- handshaking ---

func (s *session) handshaking(c actor.Context) {
	switch m := c.Message().(type) {
	case *frame:
		switch m.m.Kind {
		case messages.KindHello:
			s.onHello(c, m.m.Hello)
		case messages.KindAccept:
			s.onAccept(c, m.m.Accept)
		default:
			// The peer finished its side first; keep its frames for later.
			if len(s.stash) < maxStash {
				s.stash = append(s.stash, m.m)
			} else if m.m.Kind == messages.KindOps {
				s.releaseCredit()
			}
		}
	case *redeemResult:
		if m.refuse != nil {
			s.refuse(c, m.refuse.Code, m.refuse.Reason)
			return
		}
		s.sendAccept(c, m.accept)
	case *tick:
		if m.now.Sub(s.started) > s.cfg.handshakeTimeout {
			s.cfg.log.Warn("closing peer connection: handshake timed out", "peer", short(s.peer))
			c.Send(c.Parent(), &sessionIssue{id: s.peer, kind: "handshake", reason: "handshake timed out"})
			s.closing = true
			_ = s.cfg.conn.Close("handshake timeout")
		}
	}
}

func (s *session) onHello(c actor.Context, h *messages.Hello) {
	if s.peerHello != nil {
		s.protocolError(c, "second hello")
		return
	}
	if h.ID != s.peer {
		s.refuse(c, messages.RefuseInternal, "hello id does not match the TLS key")
		return
	}
	s.peerHello = h
	ours := s.cfg.hello.Network
	switch {
	case h.Join != nil:
		if ours == "" {
			s.refuse(c, messages.RefuseNoNetwork, "this node has not joined a network yet")
			return
		}
		c.Request(c.Parent(), &redeemJoin{peer: s.peer, req: h.Join})
	case ours == "":
		if s.cfg.joinInviter == s.peer && h.Network == s.cfg.joinNetwork {
			s.sendAccept(c, &messages.Accept{})
			return
		}
		s.refuse(c, messages.RefuseNoNetwork, "this node has not joined its network yet")
	case h.Network == "":
		s.refuse(c, messages.RefuseNoNetwork, "peer belongs to no network and brought no invite")
	case h.Network != ours:
		s.refuse(c, messages.RefuseForeignNetwork, "peer belongs to another network")
	default:
		f := c.RequestFuture(s.cfg.ledger, &messages.IsWriter{ID: s.peer}, s.cfg.askTimeout)
		c.ReenterAfter(f, func(res any, err error) {
			if s.closing {
				return
			}
			r, ok := res.(*messages.IsWriterReply)
			switch {
			case err != nil || !ok:
				s.refuse(c, messages.RefuseInternal, fmt.Sprintf("cannot check writers: %v", errText(err)))
			case !r.OK:
				s.refuse(c, messages.RefuseNotWriter, "peer is not a writer of this network")
			default:
				s.sendAccept(c, &messages.Accept{})
			}
		})
	}
}

func (s *session) sendAccept(c actor.Context, a *messages.Accept) {
	if s.closing || s.sentAccept {
		return
	}
	s.enqueue(&messages.Envelope{Kind: messages.KindAccept, Accept: a})
	s.sentAccept = true
	s.maybeEstablish(c)
}

func (s *session) onAccept(c actor.Context, a *messages.Accept) {
	if s.gotAccept {
		s.protocolError(c, "second accept")
		return
	}
	s.gotAccept = true
	if a.Network == "" || s.cfg.hello.Network != "" {
		s.maybeEstablish(c)
		return
	}
	// Our invite was accepted: join the network before replicating.
	if s.cfg.joinInviter != s.peer || a.Network != s.cfg.joinNetwork {
		s.protocolError(c, "unexpected network in accept")
		return
	}
	s.joinPending = true
	f := c.RequestFuture(s.cfg.ledger, &messages.JoinNetwork{Key: a.Network, Root: a.Root}, s.cfg.askTimeout)
	c.ReenterAfter(f, func(res any, err error) {
		s.joinPending = false
		r, ok := res.(*messages.JoinNetworkReply)
		if err == nil && ok && r.Err != nil {
			err = r.Err
		} else if err == nil && !ok {
			err = fmt.Errorf("unexpected reply %T", res)
		}
		if err != nil {
			s.cfg.log.Error("joining the network failed", "err", err)
			c.Send(c.Parent(), &sessionIssue{id: s.peer, kind: "join", reason: "ledger refused to join: " + err.Error()})
			s.closing = true
			_ = s.cfg.conn.Close("join failed")
			return
		}
		s.cfg.hello.Network, s.cfg.hello.Root = a.Network, a.Root
		s.cfg.log.Info("joined network", "inviter", short(s.peer), "root", short(a.Root))
		c.Send(c.Parent(), &joined{network: a.Network, root: a.Root})
		s.maybeEstablish(c)
	})
}

func (s *session) maybeEstablish(c actor.Context) {
	if !s.sentAccept || !s.gotAccept || s.joinPending || s.closing {
		return
	}
	s.behavior.Become(s.established)
	c.Send(c.Parent(), &sessionUp{pid: c.Self(), id: s.peer, hello: s.peerHello, remote: s.cfg.conn.RemoteAddr().String(), out: s.cfg.conn.Outbound()})
	s.peerVV = messages.VersionVector{}
	s.sentVV, s.sentAt, s.lastPeerVV = messages.VersionVector{}, map[string]time.Time{}, messages.VersionVector{}
	s.sendVV(c, messages.KindVV)
	stash := s.stash
	s.stash = nil
	for _, m := range stash {
		s.established(&replayContext{Context: c, msg: &frame{m: m}})
	}
}

// replayContext replays a stashed frame through the established behaviour.
type replayContext struct {
	actor.Context
	msg any
}

func (r *replayContext) Message() any { return r.msg }

// --- established ---

func (s *session) established(c actor.Context) {
	switch m := c.Message().(type) {
	case *frame:
		switch m.m.Kind {
		case messages.KindVV:
			// A periodic vector may predate ops we sent a moment ago that
			// are still on their way or in the peer's ledger queue: do not
			// send those again (a gap makes the peer send "want" instead).
			// Ops of writers the peer is connected to are that writer's
			// to send; answering for them too would send each op n-1 times.
			s.peerVV = copyVV(m.m.VV)
			base := copyVV(m.m.VV)
			now := s.cfg.now()
			for w, n := range s.sentVV {
				// In flight: sent within the last interval, or the peer's
				// ledger is still working through them (its vector moved).
				// Resend only what stalled for a whole interval.
				moving := m.m.VV[w] > s.lastPeerVV[w]
				if n > base[w] && (moving || now.Sub(s.sentAt[w]) < s.cfg.syncInterval) {
					base[w] = n
				}
			}
			s.lastPeerVV = copyVV(m.m.VV)
			for w := range s.peerLinks {
				if w != s.cfg.hello.ID {
					base[w] = math.MaxUint64
				}
			}
			s.startSync(c, base)
		case messages.KindWant:
			s.peerVV = copyVV(m.m.VV)
			s.startSync(c, m.m.VV)
		case messages.KindOps:
			s.onOps(c, m.m.Ops)
		case messages.KindPeers:
			// The list is the peer's connected set (minus us): remember it
			// so live ops their writer pushes to the peer are not relayed.
			s.peerLinks = make(map[string]bool, len(m.m.Peers))
			for _, p := range m.m.Peers {
				s.peerLinks[p.ID] = true
			}
			c.Send(c.Parent(), &peersLearned{from: s.peer, peers: m.m.Peers})
		default:
			s.protocolError(c, "unexpected "+m.m.Kind+" after handshake")
		}
	case *pushOps:
		s.push(m.ops)
	case *sendPeers:
		var ps []messages.PeerInfo
		for _, p := range m.peers {
			if p.ID != s.peer {
				ps = append(ps, p)
			}
		}
		if len(ps) > 0 {
			s.enqueue(&messages.Envelope{Kind: messages.KindPeers, Peers: ps})
		}
	case *tick:
		if m.now.Sub(s.lastVV) >= s.cfg.syncInterval {
			s.sendVV(c, messages.KindVV)
		}
		if m.now.Sub(s.lastPing) >= s.cfg.pingInterval {
			s.lastPing = m.now
			s.enqueue(&messages.Envelope{Kind: messages.KindPing, Ping: &messages.Ping{SentUnixNano: time.Now().UnixNano()}})
		}
		c.Send(c.Parent(), &statsReport{id: s.peer, st: s.stats})
	}
}

// sendVV sends our version vector as kind (vv: periodic, want: after a
// gap); the peer answers with what we lack.
func (s *session) sendVV(c actor.Context, kind string) {
	s.lastVV = s.cfg.now()
	f := c.RequestFuture(s.cfg.ledger, &messages.GetVersionVector{}, s.cfg.askTimeout)
	c.ReenterAfter(f, func(res any, err error) {
		r, ok := res.(*messages.GetVersionVectorReply)
		if err != nil || !ok {
			s.cfg.log.Warn("version vector unavailable", "err", errText(err))
			return
		}
		if !s.closing {
			s.enqueue(&messages.Envelope{Kind: kind, VV: r.VV})
		}
	})
}

// startSync sends the peer every op it lacks according to vv, in
// batches; a sync already running picks up the newest vv when it ends.
func (s *session) startSync(c actor.Context, vv messages.VersionVector) {
	if s.syncing {
		s.pendingVV, s.havePending = copyVV(vv), true
		return
	}
	s.syncing = true
	s.syncFrom(c, copyVV(vv))
}

func (s *session) syncFrom(c actor.Context, vv messages.VersionVector) {
	f := c.RequestFuture(s.cfg.ledger, &messages.GetOpsSince{VV: vv, Max: s.cfg.batch}, s.cfg.askTimeout)
	c.ReenterAfter(f, func(res any, err error) {
		r, ok := res.(*messages.GetOpsSinceReply)
		if err != nil || !ok || s.closing {
			if err != nil {
				s.cfg.log.Warn("ops unavailable for sync", "peer", short(s.peer), "err", err)
			}
			s.syncing = false
			return
		}
		sent := s.sendOps(r.Ops)
		for _, op := range r.Ops {
			if op.Seq > vv[op.Writer] {
				vv[op.Writer] = op.Seq
			}
		}
		if sent && len(r.Ops) == s.cfg.batch && s.cfg.batch > 0 {
			s.syncFrom(c, vv)
			return
		}
		s.syncing = false
		if s.havePending {
			s.havePending = false
			s.startSync(c, s.pendingVV)
		}
	})
}

// sendOps queues ops in frames of bounded size; false if the queue filled
// (the rest comes with the next version-vector exchange).
func (s *session) sendOps(ops []*messages.Op) bool {
	var batch []*messages.Op
	size := 0
	flush := func() bool {
		if len(batch) == 0 {
			return true
		}
		ok := s.enqueue(&messages.Envelope{Kind: messages.KindOps, Ops: batch})
		if ok {
			s.stats.opsSent += int64(len(batch))
			now := s.cfg.now()
			for _, op := range batch {
				if op.Seq > s.peerVV[op.Writer] {
					s.peerVV[op.Writer] = op.Seq
				}
				if op.Seq > s.sentVV[op.Writer] {
					s.sentVV[op.Writer] = op.Seq
					s.sentAt[op.Writer] = now
				}
			}
		}
		batch, size = nil, 0
		return ok
	}
	for _, op := range ops {
		n := opSize(op)
		if len(batch) > 0 && (size+n > maxOpsFrameBytes || len(batch) >= s.cfg.batch) {
			if !flush() {
				return false
			}
		}
		batch = append(batch, op)
		size += n
	}
	return flush()
}

// opSize estimates an op's encoded size (fields plus CBOR overhead).
func opSize(op *messages.Op) int {
	return len(op.Writer) + len(op.Key) + len(op.Value) + len(op.Sig) + 48
}

// push forwards live ops the peer does not have yet. Ops of a writer the
// peer is connected to come from that writer itself; relaying them too
// would make every op arrive n-1 times in a full mesh. (If that direct
// push is lost, the next version-vector exchange repairs it.)
func (s *session) push(ops []*messages.Op) {
	var out []*messages.Op
	for _, op := range ops {
		if op.Writer == s.peer || op.Seq <= s.peerVV[op.Writer] {
			continue
		}
		if op.Writer != s.cfg.hello.ID && s.peerLinks[op.Writer] {
			continue
		}
		out = append(out, op)
	}
	if len(out) > 0 {
		s.sendOps(out)
	}
}

func (s *session) onOps(c actor.Context, ops []*messages.Op) {
	s.stats.opsReceived += int64(len(ops))
	for _, op := range ops {
		if op.Seq > s.peerVV[op.Writer] {
			s.peerVV[op.Writer] = op.Seq
		}
	}
	f := c.RequestFuture(s.cfg.ledger, &messages.ApplyOps{From: s.peer, Ops: ops}, s.cfg.askTimeout)
	c.ReenterAfter(f, func(res any, err error) {
		s.releaseCredit()
		r, ok := res.(*messages.ApplyOpsReply)
		if err != nil || !ok {
			s.cfg.log.Warn("ledger did not take peer ops", "peer", short(s.peer), "ops", len(ops), "err", errText(err))
			return
		}
		s.stats.opsDup += int64(r.Duplicates)
		if r.Rejected > 0 {
			s.cfg.log.Warn("peer sent ops that failed validation", "peer", short(s.peer), "rejected", r.Rejected)
		}
		if r.Gaps > 0 && !s.closing {
			// We miss earlier ops: ask the peer for everything above.
			s.stats.wants++
			s.sendVV(c, messages.KindWant)
		}
	})
}

// releaseCredit returns an ops credit to the reader. Stashed frames and
// frames dropped while closing hold none, so never block.
func (s *session) releaseCredit() {
	select {
	case <-s.credits:
	default:
	}
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
