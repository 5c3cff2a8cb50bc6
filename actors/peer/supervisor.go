package peer

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/eventstream"

	"peerdns/internal/identity"
	"peerdns/internal/store"
	"peerdns/messages"
	"peerdns/transport"
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
	// Advertise overrides the addresses put in hellos and invites
	// (default: the endpoint address, wildcards expanded).
	Advertise []string

	TickInterval     time.Duration // timer resolution [1s]
	SyncInterval     time.Duration // version-vector exchange per peer [3s]
	PingInterval     time.Duration // [5s]
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
	Now             func() time.Time
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
	def(&d.PingInterval, 5*time.Second)
	def(&d.ExchangeInterval, 10*time.Second)
	def(&d.HandshakeTimeout, 10*time.Second)
	def(&d.AskTimeout, 5*time.Second)
	def(&d.DisconnectGrace, time.Second)
	if d.Batch <= 0 {
		d.Batch = 512
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
	return actor.PropsFromProducer(func() actor.Actor { return newActor(d) })
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
	netKnown      bool // the ledger answered with a network, or we are joining
	asking        bool // a GetNetwork is in flight
	joinInv       *transport.Invite
	joinReq       *messages.JoinRequest
	joinErr       string

	sessions  map[string]*sessionEntry // by peer id
	lingering map[string]time.Time     // peers whose session ended, within DisconnectGrace
	known     map[string]*knownPeer
	dialers   map[string]context.CancelFunc // by address
	bootstrap []dialTarget
	gate      *dialGate
	connected []string // last set sent as PeerSetChanged

	ctx          context.Context
	cancel       context.CancelFunc
	sub          *eventstream.Subscription
	lastExchange time.Time
	closed       bool // the endpoint stopped accepting
	adv          []string
	advAt        time.Time
	diag         diagnostics
}

type sessionEntry struct {
	pid  *actor.PID
	conn transport.Conn
	up   bool
	// inherited: this session replaced a connected one for the same peer;
	// the peer counts as connected while it handshakes, so a duplicate
	// resolution does not make the peer set (and quorum) flap.
	inherited bool
	since     time.Time
	upAt      time.Time
	dialAddr  string
	hello     *messages.Hello
	stats     sessionStats
}

// knownPeer is a peer we were connected to, saved as peer:<id> in node.db
// so a restart needs no flags.
type knownPeer struct {
	Addrs    []string `json:"addrs"`
	LastSeen int64    `json:"lastSeen"` // unix ms
}

type dialTarget struct{ id, addr string }

const knownPrefix = "peer:"

// Caps that keep a hostile peer exchange from growing state without bound.
const (
	maxAddrsPerPeer = 8
	maxKnownPeers   = 1024
	maxDialers      = 256
)

func newActor(d Deps) *Actor {
	a := &Actor{d: d, log: d.Log}
	if d.Identity != nil {
		a.self = d.Identity.ID()
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
		a.forgetAddr(m.peer, m.addr)
	case *dialFailed:
		a.diag.failed++
		a.diag.issue(a.d.Now(), messages.ConnectionIssue{Addr: m.addr, PeerID: m.peer, Kind: "dial", Reason: m.err.Error()})
		a.log.Debug("peer dial failed", "addr", m.addr, "err", m.err)
	case *sessionUp:
		a.onUp(c, m)
	case *sessionIssue:
		if m.kind == "refused" {
			a.diag.refused++
		}
		e := a.sessions[m.id]
		addr := ""
		if e != nil {
			addr = e.conn.RemoteAddr().String()
		}
		a.diag.issue(a.d.Now(), messages.ConnectionIssue{Addr: addr, PeerID: m.id, Kind: m.kind, Reason: m.reason})
	case *statsReport:
		if e := a.sessions[m.id]; e != nil {
			e.stats = m.st
		}
	case *peersLearned:
		a.learn(m.peers)
	case *redeemJoin:
		a.redeem(c, m)
	case *joined:
		a.onJoined(c, m)
	case *messages.OpsApplied:
		for _, e := range a.sessions {
			if e.up {
				c.Send(e.pid, &pushOps{ops: m.Ops})
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
	a.pid = c.Self()
	a.sys = a.d.System
	if a.sys == nil {
		a.sys = c.ActorSystem()
	}
	a.book = transport.NewInviteBook(a.d.Node)
	a.sessions = map[string]*sessionEntry{}
	a.lingering = map[string]time.Time{}
	a.dialers = map[string]context.CancelFunc{}
	a.gate = &dialGate{connected: map[string]bool{}, dialing: map[string]bool{}}
	a.ctx, a.cancel = context.WithCancel(context.Background())
	a.diag = diagnostics{started: a.d.Now()}
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
		if m, ok := evt.(*messages.OpsApplied); ok {
			root.Send(self, m)
		}
	})
	ctx := a.ctx
	go func() {
		t := time.NewTicker(a.d.TickInterval)
		defer t.Stop()
		for {
			select {
			case now := <-t.C:
				root.Send(self, &tick{now: now})
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
	a.askNetwork(c)
}

func (a *Actor) stop() {
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
		if a.d.Join != "" {
			a.log.Info("already a member of a network; ignoring the join invite")
		}
		a.log.Info("peer network ready", "master", a.root == a.self, "known", len(a.known))
	case a.d.Join != "":
		inv, err := transport.ParseInvite(a.d.Join)
		if err == nil {
			err = inv.Verify(a.d.Now())
		}
		var req *messages.JoinRequest
		if err == nil {
			req, err = inv.JoinRequest(a.d.Identity)
		}
		if err != nil {
			// Nothing to retry: the invite itself is unusable.
			if a.joinErr != err.Error() {
				a.log.Error("cannot join: bad invite", "err", err)
				a.diag.issue(a.d.Now(), messages.ConnectionIssue{Kind: "invite", Reason: err.Error()})
			}
			a.joinErr = err.Error()
			return
		}
		a.joinInv, a.joinReq, a.netKnown = inv, req, true
		a.log.Info("joining network", "inviter", short(inv.Inviter), "addrs", strings.Join(inv.Addrs, ","))
		for _, addr := range inv.Addrs {
			a.startDialer(addr, inv.Inviter, dialOpts{}) // the inviter does not know us: no race
		}
	default:
		return // the ledger is still creating the genesis: ask again next tick
	}
	for _, t := range a.bootstrap {
		a.startDialer(t.addr, t.id, dialOpts{mutual: true})
	}
	for id, k := range a.known {
		for _, addr := range k.Addrs {
			a.startDialer(addr, id, dialOpts{mutual: true, giveUp: k.LastSeen == 0})
		}
	}
	a.publishHint()
}

func (a *Actor) onJoined(c actor.Context, m *joined) {
	if a.network != "" {
		return
	}
	a.network, a.root = m.network, m.root
	a.joinInv, a.joinReq = nil, nil
	a.publishHint()
}

func (a *Actor) onTick(c actor.Context, now time.Time) {
	if !a.netKnown {
		a.askNetwork(c)
	}
	for _, e := range a.sessions {
		c.Send(e.pid, &tick{now: now})
	}
	expired := false
	for id, at := range a.lingering {
		if now.Sub(at) >= a.d.DisconnectGrace {
			delete(a.lingering, id)
			expired = true
		}
	}
	if expired {
		a.connectedChanged(c)
	}
	if now.Sub(a.lastExchange) >= a.d.ExchangeInterval {
		a.lastExchange = now
		a.exchange(c)
	}
}

// onConn admits a new connection into a session, resolving duplicates.
func (a *Actor) onConn(c actor.Context, m *newConn) {
	conn := m.conn
	id := conn.PeerID()
	// The dialer marked the id connected before we saw the connection;
	// whatever happens below, the gate ends up showing our sessions.
	defer func() { a.gate.set(a.sessionIDs()) }()
	if conn.Outbound() {
		a.diag.dialed++
	} else {
		a.diag.inbound++
	}
	if !a.netKnown {
		a.diag.issue(a.d.Now(), messages.ConnectionIssue{Addr: conn.RemoteAddr().String(), PeerID: id, Kind: "handshake", Reason: "node initialising"})
		_ = conn.Close("initialising")
		return
	}
	inherited := false
	if old := a.sessions[id]; old != nil {
		// Both sides may dial at once. Keep the connection dialed by the
		// lower id (both ends compute the same answer); if one side dialed
		// both, the newer one wins (it thinks the old one is dead).
		lower := min(a.self, id)
		dialerOf := func(tc transport.Conn) string {
			if tc.Outbound() {
				return a.self
			}
			return id
		}
		if dialerOf(conn) != dialerOf(old.conn) && dialerOf(conn) != lower {
			_ = conn.Close("duplicate connection")
			return
		}
		c.Stop(old.pid)
		delete(a.sessions, id)
		inherited = old.up || old.inherited
	}
	if _, ok := a.lingering[id]; ok {
		delete(a.lingering, id)
		inherited = true
	}
	cfg := sessionConfig{
		conn: conn, ledger: a.d.Ledger, log: a.log, now: a.d.Now,
		hello:        messages.Hello{ID: a.self, Network: a.network, Root: a.root, Addrs: a.advertise()},
		syncInterval: a.d.SyncInterval, pingInterval: a.d.PingInterval, handshakeTimeout: a.d.HandshakeTimeout,
		askTimeout: a.d.AskTimeout, batch: a.d.Batch, queueSize: 256,
	}
	if a.joinInv != nil && id == a.joinInv.Inviter {
		cfg.hello.Join = a.joinReq
		cfg.joinInviter, cfg.joinNetwork = a.joinInv.Inviter, a.joinInv.Network
	}
	pid, err := c.SpawnNamed(sessionProps(cfg).Configure(actor.WithSupervisor(stopSessions)), "session-"+short(id)+"-"+fmt.Sprint(a.diag.dialed+a.diag.inbound))
	if err != nil {
		a.log.Error("cannot spawn peer session", "peer", short(id), "err", err)
		_ = conn.Close("internal error")
		return
	}
	a.sessions[id] = &sessionEntry{pid: pid, conn: conn, since: a.d.Now(), dialAddr: m.addr, inherited: inherited}
}

func (a *Actor) onUp(c actor.Context, m *sessionUp) {
	e := a.sessions[m.id]
	if e == nil || !e.pid.Equal(m.pid) {
		return
	}
	e.up, e.upAt, e.hello = true, a.d.Now(), m.hello
	a.log.Info("peer connected", "peer", short(m.id), "remote", m.remote, "outbound", m.out)
	addrs := []string{}
	if e.dialAddr != "" {
		addrs = append(addrs, e.dialAddr)
	}
	addrs = append(addrs, m.hello.Addrs...)
	// One socket listens and dials, so the remote address of either
	// direction is where the peer can be dialed back.
	addrs = append(addrs, m.remote)
	a.remember(m.id, addrs, true)
	a.connectedChanged(c)
	a.exchange(c)
}

func (a *Actor) onTerminated(c actor.Context, who *actor.PID) {
	for id, e := range a.sessions {
		if e.pid.Equal(who) {
			delete(a.sessions, id)
			a.gate.set(a.sessionIDs())
			if e.up || e.inherited {
				a.remember(id, nil, true)
				a.lingering[id] = a.d.Now()
			}
			return
		}
	}
}

// connectedChanged tells the ledger and the WebSocket hub when the set of
// connected peers changed.
func (a *Actor) connectedChanged(c actor.Context) {
	ids := a.upIDs()
	if strings.Join(ids, ",") == strings.Join(a.connected, ",") {
		return
	}
	a.connected = ids
	c.Send(a.d.Ledger, &messages.PeerSetChanged{Connected: ids})
	a.publishHint()
}

func (a *Actor) publishHint() {
	a.sys.EventStream.Publish(&messages.Hint{Type: messages.HintPeers})
}

// exchange tells every connected peer whom we are connected to.
func (a *Actor) exchange(c actor.Context) {
	var list []messages.PeerInfo
	var to []*actor.PID
	for _, id := range a.upIDs() {
		e := a.sessions[id]
		if e == nil || !e.up {
			continue // lingering or still handshaking
		}
		addrs := []string{}
		if k := a.known[id]; k != nil {
			addrs = append(addrs, k.Addrs...)
		}
		list = append(list, messages.PeerInfo{ID: id, Addrs: addrs})
		to = append(to, e.pid)
	}
	if len(list) < 2 {
		return // a lone peer gains nothing from hearing about itself
	}
	for _, pid := range to {
		c.Send(pid, &sendPeers{peers: list})
	}
}

// learn takes peers from a peer exchange and dials those we lack.
func (a *Actor) learn(peers []messages.PeerInfo) {
	for _, p := range peers {
		if p.ID == a.self || !identity.ValidID(p.ID) {
			continue
		}
		if a.known[p.ID] == nil && len(a.dialers) >= maxDialers {
			continue // no dialer to spare: hear of it again at a later exchange
		}
		a.remember(p.ID, p.Addrs, false)
		if k := a.known[p.ID]; k != nil && a.sessions[p.ID] == nil {
			for _, addr := range k.Addrs {
				a.startDialer(addr, p.ID, dialOpts{mutual: true, giveUp: k.LastSeen == 0})
			}
		}
	}
}

// remember merges addresses of a peer into the known list and saves it.
func (a *Actor) remember(id string, addrs []string, seen bool) {
	k := a.known[id]
	fresh := k == nil
	if fresh {
		if len(a.known) >= maxKnownPeers {
			return
		}
		k = &knownPeer{}
	}
	var changed bool
	k.Addrs, changed = mergeAddrs(k.Addrs, addrs, maxAddrsPerPeer)
	if fresh {
		if len(k.Addrs) == 0 && !seen {
			return // nowhere to reach it: not worth remembering
		}
		a.known[id] = k
	}
	if seen {
		k.LastSeen = a.d.Now().UnixMilli()
		changed = true
	}
	if !changed {
		return
	}
	b, _ := json.Marshal(k)
	if err := a.d.Node.Set(knownPrefix+id, string(b)); err != nil {
		a.log.Warn("cannot save known peer", "peer", short(id), "err", err)
	}
}

// forgetAddr drops an address that never worked from every peer we never
// saw that lists it (dialers are per address), and such a peer itself once
// it has no address left.
func (a *Actor) forgetAddr(id, addr string) {
	if cancel := a.dialers[addr]; cancel != nil {
		cancel()
		delete(a.dialers, addr)
	}
	for pid, k := range a.known {
		if k.LastSeen != 0 || !slices.Contains(k.Addrs, addr) {
			continue
		}
		k.Addrs = slices.DeleteFunc(k.Addrs, func(s string) bool { return s == addr })
		var err error
		if len(k.Addrs) == 0 {
			delete(a.known, pid)
			err = a.d.Node.Delete(knownPrefix + pid)
		} else {
			b, _ := json.Marshal(k)
			err = a.d.Node.Set(knownPrefix+pid, string(b))
		}
		if err != nil {
			a.log.Warn("cannot update known peer", "peer", short(pid), "err", err)
		}
	}
	a.log.Info("gave up on a peer address that never answered", "peer", short(id), "addr", addr)
}

func (a *Actor) loadKnown() {
	a.known = map[string]*knownPeer{}
	kvs, err := a.d.Node.List(knownPrefix)
	if err != nil {
		a.log.Warn("cannot read known peers", "err", err)
		return
	}
	for _, kv := range kvs {
		id := strings.TrimPrefix(kv.Key, knownPrefix)
		var k knownPeer
		if !identity.ValidID(id) || json.Unmarshal([]byte(kv.Value), &k) != nil {
			a.log.Warn("ignoring bad known peer record", "key", kv.Key)
			continue
		}
		if id != a.self {
			a.known[id] = &k
		}
	}
}

// dialOpts: mutual says the peer probably dials us too (it knows us), so
// the higher id of the pair waits a little before its first attempt;
// giveUp drops an address learned second hand that never worked after
// giveUpAfter attempts instead of retrying it forever.
type dialOpts struct{ mutual, giveUp bool }

const giveUpAfter = 8

// startDialer keeps addr connected (one dialer per address).
func (a *Actor) startDialer(addr, id string, o dialOpts) {
	if _, ok := a.dialers[addr]; ok || !validAddr(addr) || len(a.dialers) >= maxDialers {
		return
	}
	for _, own := range a.advertise() {
		if own == addr {
			return
		}
	}
	ctx, cancel := context.WithCancel(a.ctx)
	a.dialers[addr] = cancel
	// When both ends know each other they dial at once after a restart;
	// the higher id waits a little so the lower one's dial usually wins
	// and no duplicate has to be resolved.
	var delay time.Duration
	if o.mutual && id != "" && a.self > id {
		delay = a.d.Backoff.Min * 4
		if delay <= 0 {
			delay = 2 * time.Second
		}
	}
	root, self, gate := a.sys.Root, a.pid, a.gate
	d := &transport.Dialer{
		Endpoint:     a.d.Endpoint,
		Addr:         addr,
		InitialDelay: delay,
		PeerID:       id,
		Backoff:      a.d.Backoff,
		Skip:         gate.skip,
		After:        gate.done,
		OnAttempt:    a.diag.attempt,
		OnConn: func(conn transport.Conn) {
			gate.mark(conn.PeerID())
			root.Send(self, &newConn{conn: conn, addr: addr})
		},
		OnFail: func(err error) { root.Send(self, &dialFailed{addr: addr, peer: id, err: err}) },
	}
	if o.giveUp {
		d.GiveUpAfter = giveUpAfter
		d.OnGiveUp = func() { root.Send(self, &dialGaveUp{addr: addr, peer: id}) }
	}
	go d.Run(ctx)
}

// advertise lists our addresses for hellos and invites. Expanding a
// wildcard bind reads the interface list, so it is cached for a while.
func (a *Actor) advertise() []string {
	if len(a.d.Advertise) > 0 {
		return a.d.Advertise
	}
	if now := a.d.Now(); a.adv == nil || now.Sub(a.advAt) > 30*time.Second {
		a.adv, a.advAt = advertised(a.d.Endpoint.Addr()), now
	}
	return a.adv
}

func (a *Actor) upIDs() []string {
	ids := []string{}
	for id, e := range a.sessions {
		if e.up || e.inherited {
			ids = append(ids, id)
		}
	}
	for id := range a.lingering {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	return ids
}

func (a *Actor) sessionIDs() []string {
	ids := make([]string, 0, len(a.sessions))
	for id := range a.sessions {
		ids = append(ids, id)
	}
	return ids
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
	}
}

func (a *Actor) createInvite(m *messages.CreateInvite) *messages.CreateInviteReply {
	if a.network == "" {
		return &messages.CreateInviteReply{Err: messages.ErrNotInitialised}
	}
	inv, err := transport.NewInvite(a.d.Identity, a.network, a.root, a.advertise(), m.TTL, a.d.Now())
	if err != nil {
		return &messages.CreateInviteReply{Err: err}
	}
	s, err := inv.Encode()
	if err == nil {
		err = a.book.Issue(inv)
	}
	if err != nil {
		return &messages.CreateInviteReply{Err: fmt.Errorf("create invite: %w", err)}
	}
	a.diag.invitesCreated++
	a.log.Info("invite created", "expiresAt", time.UnixMilli(inv.ExpiresAt).UTC().Format(time.RFC3339))
	return &messages.CreateInviteReply{Invite: s, ExpiresAt: inv.ExpiresAt}
}

// redeem admits a joiner: the invite must be ours, for our network,
// unexpired, unused and presented by the key it is bound to. The ledger
// then adds the joiner as a writer with a signed op.
func (a *Actor) redeem(c actor.Context, m *redeemJoin) {
	sender := c.Sender()
	refuse := func(code, why string) {
		a.diag.invitesRefused++
		a.log.Warn("refusing invite", "peer", short(m.peer), "code", code, "reason", why)
		c.Send(sender, &redeemResult{refuse: &messages.Refuse{Code: code, Reason: why}})
	}
	inv, err := transport.ParseInvite(m.req.Invite)
	switch {
	case err != nil:
		refuse(messages.RefuseInviteInvalid, err.Error())
		return
	case inv.Inviter != a.self:
		refuse(messages.RefuseInviteInvalid, "invite was issued by another node")
		return
	case inv.Network != a.network:
		refuse(messages.RefuseForeignNetwork, "invite is for another network")
		return
	case !inv.CheckProof(m.peer, m.req.Proof):
		refuse(messages.RefuseInviteInvalid, "join proof does not match the peer's key")
		return
	}
	if err := a.book.Redeem(inv, m.peer, a.d.Now()); err != nil {
		switch {
		case errors.Is(err, transport.ErrInviteExpired):
			refuse(messages.RefuseInviteExpired, err.Error())
		case errors.Is(err, transport.ErrInviteUsed):
			refuse(messages.RefuseInviteUsed, err.Error())
		case errors.Is(err, transport.ErrInviteUnknown), errors.Is(err, transport.ErrInviteInvalid):
			refuse(messages.RefuseInviteInvalid, err.Error())
		default:
			refuse(messages.RefuseInternal, err.Error())
		}
		return
	}
	f := c.RequestFuture(a.d.Ledger, &messages.AddWriter{ID: m.peer}, a.d.AskTimeout)
	c.ReenterAfter(f, func(res any, err error) {
		r, ok := res.(*messages.AddWriterReply)
		if err == nil && !ok {
			err = fmt.Errorf("unexpected reply %T", res)
		} else if err == nil {
			err = r.Err
		}
		if err != nil {
			_ = a.book.Release(inv, m.peer)
			refuse(messages.RefuseInternal, "could not add writer: "+err.Error())
			return
		}
		a.diag.invitesRedeemed++
		a.log.Info("invite redeemed: new writer added", "peer", short(m.peer))
		c.Send(sender, &redeemResult{accept: &messages.Accept{Network: a.network, Root: a.root}})
	})
}

func parseTarget(s string) (dialTarget, error) {
	s = strings.TrimSpace(s)
	id, addr, found := strings.Cut(s, "@")
	if !found {
		id, addr = "", s
	} else if !identity.ValidID(id) {
		return dialTarget{}, fmt.Errorf("peer id %q is not 64 hex characters", id)
	}
	if !validAddr(addr) {
		return dialTarget{}, fmt.Errorf("%q is not host:port", addr)
	}
	return dialTarget{id: id, addr: addr}, nil
}

// dialGate lets dialer goroutines skip peers that are connected or being
// dialed by another dialer. mu guards both maps.
type dialGate struct {
	mu        sync.Mutex
	connected map[string]bool
	dialing   map[string]bool
}

func (g *dialGate) skip(id string) bool {
	if id == "" {
		return false
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.connected[id] || g.dialing[id] {
		return true
	}
	g.dialing[id] = true
	return false
}

func (g *dialGate) done(id string) {
	g.mu.Lock()
	delete(g.dialing, id)
	g.mu.Unlock()
}

// mark records a fresh connection before the supervisor has seen it.
func (g *dialGate) mark(id string) {
	g.mu.Lock()
	g.connected[id] = true
	g.mu.Unlock()
}

// set replaces the connected set with the supervisor's sessions.
func (g *dialGate) set(ids []string) {
	m := make(map[string]bool, len(ids))
	for _, id := range ids {
		m[id] = true
	}
	g.mu.Lock()
	g.connected = m
	g.mu.Unlock()
}
