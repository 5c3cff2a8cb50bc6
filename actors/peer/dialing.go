package peer

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"time"

	"peerdns/messages"
	"peerdns/transport"
)

type dialTarget struct{ id, addr string }

func parseTarget(s string) (dialTarget, error) {
	s = strings.TrimSpace(s)
	id, addr, found := strings.Cut(s, "@")
	if !found {
		id, addr = "", s
	} else if !messages.ValidPeerID(id) {
		return dialTarget{}, fmt.Errorf("peer id %q is not 64 hex characters", id)
	}
	if !validAddr(addr) {
		return dialTarget{}, fmt.Errorf("%q is not host:port", addr)
	}
	return dialTarget{id: id, addr: addr}, nil
}

// dialOpts: mutual says the peer probably dials us too (it knows us), so
// the higher id of the pair waits a little before its first attempt;
// giveUp drops an address learned second hand that never worked after
// giveUpAfter attempts instead of retrying it forever; retire ends the
// dialer once the dial gate has held it back for retireAfter (a peer
// learned from others: the view dials it while it has room, see
// refillDialers), and bounds such dialers to learnedDialerCap.
type dialOpts struct{ mutual, giveUp, retire bool }

const giveUpAfter = 8

// retireAfter is how long the dial gate holds back a learned peer's
// dialer before it ends. A full view holds back every dialer; without
// retiring, each known peer's dialer would wake every second for good
// (256 goroutines a node at 1,000 peers, 256,000 in a simulation of
// them).
const retireAfter = 30 * time.Second

// dialerEntry is one running dialer.
type dialerEntry struct {
	cancel context.CancelFunc
	id     string // the peer dialed for ("" for any)
	retire bool   // dialOpts.retire: counted in learnedDialers
}

// dialRetired: a retiring dialer ended (dialOpts.retire).
type dialRetired struct {
	addr string
	e    *dialerEntry
}

// learnedDialerCap bounds the dialers of learned peers: twice the active
// view, so a view with no session yet has a dial for every slot and as
// many again for peers that turn out dead or full.
func (a *Actor) learnedDialerCap() int { return 2 * a.d.ActiveView }

// startDialer keeps addr connected (one dialer per address).
func (a *Actor) startDialer(addr, id string, o dialOpts) {
	if _, ok := a.dialers[addr]; ok || !validAddr(addr) || len(a.dialers) >= maxDialers || a.isOwn(addr) {
		return
	}
	if o.retire && a.learnedDialers >= a.learnedDialerCap() {
		return
	}
	ctx, cancel := context.WithCancel(a.ctx)
	e := &dialerEntry{cancel: cancel, id: id, retire: o.retire}
	a.dialers[addr] = e
	if o.retire {
		a.learnedDialers++
	}
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
		Attempt:      gate.attempt,
		OnConn: func(conn transport.Conn) {
			gate.mark(conn.PeerID())
			root.Send(self, &newConn{conn: conn, addr: addr})
		},
		OnFail: func(err error) { root.Send(self, &dialFailed{addr: addr, peer: id, err: err}) },
	}
	if o.giveUp {
		d.GiveUpAfter = giveUpAfter
		d.OnGiveUp = func() { root.Send(self, &dialGaveUp{addr: addr, peer: id, e: e}) }
	}
	if o.retire {
		d.RetireAfter = retireAfter
		d.OnRetire = func() { root.Send(self, &dialRetired{addr: addr, e: e}) }
	}
	go d.Run(ctx)
}

// dropDialer stops addr's dialer, if any, and forgets it.
func (a *Actor) dropDialer(addr string) {
	e := a.dialers[addr]
	if e == nil {
		return
	}
	e.cancel()
	delete(a.dialers, addr)
	if e.retire {
		a.learnedDialers--
	}
}

// refillDialers starts dialers for known peers we have neither a session
// nor a dialer with while the view has room, or while a writer cut off
// from us (beyond) may have one dial past a full view: those first, then
// known peers in random order, at most as many as the view takes (plus
// the cut-off ones) and within learnedDialerCap. This is how the view
// draws on the passive view (the address book) once the dialers of a
// full view have retired.
func (a *Actor) refillDialers(beyond map[string]bool) {
	want := a.viewRoom() + len(beyond)
	if want == 0 || a.learnedDialers >= a.learnedDialerCap() {
		return
	}
	var first, rest []string
	for id, k := range a.known {
		if a.sessions[id] != nil || a.dialingAny(k.Addrs) {
			continue
		}
		if beyond[id] {
			first = append(first, id)
		} else {
			rest = append(rest, id)
		}
	}
	rand.Shuffle(len(rest), func(i, j int) { rest[i], rest[j] = rest[j], rest[i] })
	for _, id := range append(first, rest...) {
		if want == 0 || a.learnedDialers >= a.learnedDialerCap() {
			return
		}
		k := a.known[id]
		for _, addr := range k.Addrs {
			a.startDialer(addr, id, dialOpts{mutual: true, giveUp: k.hearsay(addr), retire: true})
		}
		want--
	}
}

// retireDialersOf ends the learned dialers of a peer held off for
// leaveHold (it refused us, or left): they would only be held back until
// then, keeping the place of a dial to someone else (learnedDialerCap).
func (a *Actor) retireDialersOf(id string) {
	k := a.known[id]
	if k == nil {
		return
	}
	for _, addr := range k.Addrs {
		if e := a.dialers[addr]; e != nil && e.retire {
			a.dropDialer(addr)
		}
	}
}

// dialingAny reports whether a dialer runs for one of addrs.
func (a *Actor) dialingAny(addrs []string) bool {
	for _, addr := range addrs {
		if a.dialers[addr] != nil {
			return true
		}
	}
	return false
}

// maxSelfAddrs bounds the addresses remembered as our own.
const maxSelfAddrs = 64

// isOwn reports whether addr is ours: one we advertise, or one a dial
// found to reach this very node (transport.ErrSelf). A peer's loopback
// or wildcard address is ours on another host where we use the same
// port; dialing it is a TLS handshake with ourselves.
func (a *Actor) isOwn(addr string) bool {
	if a.selfAddrs[addr] {
		return true
	}
	for _, own := range a.advertise() {
		if own == addr {
			return true
		}
	}
	return false
}

// reachedSelf remembers an address a dial found to be ours.
func (a *Actor) reachedSelf(addr string) {
	if len(a.selfAddrs) < maxSelfAddrs {
		a.selfAddrs[addr] = true
	}
}

// dialGate lets dialer goroutines skip peers that are connected or being
// dialed by another dialer, peers that left our active view a moment ago,
// and any dial while the active view has no room (view.go). mu guards
// the fields below.
//
// One exception to one dial at a time a peer: while we join, the
// addresses of the invite (the router's mapping, the address a probe
// saw, the LAN one) are dialed side by side, a dialStagger apart, while
// a dial to the inviter waits (setJoining), the happy-eyeballs way (RFC
// 8305). An address that drops every packet holds its dial for the
// whole handshake timeout (10 s), and a joiner that began with one took
// 10 s more per such address to reach its inviter through the one that
// answered. The first dial through cancels the others (mark). Other
// dials, and the inviter's once we joined, keep to one at a time: dials
// side by side to a learned peer's stale addresses slowed the overlay's
// healing around a frozen peer (bench/scale).
type dialGate struct {
	mu        sync.Mutex
	connected map[string]bool
	dialing   map[string]peerDials
	inviter   string               // the peer we join through; "" once joined (setJoining)
	held      map[string]time.Time // peer → no dial before then
	room      int                  // neighbours the active view still takes
	beyond    map[string]bool      // peers one dial may go to even when room is 0
	inflight  int                  // dials Skip let through and After has not ended
	// attempts: dials in flight per peer id, cancelled once another dial
	// to that peer succeeds (track, mark).
	attempts map[string]map[int]context.CancelFunc
	seq      int
	now      func() time.Time
}

func newDialGate(room int, now func() time.Time) *dialGate {
	return &dialGate{connected: map[string]bool{}, dialing: map[string]peerDials{}, held: map[string]time.Time{},
		attempts: map[string]map[int]context.CancelFunc{}, room: room, now: now}
}

// peerDials are one peer's dials in flight: how many, and when the last
// of them began.
type peerDials struct {
	n    int
	last time.Time
}

// dialStagger is how long a dial to the inviter goes alone before
// another of the invite's addresses is dialed beside it (setJoining). A
// handshake that gets through takes a round trip or two; a dialer's
// next look at the gate comes a second later (transport.Dialer's
// IdleCheck).
const dialStagger = time.Second

// setJoining names the inviter we join through ("" once joined or
// given up): dials to it go side by side, dialStagger apart (dialGate).
func (g *dialGate) setJoining(inviter string) {
	g.mu.Lock()
	g.inviter = inviter
	g.mu.Unlock()
}

// skip reports whether a dial to id must wait: see dialGate.
func (g *dialGate) skip(id string) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if id != "" {
		if g.connected[id] {
			return true
		}
		if d, ok := g.dialing[id]; ok && (id != g.inviter || g.now().Sub(d.last) < dialStagger) {
			return true
		}
		if until, ok := g.held[id]; ok {
			if g.now().Before(until) {
				return true
			}
			delete(g.held, id)
		}
	}
	if g.inflight >= g.room && !(g.beyond[id] && g.inflight < g.room+1) {
		return true // the active view is full, or enough dials are under way to fill it
	}
	g.inflight++
	if id != "" {
		g.dialing[id] = peerDials{n: g.dialing[id].n + 1, last: g.now()}
	}
	return false
}

// done ends a dial skip let through.
func (g *dialGate) done(id string) {
	g.mu.Lock()
	if d, ok := g.dialing[id]; ok && d.n > 1 {
		d.n--
		g.dialing[id] = d
	} else {
		delete(g.dialing, id)
	}
	if g.inflight > 0 {
		g.inflight--
	}
	g.mu.Unlock()
}

// setRoom sets how many more neighbours the active view takes.
func (g *dialGate) setRoom(n int) {
	g.mu.Lock()
	g.room = n
	g.mu.Unlock()
}

// hold keeps dialers off id until then, or until a hold already set
// ends, whichever is later.
func (g *dialGate) hold(id string, until time.Time) {
	g.mu.Lock()
	if len(g.held) >= maxKnownPeers {
		for k, t := range g.held {
			if !g.now().Before(t) {
				delete(g.held, k)
			}
		}
	}
	if until.After(g.held[id]) {
		g.held[id] = until
	}
	g.mu.Unlock()
}

// mark records a fresh connection from one of our dials before the
// supervisor has seen it, and settles the peer (below).
func (g *dialGate) mark(id string) {
	g.mu.Lock()
	g.connected[id] = true
	g.cancelLocked(id)
	g.mu.Unlock()
}

// settle cancels our dials to id still in flight: a connection to id
// (ours or the peer's) was admitted. Each would otherwise complete a
// second connection a moment later (a punch dial whose retransmission
// gets through once the peer's dial opened the mapping, say), and a
// second connection may replace the first (its dialer has the lower id,
// or dialed both and its token is lower: connections.go, replaces): a
// needless handshake, the peer briefly not connected, and the tunnel
// streams open on a QUIC connection cut. Cancelling cannot break
// a connection the peer has already taken: the peer admits a connection
// only once our side's handshake is over and our Dial has returned.
func (g *dialGate) settle(id string) {
	g.mu.Lock()
	g.cancelLocked(id)
	g.mu.Unlock()
}

func (g *dialGate) cancelLocked(id string) {
	for _, cancel := range g.attempts[id] {
		cancel()
	}
	delete(g.attempts, id)
}

// attempt derives the context of one dial to id, cancelled when another
// dial to id succeeds first (mark); release drops it once the dial has
// returned.
func (g *dialGate) attempt(ctx context.Context, id string) (context.Context, func()) {
	if id == "" {
		return ctx, func() {}
	}
	actx, cancel := context.WithCancel(ctx)
	g.mu.Lock()
	g.seq++
	k := g.seq
	if g.attempts[id] == nil {
		g.attempts[id] = map[int]context.CancelFunc{}
	}
	g.attempts[id][k] = cancel
	g.mu.Unlock()
	return actx, func() {
		g.mu.Lock()
		if m := g.attempts[id]; m != nil {
			delete(m, k)
			if len(m) == 0 {
				delete(g.attempts, id)
			}
		}
		g.mu.Unlock()
		cancel()
	}
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

// isHeld reports whether dialers are kept off id now.
func (g *dialGate) isHeld(id string) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	until, ok := g.held[id]
	return ok && g.now().Before(until)
}

// unhold lets dialers at id again.
func (g *dialGate) unhold(id string) {
	g.mu.Lock()
	delete(g.held, id)
	g.mu.Unlock()
}

// setBeyond sets the peers one dial may go to beyond the view's room.
func (g *dialGate) setBeyond(ids map[string]bool) {
	g.mu.Lock()
	g.beyond = ids
	g.mu.Unlock()
}
