package peer

import (
	"context"
	"sort"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"peerdns/messages"
	"peerdns/transport"
)

// Relayed connections. A known peer that stays unconnected for
// relayAfter is dialed through a relay: a connected peer on a direct path
// (QUIC or TCP) that said, in its last peer exchange, that it is
// connected to the target (any direct peer when none said so). One relay
// attempt per target is in flight; failures back off from relayRetryMin
// doubling to relayRetryMax and rotate through the candidate relays. The
// relayed connection then goes through the same handshake as any other
// (the target decides whether we are a writer), and the rest of the
// session (ledger, tunnels, plugin calls) runs over it unchanged.
//
// A relayed peer keeps being dialed directly: its relayed session does
// not count in the dialers' gate, and its hello's addresses get dialers
// that never give up. When a direct connection comes up it replaces the
// relayed one (a better path wins over the lower-id rule, at both ends
// alike), and the relayed connection is drained, not cut: the tunnel and
// plugin streams open on it finish there while new ones use the direct
// path (transport.Drain).
//
// relayAfter is short on purpose: a relayed session costs the relay one
// stream and the pair nothing it would not spend anyway (direct dials
// and punching go on, and a direct path that opens takes the traffic
// over), while every second spent waiting is a second a pair that cannot
// punch (symmetric NATs, no UDP) is not connected. Punching between two
// endpoint-independent NATs usually succeeds within about a second, so
// most punchable pairs never reach a relay; the supervisor's tick (1 s by
// default) rounds the wait up to the next tick.
const (
	relayAfter    = time.Second
	relayRetryMin = 2 * time.Second
	relayRetryMax = 30 * time.Second
)

// relayDialer is the part of the endpoint that dials through a relay
// (transport.MultiEndpoint); an endpoint without it never relays.
type relayDialer interface {
	DialRelay(ctx context.Context, via transport.Conn, target string) (transport.Conn, error)
}

// pathStatser is the endpoint's path counters (transport.MultiEndpoint).
type pathStatser interface {
	Stats() transport.PathStats
}

// relayPlan is the supervisor's relay bookkeeping; touched only from
// Receive.
type relayPlan struct {
	missing  map[string]time.Time       // target -> since when it has no session
	next     map[string]time.Time       // target -> earliest next attempt
	tries    map[string]int             // target -> failed attempts in a row
	inFlight map[string]bool            // target -> an attempt is running
	reaches  map[string]map[string]bool // relay -> peers it said it is connected to
}

func (p *relayPlan) init() {
	if p.missing == nil {
		p.missing, p.next, p.tries = map[string]time.Time{}, map[string]time.Time{}, map[string]int{}
		p.inFlight, p.reaches = map[string]bool{}, map[string]map[string]bool{}
	}
}

// relayLearned notes whom a connected peer is connected to (its peer
// exchange): of the peers it lists, those we know, the only ones a
// relay is ever picked for (relayTick dials known peers). The note goes
// when the session ends (relayDown): relays are picked among the
// sessions, so the notes are at most one per session, each at most the
// known peers long, whatever a peer lists (made-up ids, thousands of
// them) and however many peers come and go.
func (a *Actor) relayLearned(from string, peers []messages.PeerInfo) {
	if a.sessions[from] == nil {
		return // ended meanwhile: its note would outlive it
	}
	a.relays.init()
	m := make(map[string]bool)
	for _, p := range peers {
		if a.known[p.ID] != nil {
			m[p.ID] = true
		}
	}
	a.relays.reaches[from] = m
}

// relayDown drops what a peer whose session ended said it is connected
// to.
func (a *Actor) relayDown(id string) { delete(a.relays.reaches, id) }

// relayTick starts relay attempts for known peers unconnected for
// relayAfter.
func (a *Actor) relayTick(now time.Time) {
	rd, ok := a.d.Endpoint.(relayDialer)
	if !ok || !a.netKnown {
		return
	}
	p := &a.relays
	p.init()
	a.pruneRelays()
	// A relayed session is a neighbour like any other: no more attempts
	// in flight than the active view has room for (view.go).
	room := a.viewRoom() - len(p.inFlight)
	for id := range a.known {
		if id == a.self || a.sessions[id] != nil {
			continue
		}
		if room <= 0 {
			break
		}
		if a.gate.isHeld(id) {
			continue
		}
		since, seen := p.missing[id]
		if !seen {
			p.missing[id] = now
			continue
		}
		if now.Sub(since) < relayAfter || p.inFlight[id] || now.Before(p.next[id]) {
			continue
		}
		via := a.pickRelay(id, p.tries[id])
		if via == nil {
			continue
		}
		p.inFlight[id] = true
		room--
		target, viaID := id, via.PeerID()
		root, self, ctx := a.sys.Root, a.pid, a.ctx
		a.diag.attempt()
		go func() {
			conn, err := rd.DialRelay(ctx, via, target)
			root.Send(self, &relayDone{target: target, via: viaID, conn: conn, err: err})
		}()
	}
}

// pruneRelays drops the bookkeeping of peers no longer known, and the
// waits of those now connected. A peer forgotten (the address book's
// caps, a leave) takes its back-off with it: the maps stay within the
// known peers however many come and go.
func (a *Actor) pruneRelays() {
	p := &a.relays
	for id := range p.missing {
		if a.known[id] == nil || a.sessions[id] != nil {
			delete(p.missing, id)
		}
	}
	for id := range p.tries {
		if a.known[id] == nil {
			delete(p.tries, id)
			delete(p.next, id)
		}
	}
}

// pickRelay chooses the try-th candidate relay for target: connected
// peers on a direct path, those that reach target first.
func (a *Actor) pickRelay(target string, try int) transport.Conn {
	var reach, other []string
	for id, e := range a.sessions {
		if !e.up || id == target {
			continue
		}
		if p, _ := transport.PathOf(e.conn); p == transport.PathRelayed {
			continue
		}
		if a.relays.reaches[id][target] {
			reach = append(reach, id)
		} else {
			other = append(other, id)
		}
	}
	sort.Strings(reach)
	sort.Strings(other)
	all := append(reach, other...)
	if len(all) == 0 {
		return nil
	}
	return a.sessions[all[try%len(all)]].conn
}

// relayDone: a relay attempt ended.
type relayDone struct {
	target, via string
	conn        transport.Conn
	err         error
}

func (a *Actor) onRelayDone(c actor.Context, m *relayDone) {
	p := &a.relays
	p.init()
	delete(p.inFlight, m.target)
	if m.err != nil {
		p.tries[m.target]++
		d := relayRetryMin << min(p.tries[m.target]-1, 4)
		p.next[m.target] = a.d.Now().Add(min(d, relayRetryMax))
		a.diag.failed++
		a.diag.issue(a.d.Now(), messages.ConnectionIssue{Addr: "relay:" + short(m.via), PeerID: m.target, Kind: "relay", Reason: m.err.Error()})
		return
	}
	delete(p.tries, m.target)
	delete(p.next, m.target)
	a.log.Info("peer reached through a relay", "peer", short(m.target), "relay", short(m.via))
	a.onConn(c, &newConn{conn: m.conn})
}

// relayEnded notes that a relayed session with target ended (the relay
// dropped it, or a byte it changed failed the TLS record): the next
// attempt, after relayRetryMin, goes through the next candidate relay.
func (a *Actor) relayEnded(target string, c transport.Conn) {
	if p, _ := transport.PathOf(c); p != transport.PathRelayed {
		return
	}
	a.relays.init()
	a.relays.tries[target]++
	a.relays.next[target] = a.d.Now().Add(relayRetryMin)
}

// pathRank orders paths: a lower rank is better.
func pathRank(c transport.Conn) int {
	switch p, _ := transport.PathOf(c); p {
	case transport.PathQUIC:
		return 0
	case transport.PathTCP:
		return 1
	}
	return 2
}

// directGate lists the sessions that keep direct dialers away: all but
// the relayed ones, whose peers are still dialed directly.
func (a *Actor) directGate() []string {
	ids := make([]string, 0, len(a.sessions))
	for id, e := range a.sessions {
		if p, _ := transport.PathOf(e.conn); p != transport.PathRelayed {
			ids = append(ids, id)
		}
	}
	return ids
}

// keepDialingDirect gives a relayed peer's own addresses dialers that
// never give up: the first maxAddrsPerPeer of its hello, as many as its
// address book entry holds. A hello may list any number, each one a
// dialer for as long as we run and a slot of maxDialers.
func (a *Actor) keepDialingDirect(id string, hello *messages.Hello) {
	addrs, _ := mergeAddrs(nil, hello.Addrs, maxAddrsPerPeer)
	for _, addr := range addrs {
		a.startDialer(addr, id, dialOpts{mutual: true})
	}
}

// pathDiag fills a peer's path fields and the endpoint's counters.
// pathDiag fills the transport fields of a peer's diagnostics, and makes
// Path say the whole story in one word: "direct" or "punched" over QUIC,
// else the stream path ("tcp", or "relayed" with Via the relay).
func pathDiag(p *messages.PeerDiag, c transport.Conn) {
	p.Transport, p.Relay = transport.PathOf(c)
	switch p.Transport {
	case "tcp":
		p.Path, p.Via = "tcp", ""
	case "relayed":
		p.Path, p.Via = "relayed", p.Relay
	}
}

func (a *Actor) pathCounters() *messages.PathCounters {
	ps, ok := a.d.Endpoint.(pathStatser)
	if !ok {
		return nil
	}
	s := ps.Stats()
	return &messages.PathCounters{
		TCPAccepted: s.TCPAccepted, TCPDialed: s.TCPDialed, QUICUpgrades: s.QUICUpgrades, TCPRefused: s.TCPRefused, TCPBadHandshake: s.TCPBadHandsake, SendLosses: s.SendLosses,
		UDPGRO: s.UDPGRO, GROMerged: s.GROMerged,
		RelayActive: s.RelayActive, RelayServed: s.RelayServed, RelayBytes: s.RelayBytes, RelaySlowed: s.RelaySlowed,
		RelayRefusedBusy: s.RelayRefusedBusy, RelayRefusedWriter: s.RelayRefusedWriter, RelayRefusedOther: s.RelayRefusedOther,
		RelayedIn: s.RelayedIn, RelayedInBad: s.RelayedInBad, RelayedInRefused: s.RelayedInRefused, RelayedOut: s.RelayedOut, RelayedOutFailed: s.RelayedOutFailed,
	}
}
