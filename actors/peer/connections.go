package peer

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"sort"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"peerdns/messages"
	"peerdns/transport"
)

type sessionEntry struct {
	pid  *actor.PID
	conn transport.Conn
	// superseded: the session's flag (sessionConfig.superseded).
	superseded atomic.Bool
	up         bool
	// inherited: this session replaced a connected one for the same peer;
	// the peer counts as connected while it handshakes, so a duplicate
	// resolution does not make the peer set (and quorum) flap.
	inherited bool
	since     time.Time
	upAt      time.Time
	dialAddr  string
	hello     *messages.Hello
	stats     sessionStats
	// path: how the connection reaches the peer ("direct", "punched");
	// via: who introduced it (reach.go).
	path, via string
	// silent: connected but not heard from for StaleAfter (not active);
	// silences are the times it went silent, for damping; holdUntil is
	// when a flapping peer heard again counts once more.
	silent    bool
	silences  []time.Time
	holdUntil time.Time
	// left: the peer sent a leave (its session's end is no failure).
	left bool
	// replaced: the peer closed the connection as replaced by another
	// (its session's end is no failure either: onReplaced).
	replaced bool
	// peersSent is the peer list we last sent on this session, and
	// peersAt when (addressbook.go: lists go out on change, and again
	// only every peerListRepeat exchanges).
	peersSent string
	peersAt   time.Time
	// theirs: how many peers the neighbour's last peer list named (its
	// sessions, us among them); 0 before the first.
	theirs int
	// beatsOut: heartbeats to forward to the neighbour at the next tick,
	// with its ping, by writer (heartbeat.go, "Forwarding").
	beatsOut map[string]*messages.Heartbeat
}

// onConn admits a new connection into a session, resolving duplicates.
func (a *Actor) onConn(c actor.Context, m *newConn) {
	conn := m.conn
	id := conn.PeerID()
	// The dialer marked the id connected before we saw the connection;
	// whatever happens below, the gate ends up showing our sessions.
	defer func() {
		a.gate.set(a.directGate())
		a.updateGate()
	}()
	if p, _ := transport.PathOf(conn); p != transport.PathRelayed {
		a.gate.settle(id) // a relayed peer keeps being dialed directly
	}
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
		if keep, why := a.replaces(id, conn, old); !keep {
			_ = conn.Close(why)
			if m.quicRetry {
				// Refused (closed already): the TCP session stays, and
				// so does the retry's schedule, which waits for this end.
				a.onQuicRetryDone(&quicRetryDone{peer: id, err: errors.New(why)})
			}
			return
		}
		// The replaced connection drains where its path can (TCP,
		// relayed): the tunnel and plugin streams open on it finish there.
		transport.Drain(old.conn)
		old.superseded.Store(true) // closes as replaced: the peer waits for conn instead of suspecting us
		c.Stop(old.pid)
		a.view.retire(old)
		delete(a.sessions, id)
		a.d.Mesh.dropConn(id, old.conn)
		inherited = old.up || old.inherited
	}
	if _, ok := a.lingering[id]; ok {
		delete(a.lingering, id)
		inherited = true
	}
	path, via := a.pathOf(m)
	e := &sessionEntry{conn: conn, since: a.d.Now(), dialAddr: m.addr, inherited: inherited, path: path, via: via}
	cfg := sessionConfig{
		conn: conn, superseded: &e.superseded, ledger: a.d.Ledger, log: a.log, now: a.d.Now,
		hello: messages.Hello{ID: a.self, Network: a.network, Root: a.root, Addrs: a.advertise(), Observed: udpObserved(conn),
			Neighbours: a.helloNeighbours(conn)},
		syncInterval: a.d.SyncInterval, pingInterval: a.d.PingInterval, handshakeTimeout: a.d.HandshakeTimeout,
		askTimeout: a.d.AskTimeout, staleAfter: a.d.StaleAfter, closeSilentAfter: a.d.CloseSilentAfter, batch: a.d.Batch, queueSize: 256, mesh: a.d.Mesh,
		applied: a.d.Applied, checked: &a.checked, lazyTimeout: a.d.LazyTimeout, grafts: &a.grafts, lag: &a.lag,
		prune: a.feeds() >= a.d.EagerLinks,
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
	e.pid = pid
	e.stats.pruned = cfg.prune
	a.sessions[id] = e
}

// replaces decides whether conn, a new connection with id, replaces
// old, the session we hold with id; when not, why is the reason conn is
// closed with. Two ends that both hold both connections must decide
// alike, whatever order the two reached each: had they kept different
// ones, each would close the one the other kept and both sessions would
// die, and again at every redial. So every rule below reads what both
// ends see the same way:
//
//   - A connection already closed never replaces a live one, and a
//     closed one is always replaced (the other end closed it: nothing
//     to agree on).
//   - A better path wins (QUIC over TCP over relayed: both ends see the
//     same paths).
//   - Both sides dialed (each dialed one): the one dialed by the lower
//     id stays.
//   - One side dialed both: its two dials were in flight at once (it
//     dials only while it holds no session with us), and their order
//     is not one both ends can see: its dials may return in another
//     order than we accepted them. The connection with the lower
//     keying-material token (ExportKeyingMaterial, the same on both
//     ends of a connection) stays. One exception: an old session our
//     end finds silent is replaced, as the dialer redialed because it
//     holds that one dead (its end closed it, the close got lost, or it
//     restarted); the dialer holds no session then, so only our end
//     decides.
func (a *Actor) replaces(id string, conn transport.Conn, old *sessionEntry) (keep bool, why string) {
	switch {
	case conn.Err() != nil:
		return false, "closed already"
	case old.conn.Err() != nil:
		return true, ""
	}
	switch nr, or := pathRank(conn), pathRank(old.conn); {
	case nr > or:
		return false, "a better path is connected"
	case nr < or:
		return true, ""
	}
	dialerOf := func(tc transport.Conn) string {
		if tc.Outbound() {
			return a.self
		}
		return id
	}
	if dn, do := dialerOf(conn), dialerOf(old.conn); dn != do {
		if dn == min(a.self, id) {
			return true, ""
		}
		return false, "duplicate connection"
	}
	if old.silent {
		return true, ""
	}
	tn, err1 := conn.ExportKeyingMaterial(dupTokenLabel, nil, 16)
	to, err2 := old.conn.ExportKeyingMaterial(dupTokenLabel, nil, 16)
	if err1 != nil || err2 != nil {
		return true, "" // no token to compare: the newer, as the dialer likely wants
	}
	if bytes.Compare(tn, to) < 0 {
		return true, ""
	}
	return false, "duplicate connection"
}

// dupTokenLabel labels the keying material two ends compare to pick one
// of two connections dialed by the same side (replaces).
const dupTokenLabel = "peerdns duplicate connection"

func (a *Actor) onUp(c actor.Context, m *sessionUp) {
	e := a.sessions[m.id]
	if e == nil || !e.pid.Equal(m.pid) {
		return
	}
	e.up, e.upAt, e.hello = true, a.d.Now(), m.hello
	a.view.ups++
	a.log.Info("peer connected", "peer", short(m.id), "remote", m.remote, "outbound", m.out, "path", pathLabel(e.path, e.via))
	a.reachUp(m.id, m.hello, e.conn)
	if e.path == "punched" {
		a.reach.punched++
	}
	// Where we reached the peer and where it came from first: those
	// worked (remember keeps the first maxAddrsPerPeer).
	addrs := []string{}
	if e.dialAddr != "" {
		addrs = append(addrs, e.dialAddr)
	}
	// One socket listens and dials, so the remote address of either
	// direction is where the peer can be dialed back (on QUIC only: a
	// TCP dial leaves from an ephemeral port, a relayed one from none).
	if p, _ := transport.PathOf(e.conn); p == transport.PathQUIC {
		addrs = append(addrs, m.remote)
	} else if p == transport.PathRelayed {
		a.keepDialingDirect(m.id, m.hello)
	}
	addrs = append(addrs, m.hello.Addrs...)
	a.remember(m.id, addrs, true)
	a.d.Mesh.setConn(m.id, e.conn)
	if m.hello.Neighbours == 0 {
		a.greetLiveness(c, m.id) // suspicion.go: only a peer new to the overlay needs it
	}
	if a.suspectedLong(m.id, a.d.Now()) {
		a.tellSuspicions(c, m.id) // a bridge across a partition (suspicion.go)
	}
	a.connectedChanged(c)
	a.trimView(c, m.id)
	a.updateGate()
	a.exchange(c)
}

// onEnded suspects the peer of a session that ended without a leave,
// unless its leave arrived after the session's Terminated (onLeft).
func (a *Actor) onEnded(c actor.Context, m *sessionEnded) {
	id, ok := a.ended[m.pid.Id]
	if !ok {
		return
	}
	delete(a.ended, m.pid.Id)
	if !a.stopping() {
		a.suspect(c, id)
	}
}

// onReplaced: a session's peer closed its connection as replaced by
// another (replaces, on the peer's end), and the session waits to be
// stopped. Its end is no failure: no suspicion, and no redial while the
// connection the peer kept comes (onTerminated). A peer that says so
// falsely spares itself only this suspicion: its heartbeats stopping
// still count it out (suspicion.go).
func (a *Actor) onReplaced(c actor.Context, m *connReplaced) {
	if e := a.sessions[m.id]; e != nil && e.pid.Equal(m.pid) {
		e.replaced = true
	}
	c.Stop(m.pid)
}

func (a *Actor) onTerminated(c actor.Context, who *actor.PID) {
	for id, e := range a.sessions {
		if e.pid.Equal(who) {
			a.view.retire(e)
			delete(a.sessions, id)
			a.d.Mesh.dropConn(id, e.conn)
			if e.replaced {
				// The peer kept another connection with us, on its way
				// here (our own dial, or its dial in our accept queue):
				// our dialers wait for it instead of adding one more,
				// which would replace it in turn.
				a.gate.hold(id, a.d.Now().Add(a.d.HandshakeTimeout))
			}
			a.gate.set(a.directGate())
			a.updateGate()
			a.reachDown(id)
			a.relayDown(id)
			a.relayEnded(id, e.conn)
			if e.up || e.inherited {
				a.remember(id, nil, true)
				a.lingering[id] = a.d.Now()
			}
			if e.up {
				a.exchange(c) // addressbook.go: neighbours relay id's ops to us again
			}
			if e.up && !e.left && !e.silent && !e.replaced && !a.stopping() {
				// Ended without a leave so far: the peer failed, or
				// the link did (suspicion.go; a live peer refutes it).
				// A leave the session passed on just before it stopped
				// may still be queued: Terminated is a system message,
				// which the mailbox hands over before user messages,
				// so the leave is looked for once what is queued now
				// has been handled (onEnded), not here.
				a.heardNow(id)
				if a.ended == nil {
					a.ended = map[string]string{}
				}
				a.ended[who.Id] = id
				c.Send(c.Self(), &sessionEnded{pid: who})
			}
			return
		}
	}
}

// connectedChanged tells the ledger when the set of active writers
// changed (connected peers, and writers heard only by heartbeat:
// heartbeat.go), and the WebSocket hub when that set or the peers listed
// as connected (upIDs, what GetPeers answers) changed. The two differ: a
// session that ends while its writer is still heard leaves the first as
// it was and the second without the peer, and a panel that waited for a
// change of the first went on showing the peer connected.
func (a *Actor) connectedChanged(c actor.Context) {
	up := a.upIDs()
	slices.Sort(up)
	hint := !slices.Equal(up, a.listed)
	a.listed = up
	if ids := a.activeIDs(); !slices.Equal(ids, a.connected) {
		a.connected = ids
		c.Send(a.d.Ledger, &messages.PeerSetChanged{Connected: ids})
		hint = true
	}
	if hint {
		a.publishHint()
	}
}

func (a *Actor) upIDs() []string {
	ids := []string{}
	now := a.d.Now()
	for id, e := range a.sessions {
		if (e.up || e.inherited) && !e.silent && !now.Before(e.holdUntil) {
			ids = append(ids, id)
		}
	}
	for id := range a.lingering {
		ids = append(ids, id)
	}
	if len(a.sus.held) > 0 {
		// A session still in handshake (or one that just ended) counts
		// as connected to spare the quorum a flap; not once its peer is
		// suspected (suspicion.go).
		kept := ids[:0]
		for _, id := range ids {
			if e := a.sessions[id]; (e == nil || !e.up) && a.suspected(id) {
				continue
			}
			kept = append(kept, id)
		}
		ids = kept
	}
	sort.Strings(ids)
	return ids
}

// onTunnels publishes what an established session's peer announces. A
// refused announcement also withdraws the peer's previous one: the peer
// said that set is no longer current, and we cannot tell what it serves
// now.
func (a *Actor) onTunnels(m *tunnelsAnnounced) {
	e := a.sessions[m.id]
	if e == nil || !e.pid.Equal(m.pid) || !e.up {
		return
	}
	if m.refused != "" {
		a.diag.tunnelsRefused++
		a.diag.issue(a.d.Now(), messages.ConnectionIssue{Addr: e.conn.RemoteAddr().String(), PeerID: m.id, Kind: "tunnels", Reason: m.refused})
		a.d.Mesh.setAnnounced(m.id, nil)
		return
	}
	a.d.Mesh.setAnnounced(m.id, m.ids)
}

// Flap damping: a peer that went silent flapLimit times within
// flapWindow must, once heard again, wait holdDown before it counts as
// active again (the connection is up throughout). A peer that went silent
// once or twice counts again at its next frame.
const (
	flapLimit  = 3
	flapWindow = 30 * time.Second
	holdDown   = time.Second
)

// onStats keeps a session's stats, unless the session was replaced
// since (its last report was sent before its stop).
func (a *Actor) onStats(m *statsReport) {
	if e := a.sessions[m.id]; e != nil && e.pid.Equal(m.pid) {
		e.stats = m.st
	}
}

// onSilent takes a session's report that its peer went silent or was
// heard again, and updates the active set. A report from a session
// replaced since (sent before its stop) says nothing of the current one:
// a new session that is never silent never reports being heard again,
// so taken, it would keep its peer out of the active set for good.
func (a *Actor) onSilent(c actor.Context, m *peerSilent) {
	e := a.sessions[m.id]
	if e == nil || !e.pid.Equal(m.pid) {
		return
	}
	now := a.d.Now()
	if m.silent {
		if !e.silent {
			a.suspect(c, m.id)
		}
		e.silent = true
		e.silences = append(e.silences, now)
		for len(e.silences) > 0 && now.Sub(e.silences[0]) > flapWindow {
			e.silences = e.silences[1:]
		}
	} else {
		e.silent = false
		if len(e.silences) >= flapLimit {
			e.holdUntil = now.Add(holdDown)
		}
	}
	a.connectedChanged(c)
	// A silent link carries nothing, so the neighbours hear that we do
	// not count on it (addressbook.go) and relay its writer's ops to us.
	a.exchange(c)
}
