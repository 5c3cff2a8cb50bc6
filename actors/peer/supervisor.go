package peer

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/eventstream"

	"peerdns/actors/consensus"
	"peerdns/internal/applied"
	"peerdns/internal/stack"
	"peerdns/internal/store"
	"peerdns/messages"
	"peerdns/transport"
	"peerdns/transport/identity"
)

// Deps are what the peers supervisor needs from the node. Zero tunables
// take the defaults in brackets.
type Deps struct {
	Identity *identity.Identity
	Endpoint transport.Endpoint // owned by the caller: it closes it after stopping us
	Ledger   *actor.PID
	Node     *store.DB // node.db: known peers, issued and used invites
	Log      *slog.Logger
	// Bootstrap addresses: "host:port" (any key) or "<peer id>@host:port".
	Bootstrap []string
	// Join is the --join invite; ignored once the ledger has a network.
	Join string
	// System is the actor system whose event stream carries OpsApplied and
	// hints (nil: the one the actor is spawned in).
	System *actor.ActorSystem
	// Advertise names addresses put first in hellos and invites
	// (--advertise-addr: public or port-forwarded); observed addresses two
	// peers agree on and the endpoint's interface addresses follow.
	Advertise []string
	// PortMap is what the router's port mapping holds now
	// (transport/portmap): its external address is advertised after the
	// Advertise ones and it is shown in the reach view. nil: none.
	PortMap func() *messages.PortMapping
	// Fatal reports a mistake the node cannot heal by retrying: a --join
	// invite that is malformed or expired, or that the inviter refused for
	// good (expired, already used, invalid). It is called at most once,
	// from the supervisor's Receive, so it must not block. nil: the
	// failure is only logged and shown in the diagnostics.
	Fatal func(error)
	// Mesh is kept up to date with established connections and the
	// tunnel ids peers announce, and hands their streams to the tunnel
	// layer (which gets the same Mesh). nil: a private one, so streams
	// peers open are reset.
	Mesh *Mesh
	// Applied is the ledger's applied version vector (the same one given
	// to ledger.Deps): sessions skip the signature check of ops it
	// already holds, which the ledger drops as duplicates. nil: every op
	// is checked.
	Applied *applied.Vector

	TickInterval time.Duration // timer resolution [1s]
	SyncInterval time.Duration // version-vector exchange per peer [3s]
	PingInterval time.Duration // [1s]: a healthy idle peer is heard every second
	// StaleAfter: a connected peer not heard from (any frame: pings come
	// every PingInterval) for this long stops counting as active for
	// quorum until it is heard again, at that instant (silence.go); the
	// connection stays up [2.5s: one missed ping passes].
	StaleAfter time.Duration
	// StaleAfterSparse is StaleAfter once we know more than Replicas
	// writers [3.5s]. Up to R writers a frozen voter must leave every
	// quorum within 3 s (StaleAfter, then the session's report); beyond,
	// within 5 s (StaleAfterSparse, then the suspicion's flood, a few
	// hops), and a silence taken for a failure costs more there: a
	// signed suspicion and its refutation reach every node, and each
	// re-evaluates the domains whose replica sets hold the suspect. A
	// process that misses two pings under load (a burst on a busy
	// machine) is not suspected; one that misses three is.
	StaleAfterSparse time.Duration
	// CloseSilentAfter: a connected peer that sent no whole frame for
	// this long is disconnected, freeing its session and view slot; the
	// diagnostics count it as stalled [3m]. Its connection may well be
	// alive (QUIC keep-alives are the transport's, answered by the
	// peer's QUIC stack even when nothing above it runs), so without
	// this a peer that stopped talking held its slot for good. Longer
	// than the slowest frame the transport lets through (30 s plus 1 MiB
	// at 64 kbit/s, 158 s: transport.DefaultFrameTimeout), as the peer's
	// pings wait behind such a frame.
	CloseSilentAfter time.Duration
	// Replicas is R, the ledger's replica-set size [24]; here it only
	// says when the network is beyond it (StaleAfterSparse).
	Replicas         int
	ExchangeInterval time.Duration // peer exchange [10s]
	HandshakeTimeout time.Duration // [10s]
	AskTimeout       time.Duration // ledger requests [5s]
	// DisconnectGrace is how long a peer whose session ended still counts
	// as connected, so that replacing a duplicate connection (whose old
	// half the other side may close first) does not make the peer set
	// and quorum flap. A new session within the grace inherits it [1s].
	DisconnectGrace time.Duration
	Backoff         transport.Backoff // redial [500ms .. 30s]
	Batch           int               // ops per sync request and frame [512]
	// ActiveView bounds the peers we keep a session with (view.go);
	// sessions the tunnel layer uses come on top [12; 8-16 recommended:
	// below 8 a random graph of 1,000 nodes risks splitting, above 16
	// idle traffic grows with no gain in reach].
	ActiveView int
	// ShuffleSize bounds the peers in one shuffle or leave sample [8].
	ShuffleSize int
	// HeartbeatInterval: how often this writer signs and sends a
	// heartbeat (heartbeat.go) [0: scaled to the writers we know,
	// HeartbeatPerWriter each, at least heartbeatFloor (30 s)].
	// HeartbeatTimeout: a writer without a session to us counts as active
	// this long after its last heartbeat arrived, unless suspected
	// (suspicion.go) [0: three intervals].
	HeartbeatInterval, HeartbeatTimeout time.Duration
	// HeartbeatPerWriter: the scaled heartbeat interval per known writer
	// [5s: each node then receives one writer's heartbeat every 5 s on
	// average, whatever the network's size].
	HeartbeatPerWriter time.Duration
	// LazyTimeout: an op a lazy neighbour announced that has not arrived
	// this long after is grafted from it (session_lazy.go) [500ms].
	LazyTimeout time.Duration
	// EagerLinks: neighbours that push ops to us from the start (our
	// feeds); those established beyond it announce ids instead
	// (session_lazy.go) [4].
	EagerLinks int
	Now        func() time.Time

	// withhold makes the node relay no op of another writer (tests play
	// a neighbour that withholds ops with it).
	withhold bool
}

func (d *Deps) defaults() {
	if d.Log == nil {
		d.Log = slog.Default()
	}
	if d.Now == nil {
		d.Now = time.Now
	}
	def := func(v *time.Duration, x time.Duration) {
		if *v <= 0 {
			*v = x
		}
	}
	def(&d.TickInterval, time.Second)
	def(&d.SyncInterval, 3*time.Second)
	def(&d.PingInterval, time.Second)
	def(&d.StaleAfter, 2500*time.Millisecond)
	def(&d.StaleAfterSparse, 3500*time.Millisecond)
	def(&d.CloseSilentAfter, 3*time.Minute)
	def(&d.ExchangeInterval, 10*time.Second)
	def(&d.HandshakeTimeout, 10*time.Second)
	def(&d.AskTimeout, 5*time.Second)
	def(&d.DisconnectGrace, time.Second)
	def(&d.HeartbeatPerWriter, 5*time.Second)
	def(&d.LazyTimeout, 500*time.Millisecond)
	if d.Batch <= 0 {
		d.Batch = 512
	}
	if d.Replicas <= 0 {
		d.Replicas = consensus.DefaultReplicas
	}
	if d.ActiveView <= 0 {
		d.ActiveView = 12
	}
	if d.EagerLinks <= 0 {
		d.EagerLinks = 4
	}
	if d.ShuffleSize <= 0 {
		d.ShuffleSize = 8
	}
	if d.Mesh == nil {
		d.Mesh = NewMesh()
	}
}

// check reports missing required dependencies.
func (d *Deps) check() error {
	switch {
	case d.Identity == nil:
		return errors.New("peer: Deps.Identity is nil")
	case d.Endpoint == nil:
		return errors.New("peer: Deps.Endpoint is nil")
	case d.Ledger == nil:
		return errors.New("peer: Deps.Ledger is nil")
	case d.Node == nil:
		return errors.New("peer: Deps.Node is nil")
	}
	return nil
}

// Props builds the peers supervisor. Sessions that fail are stopped, not
// restarted: the connection state they owned is gone and the peer redials.
func Props(d Deps) *actor.Props {
	d.defaults()
	return actor.PropsFromProducer(func() actor.Actor { return newActor(d) }, actor.WithDispatcher(stack.Actors))
}

var stopSessions = actor.NewOneForOneStrategy(0, 0, func(any) actor.Directive { return actor.StopDirective })

// Actor is the peers supervisor. All fields are touched only from
// Receive, except gate, which the dialer goroutines read.
type Actor struct {
	d    Deps
	self string
	pid  *actor.PID
	log  *slog.Logger
	book *transport.InviteBook
	sys  *actor.ActorSystem

	network, root string
	netKnown      bool      // the ledger answered with a network, or we are joining
	netSince      time.Time // when network was set
	asking        bool      // a GetNetwork is in flight
	joinInv       *transport.Invite
	joinReq       *messages.JoinRequest
	joinErr       string // why joining failed for good ("" while it may work)

	sessions  map[string]*sessionEntry // by peer id
	lingering map[string]time.Time     // peers whose session ended, within DisconnectGrace
	known     map[string]*knownPeer
	dialers   map[string]*dialerEntry // by address (dialing.go)
	// learnedDialers counts the dialers in dialers that retire
	// (dialOpts.retire), bounded by learnedDialerCap.
	learnedDialers int
	// learnAsking: learned peers the ledger is asked about (IsWriter),
	// with their addresses; learnedNotWriters counts learned peers
	// dropped as no writers of ours, or for too many questions at once
	// (addressbook.go, learn).
	learnAsking       map[string][]string
	learnedNotWriters int64
	later             map[string]laterPeer // learnLater
	bootstrap         []dialTarget
	gate              *dialGate
	connected         []string // last set sent as PeerSetChanged
	listed            []string // upIDs, sorted, when a hint last told of them

	ctx          context.Context
	cancel       context.CancelFunc
	sub          *eventstream.Subscription
	lastExchange time.Time
	exchanges    int // exchange intervals passed (shuffleEvery counts them)
	// ended: sessions (by PID id) that ended without a leave, to peer
	// id, until onEnded or a late leave (onLeft) settles which it was.
	ended       map[string]string
	closed      bool // the endpoint stopped accepting
	adv         []string
	advAt       time.Time
	diag        diagnostics
	reach       *reachState     // reach.go
	answering   map[string]bool // peers whose probe we are answering
	relays      relayPlan
	quicRetries map[string]*quicRetry // quicretry.go
	selfAddrs   map[string]bool       // addresses a dial found to be ours (dialing.go)
	// quicRetried / quicRetryFailed count QUIC retries started and failed.
	quicRetried, quicRetryFailed int64
	view                         viewState       // view.go
	hb                           heartbeatState  // heartbeat.go
	sus                          suspicionState  // suspicion.go
	startedAt                    time.Time       // when Receive got Started
	grafts                       graftBook       // session_lazy.go, shared by the sessions
	checked                      applied.Checked // signatures sessions verified, shared by them
	lag                          ledgerLag       // ledgerlag.go, shared by the sessions
}

func newActor(d Deps) *Actor {
	a := &Actor{d: d, log: d.Log}
	if d.Identity != nil {
		a.self = d.Identity.ID()
		// Votes on our own claims name us by a short id (messages, Short
		// ids): we must resolve it before any op of ours comes back.
		messages.Pin(a.self)
	}
	return a
}

// Receive dispatches one message.
func (a *Actor) Receive(c actor.Context) {
	switch m := c.Message().(type) {
	case *actor.Started:
		if err := a.d.check(); err != nil {
			// A wiring mistake: restarting cannot fix it.
			a.log.Error("peer network not started", "err", err)
			c.Stop(c.Self())
			return
		}
		a.start(c)
	case *actor.Stopping, *actor.Restarting:
		a.stop()
	case *actor.Terminated:
		a.onTerminated(c, m.Who)
	case *tick:
		a.onTick(c, m.now)
	case *endpointClosed:
		a.closed = true
		a.log.Warn("peer endpoint closed: no more inbound connections")
	case *newConn:
		a.onConn(c, m)
	case *dialGaveUp:
		a.onDialGaveUp(m)
	case *dialRetired:
		if a.dialers[m.addr] == m.e {
			a.dropDialer(m.addr)
		}
	case *dialFailed:
		if errors.Is(m.err, transport.ErrSelf) {
			a.reachedSelf(m.addr)
		}
		if errors.Is(m.err, transport.ErrWrongPeer) {
			a.forgetMoved(m.peer, m.addr)
		}
		a.diag.failed++
		a.diag.issue(a.d.Now(), messages.ConnectionIssue{Addr: m.addr, PeerID: m.peer, Kind: "dial", Reason: m.err.Error()})
		a.log.Debug("peer dial failed", "addr", m.addr, "err", m.err)
	case *sessionUp:
		a.onUp(c, m)
	case *sessionIssue:
		switch m.kind {
		case "refused":
			a.diag.refused++
		case "stalled":
			a.diag.stalled++
		}
		e := a.sessions[m.id]
		addr := ""
		if e != nil {
			addr = e.conn.RemoteAddr().String()
		}
		a.diag.issue(a.d.Now(), messages.ConnectionIssue{Addr: addr, PeerID: m.id, Kind: m.kind, Reason: m.reason})
	case *statsReport:
		a.onStats(m)
	case *peerSilent:
		a.onSilent(c, m)
	case *peersLearned:
		if e := a.sessions[m.from]; e != nil {
			e.theirs = len(m.peers)
		}
		a.learn(c, m.from, m.peers)
		a.reachLearned(m.from, m.peers)
		a.relayLearned(m.from, m.peers)
	case *reachFrame:
		a.onReach(c, m)
	case *rawProbe:
		a.onRawProbe(m)
	case *probeAnswered:
		delete(a.answering, m.peer)
	case *introDue:
		a.askIntro(c, m.id, a.d.Now())
	case *punchEnded:
		a.onPunchEnded(m)
	case *relayDone:
		a.onRelayDone(c, m)
	case *quicRetryDone:
		a.onQuicRetryDone(m)
	case *frameTo:
		if e := a.sessions[m.peer]; e != nil {
			c.Send(e.pid, &sendFrame{env: m.env})
		}
	case *dropNeighbour:
		if e := a.sessions[m.id]; e != nil && e.pid.Equal(m.pid) {
			a.diag.issue(a.d.Now(), messages.ConnectionIssue{Addr: e.conn.RemoteAddr().String(), PeerID: m.id, Kind: "overlay", Reason: m.why})
			a.sendLeave(c, m.id)
		}
	case *neighbourOwes:
		a.onNeighbourOwes(c, m)
	case *sessionEnded:
		a.onEnded(c, m)
	case *connReplaced:
		a.onReplaced(c, m)
	case *peerLeft:
		a.onLeft(c, m)
	case *admitNeighbour:
		r := &admitResult{ok: a.admit(m.peer, m.neighbours)}
		if !r.ok {
			r.sample = a.sample(m.peer)
		}
		c.Respond(r)
	case *viewFull:
		a.onViewFull(c, m)
	case *overlayFrame:
		a.onOverlay(c, m)
	case *announceTunnels:
		ids := a.d.Mesh.ownIDs()
		for _, e := range a.sessions {
			c.Send(e.pid, &sendTunnels{ids: ids})
		}
	case *tunnelsAnnounced:
		a.onTunnels(m)
	case *redeemJoin:
		a.redeem(c, m)
	case *joined:
		a.onJoined(c, m)
	case *inviteRefused:
		a.onInviteRefused(m)
	case *messages.OpsApplied:
		if a.writersAdded(m.Ops) {
			a.relearn(c)
		}
		ops := m.Ops
		if a.d.withhold {
			ops = nil
			for _, op := range m.Ops {
				if op.Writer == a.self {
					ops = append(ops, op)
				}
			}
		}
		for _, e := range a.sessions {
			if e.up && len(ops) > 0 {
				c.Send(e.pid, &pushOps{ops: ops})
			}
		}
	case *messages.LedgerLoaded:
		// The ledger restarted: what sessions handed it and it did not
		// commit is lost. The vectors we tell must not count it, and
		// every peer is asked for what the ledger lacks now.
		a.checked.ForgetAbove(a.d.Applied)
		for _, e := range a.sessions {
			if e.up {
				c.Send(e.pid, &askAgain{})
			}
		}
	case *messages.GetPeers:
		c.Respond(&messages.GetPeersReply{IDs: a.upIDs()})
	case *messages.GetPeerStatus:
		c.Respond(a.status())
	case *messages.CreateInvite:
		c.Respond(a.createInvite(m))
	case *messages.GetPeerDiagnostics:
		c.Respond(a.diagnostics())
	}
}

func (a *Actor) start(c actor.Context) {
	a.startedAt = a.d.Now()
	a.pid = c.Self()
	a.sys = a.d.System
	if a.sys == nil {
		a.sys = c.ActorSystem()
	}
	a.book = transport.NewInviteBook(a.d.Node)
	a.sessions = map[string]*sessionEntry{}
	a.lingering = map[string]time.Time{}
	a.quicRetries = map[string]*quicRetry{}
	a.selfAddrs = map[string]bool{}
	a.dialers = map[string]*dialerEntry{}
	a.gate = newDialGate(a.d.ActiveView, a.d.Now)
	a.ctx, a.cancel = context.WithCancel(context.Background())
	a.diag = diagnostics{started: a.d.Now()}
	a.reach, a.answering = newReachState(a.d.Now()), map[string]bool{}
	a.d.Mesh.attach(c.ActorSystem().Root, c.Self(), a.log)
	a.loadKnown()
	for _, b := range a.d.Bootstrap {
		t, err := parseTarget(b)
		if err != nil {
			a.log.Warn("ignoring bootstrap address", "addr", b, "err", err)
			a.diag.issue(a.d.Now(), messages.ConnectionIssue{Addr: b, Kind: "config", Reason: err.Error()})
			continue
		}
		a.bootstrap = append(a.bootstrap, t)
	}

	root, self := c.ActorSystem().Root, c.Self()
	a.sub = a.sys.EventStream.Subscribe(func(evt any) {
		switch m := evt.(type) {
		case *messages.OpsApplied, *messages.LedgerLoaded:
			root.Send(self, m)
		}
	})
	ctx, now := a.ctx, a.d.Now
	go func() {
		t := time.NewTicker(a.d.TickInterval)
		defer t.Stop()
		for {
			select {
			case <-t.C:
				// Deps.Now, not the ticker's time: sessions compare a
				// tick with times they took from Deps.Now (a handshake's
				// start), and a node whose clock is set apart (a test's
				// skewed joiner) timed out every handshake at its first
				// tick.
				root.Send(self, &tick{now: now()})
			case <-ctx.Done():
				return
			}
		}
	}()
	ep := a.d.Endpoint
	go func() {
		for {
			conn, err := ep.Accept(ctx)
			if err != nil {
				if ctx.Err() != nil {
					return
				}
				if errors.Is(err, transport.ErrClosed) {
					root.Send(self, &endpointClosed{})
					return
				}
				continue
			}
			root.Send(self, &newConn{conn: conn})
		}
	}()
	if raw, ok := ep.(transport.RawPackets); ok {
		go readRaw(ctx, raw, func(m *rawProbe) { root.Send(self, m) })
	}
	a.askNetwork(c)
}

func (a *Actor) stop() {
	if a.pid != nil {
		a.d.Mesh.detach(a.pid)
	}
	if a.cancel != nil {
		a.cancel()
	}
	if a.sub != nil {
		a.sys.EventStream.Unsubscribe(a.sub)
		a.sub = nil
	}
}

// askNetwork learns the network from the ledger; until it knows, the node
// is initialising and connections are turned away.
func (a *Actor) askNetwork(c actor.Context) {
	if a.asking || a.netKnown {
		return
	}
	a.asking = true
	f := c.RequestFuture(a.d.Ledger, &messages.GetNetwork{}, a.d.AskTimeout)
	c.ReenterAfter(f, func(res any, err error) {
		a.asking = false
		r, ok := res.(*messages.GetNetworkReply)
		if err != nil || !ok || a.netKnown {
			return
		}
		a.onNetwork(c, r.Key, r.Root)
	})
}

func (a *Actor) onNetwork(c actor.Context, key, root string) {
	switch {
	case key != "":
		a.network, a.root, a.netKnown = key, root, true
		a.netSince = a.d.Now()
		if a.d.Join != "" {
			a.log.Info("already a member of a network; ignoring the join invite")
		}
		a.log.Info("peer network ready", "master", a.root == a.self, "known", len(a.known))
	case a.d.Join != "":
		if !a.startJoin() {
			return
		}
	default:
		return // the ledger is still creating the genesis: ask again next tick
	}
	for _, t := range a.bootstrap {
		a.startDialer(t.addr, t.id, dialOpts{mutual: true})
	}
	for id, k := range a.known {
		for _, addr := range k.Addrs {
			a.startDialer(addr, id, dialOpts{mutual: true, giveUp: k.hearsay(addr), retire: true})
		}
	}
	a.publishHint()
}

// staleAfter is the silence after which a neighbour counts out: longer
// once the writers we know outnumber R (Deps.StaleAfterSparse).
func (a *Actor) staleAfter() time.Duration {
	if len(a.hb.latest)+1 > a.d.Replicas {
		return a.d.StaleAfterSparse
	}
	return a.d.StaleAfter
}

func (a *Actor) onTick(c actor.Context, now time.Time) {
	if !a.netKnown && a.joinErr == "" {
		a.askNetwork(c)
	}
	// Before the ticks: a session then takes our feedMe before it reports
	// its state, and the feed count does not read the state before it.
	a.refeed(c)
	expired := false
	stale := a.staleAfter()
	for _, e := range a.sessions {
		c.Send(e.pid, &tick{now: now, staleAfter: stale, interval: a.d.TickInterval})
		if !e.holdUntil.IsZero() && !now.Before(e.holdUntil) {
			e.holdUntil = time.Time{} // a damped peer's hold-down ended
			expired = true
		}
	}
	for id, at := range a.lingering {
		if now.Sub(at) >= a.d.DisconnectGrace {
			delete(a.lingering, id)
			expired = true
		}
	}
	if expired {
		a.connectedChanged(c)
	}
	a.trimView(c, "")
	a.refillDialers(a.updateGate())
	a.heartbeatTick(c, now)
	a.relayTick(now)
	a.quicRetryTick(now)
	if due(now, a.lastExchange, a.d.ExchangeInterval, a.d.TickInterval) {
		a.lastExchange = now
		a.exchanges++
		a.exchange(c)
		if a.viewRoom() > 0 || a.exchanges%shuffleEvery == 0 {
			a.shuffle(c)
		}
	}
	a.reachTick(c, now)
	a.flushBeats(c)
}

func (a *Actor) publishHint() {
	a.sys.EventStream.Publish(&messages.Hint{Type: messages.HintPeers})
}

func (a *Actor) status() *messages.GetPeerStatusReply {
	up := a.upIDs()
	return &messages.GetPeerStatusReply{
		IsMaster:    a.network != "" && a.root == a.self,
		IsConnected: len(up) > 0,
		PeersCount:  len(up),
		Ready:       a.netKnown,
		Listening:   !a.closed,
		Joining:     a.joinInv != nil,
		Network:     a.network,
		Addr:        a.d.Endpoint.Addr().String(),
		Reach:       a.reachView(),
	}
}
