package peer

// Reach: the addresses peers see us at, introductions and hole punching,
// and the NAT-type probe.
//
// Observed addresses. Each side's hello says where it sees the
// connection come from (Hello.Observed). A node advertises an observed
// address only once two different connected peers report it: one peer
// alone, lying or not, changes nothing we tell others.
//
// Introductions. A node that learns of a peer from a connected peer's
// exchange and is not connected to it a moment later asks that peer to
// introduce them (ConnectRequest). The introducer sends each side a
// Connect naming the other: where it sees the other's connection come
// from (Observed) and the addresses the other put in its hello. Both
// then dial at once from their one UDP socket: each side's first packets
// open its own router's mapping towards the other, so the other's
// packets get in. The dials retry on a schedule inside a UDP mapping's
// usual lifetime (30 s on Linux conntrack, about a minute on home
// routers): the QUIC handshake retransmits its first packet itself
// (200 ms, doubling) for punchAttempt, three attempts punchGap apart.
// Only a node with room in its active view asks, for no more peers at
// once than that room, counting requests and punches already on their
// way (pendingNeighbours), and a side whose view is at its cap
// (counted the same way) punches only when a neighbour it would drop for the
// newcomer has a view to spare, and otherwise for one introduction per
// leaveHold (any number towards a writer its heartbeats say it is cut
// off from).
//
// Refusals. A Connect is refused (and counted) unless its sender is a
// connected writer, it names a writer other than us and the sender,
// and every address in it is an IP literal (no names to resolve) that
// an authenticated peer reported: the introducer's own observation, or
// an address we already hold for that peer from an authenticated
// session (its hello or a writer's peer exchange). Addresses that fail
// are dropped; a Connect left with none is refused. Punch dials are
// rate-limited (punchBurst dial starts, refilled at punchRate) and never
// go to an address learned any other way, so the node cannot be made to
// spray UDP at a victim. Whether the two are writers is the ledger's
// answer, kept as the heartbeats keep theirs; at most maxWriterAsks
// Connects wait on it at once and more are refused, so Connects naming
// made-up peers cannot queue questions before the ledger's own work.
//
// NAT type. Once connected, a node asks a peer to probe it: the peer
// sends a packet from a second, fresh UDP socket to where it sees us (if
// it arrives, unsolicited traffic reaches us) and tells us that socket's
// port; we send a packet there from our one socket and the peer reports
// where it came from. The same address as our main connection's means
// the router keeps one mapping for every destination
// (endpoint-independent); another port means a new mapping per
// destination (symmetric). An observed address equal to one of our own
// interface addresses means public. Observations from several peers are
// compared too.

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"slices"
	"sort"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"peerdns/messages"
	"peerdns/transport"
)

// Tunables of introductions and punching.
const (
	introDelay     = 250 * time.Millisecond // wait this long for a direct dial before asking
	introMaxGap    = 30 * time.Second       // longest wait between two introduction requests
	introEvery     = time.Second            // an introducer introduces one pair at most this often
	punchAttempt   = 4 * time.Second        // one punch dial (QUIC retransmits inside it)
	punchGap       = 2 * time.Second        // pause between punch dials to one address
	punchTries     = 3                      // punch dials per address and introduction
	punchWindow    = punchTries * (punchAttempt + punchGap)
	punchBurst     = 16          // punch dial starts allowed at once
	punchRate      = 2.0         // punch dial starts per second, refilled
	connectPerPeer = time.Second // one Connect per (sender, target) this often
	maxPunchAddrs  = 4           // addresses punched per Connect
	probeTimeout   = 3 * time.Second
	probeEvery     = 10 * time.Minute
)

// reachFrame: a session got a reach frame from its established peer.
type reachFrame struct {
	from string
	pid  *actor.PID
	m    *messages.Envelope
}

// sendFrame: the supervisor has a frame for the session's peer.
type sendFrame struct{ env *messages.Envelope }

// rawProbe: a probe packet reached our UDP socket.
type rawProbe struct {
	nonce uint64
	from  netip.AddrPort
}

// punchEnded: a punch dialer stopped without a connection.
type punchEnded struct{ peer, addr string }

// reachState is the supervisor's reach bookkeeping (touched only from
// Receive).
type reachState struct {
	observed map[string]string // peer id → where it sees us (connected peers)
	// via: a peer we are not connected to → the connected peer whose
	// exchange listed it (the one to ask for an introduction).
	via    map[string]string
	intros map[string]*introState
	// fruitless: introductions asked for a peer with no direct session
	// coming of them (introwait.go).
	fruitless map[string]*introFruitless
	// punching: peer id → the introduction being punched.
	punching map[string]*punchState
	// lastIntro: "from>target" → when we last introduced that pair.
	lastIntro map[string]time.Time
	// lastConnect: "sender>target" → when we last took a Connect.
	lastConnect map[string]time.Time
	// checking: Connects waiting on the ledger's IsWriter answers.
	checking int
	tokens   float64
	tokensAt time.Time
	// pastCap: when we last punched with the active view at its cap.
	pastCap time.Time

	probe    *probeState
	probedAt time.Time
	probedBy map[string]bool
	dialBack *bool
	// probeMain / probeSeen: where the probing peer saw our connection
	// and our packet to its second socket (the last finished probe).
	probeMain, probeSeen string

	punches, punched, refused, introductions int64
}

type introState struct {
	learned time.Time
	next    time.Time
	gap     time.Duration
	asked   time.Time // the last request went out (zero: none yet)
}

type punchState struct {
	via   string
	until time.Time
	addrs map[string]bool
}

type probeState struct {
	peer     string
	nonce    uint64
	started  time.Time
	main     string // where this peer sees our connection
	seen     string
	dialBack bool
	sent     bool
}

func newReachState(now time.Time) *reachState {
	return &reachState{
		observed: map[string]string{}, via: map[string]string{}, intros: map[string]*introState{}, fruitless: map[string]*introFruitless{},
		punching: map[string]*punchState{}, lastIntro: map[string]time.Time{}, lastConnect: map[string]time.Time{},
		probedBy: map[string]bool{}, tokens: punchBurst, tokensAt: now,
	}
}

// takeToken spends one punch dial start, if the bucket has one.
func (r *reachState) takeToken(now time.Time) bool {
	r.tokens = min(punchBurst, r.tokens+now.Sub(r.tokensAt).Seconds()*punchRate)
	r.tokensAt = now
	if r.tokens < 1 {
		return false
	}
	r.tokens--
	return true
}

// agreedObserved lists the observed addresses at least two connected
// peers report, most reported first.
func agreedObserved(observed map[string]string) []string {
	counts := map[string]int{}
	for _, a := range observed {
		counts[a]++
	}
	var out []string
	for a, n := range counts {
		if n >= 2 {
			out = append(out, a)
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if counts[out[i]] != counts[out[j]] {
			return counts[out[i]] > counts[out[j]]
		}
		return out[i] < out[j]
	})
	return out
}

// observedList is every observed address with its number of reporters.
func observedList(observed map[string]string) []messages.ObservedAddr {
	counts := map[string]int{}
	for _, a := range observed {
		counts[a]++
	}
	out := make([]messages.ObservedAddr, 0, len(counts))
	for a, n := range counts {
		out = append(out, messages.ObservedAddr{Addr: a, Reporters: n})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Addr < out[j].Addr })
	return out
}

// classifyNAT says what kind of NAT (if any) the node is behind, from the
// observed addresses of its connected peers, the last probe (main: where
// the probing peer saw our connection; seen: where it saw our packet to
// its second socket) and our own interface addresses.
func classifyNAT(local []string, observed map[string]string, main, seen string) string {
	own := map[string]bool{}
	for _, a := range local {
		own[a] = true
	}
	if own[main] {
		return messages.NATPublic
	}
	for _, a := range observed {
		if own[a] {
			return messages.NATPublic
		}
	}
	if main != "" && seen != "" {
		if main == seen {
			return messages.NATEndpointIndependent
		}
		return messages.NATSymmetric
	}
	// Several peers: the same public IP with different ports means a new
	// mapping per destination; two peers seeing the same address, one.
	byIP := map[netip.Addr]map[uint16]int{}
	for _, a := range observed {
		ap, err := netip.ParseAddrPort(a)
		if err != nil {
			continue
		}
		if byIP[ap.Addr()] == nil {
			byIP[ap.Addr()] = map[uint16]int{}
		}
		byIP[ap.Addr()][ap.Port()]++
	}
	kind := messages.NATUnknown
	for _, ports := range byIP {
		if len(ports) > 1 {
			return messages.NATSymmetric
		}
		for _, n := range ports {
			if n >= 2 {
				kind = messages.NATEndpointIndependent
			}
		}
	}
	return kind
}

// reachView is what the node believes about itself.
func (a *Actor) reachView() *messages.Reach {
	r := a.reach
	manual := append([]string{}, a.d.Advertise...)
	v := &messages.Reach{
		NAT:        a.natKind(),
		Advertised: append([]string{}, a.advertise()...),
		Manual:     manual,
		Observed:   observedList(r.observed),
		DialBack:   r.dialBack,
		Punches:    r.punches, PunchedConnections: r.punched, RefusedConnects: r.refused, Introductions: r.introductions,
		QUICRetries: a.quicRetried, QUICRetriesFailed: a.quicRetryFailed,
	}
	if a.d.PortMap != nil {
		v.PortMapping = a.d.PortMap()
	}
	if !r.probedAt.IsZero() {
		v.ProbedAt = r.probedAt.UnixMilli()
	}
	return v
}

// natKind is what the node believes about its reach: classifyNAT over
// the UDP observations and the probe; "no-udp" when it has peers but
// reaches none of them over QUIC while some over TCP (its network drops
// UDP: QUIC is always dialled first and wins wherever UDP gets through).
func (a *Actor) natKind() string {
	r := a.reach
	kind := classifyNAT(a.ifaceAddrs(), r.observed, r.probeMain, r.probeSeen)
	if kind != messages.NATUnknown {
		return kind
	}
	tcp := false
	for _, e := range a.sessions {
		if !e.up {
			continue
		}
		switch p, _ := transport.PathOf(e.conn); p {
		case transport.PathQUIC:
			return kind
		case transport.PathTCP:
			tcp = true
		}
	}
	if tcp {
		return messages.NATNoUDP
	}
	return kind
}

// ifaceAddrs are our interface addresses with the bound port, cached.
func (a *Actor) ifaceAddrs() []string {
	if now := a.d.Now(); a.adv == nil || now.Sub(a.advAt) > 30*time.Second {
		a.adv, a.advAt = advertised(a.d.Endpoint.Addr()), now
	}
	return a.adv
}

// advertise lists our addresses for hellos and invites: the
// --advertise-addr ones, the router's port mapping (mappedAddr), observed
// addresses two peers agree on, then the interface addresses (a wildcard
// bind expanded).
func (a *Actor) advertise() []string {
	var out []string
	seen := map[string]bool{}
	add := func(list []string) {
		for _, s := range list {
			if !seen[s] && len(out) < maxAddrsPerPeer {
				seen[s] = true
				out = append(out, s)
			}
		}
	}
	add(a.d.Advertise)
	if m := a.mappedAddr(); m != "" {
		add([]string{m})
	}
	if a.reach != nil {
		add(agreedObserved(a.reach.observed))
	}
	add(a.ifaceAddrs())
	return out
}

// udpObserved is the address conn comes from as our UDP socket sees it,
// for the peer's hello; "" over a TCP or relayed path, whose remote
// address says nothing of the peer's UDP mapping (a TCP port, or the
// relay's), so observations, NAT kinds and punches never mix them in.
func udpObserved(conn transport.Conn) string {
	if p, _ := transport.PathOf(conn); p != transport.PathQUIC {
		return ""
	}
	return conn.RemoteAddr().String()
}

// reachUp records where a newly connected peer sees us (only over QUIC:
// see udpObserved). A session through a relay keeps the peer's pending
// introduction, so asking goes on (relayedOnly).
func (a *Actor) reachUp(id string, hello *messages.Hello, conn transport.Conn) {
	r := a.reach
	if p, _ := transport.PathOf(conn); p != transport.PathRelayed {
		delete(r.via, id)
		delete(r.intros, id)
		delete(r.fruitless, id)
	}
	if hello == nil {
		return
	}
	if ap, ok := messages.PunchAddr(hello.Observed); ok && udpObserved(conn) != "" {
		r.observed[id] = ap.String()
	} else {
		delete(r.observed, id)
	}
}

// reachDown forgets what a disconnected peer observed.
func (a *Actor) reachDown(id string) {
	delete(a.reach.observed, id)
	delete(a.reach.probedBy, id)
}

// pathOf says how a new connection reaches its peer.
func (a *Actor) pathOf(m *newConn) (path, via string) {
	if m.path != "" {
		return m.path, m.via
	}
	if p := a.reach.punching[m.conn.PeerID()]; p != nil && a.d.Now().Before(p.until) {
		// The peer's own punch dial got through first.
		return "punched", p.via
	}
	return "direct", ""
}

// reachLearned notes which connected peer told us of peers we lack.
func (a *Actor) reachLearned(from string, peers []messages.PeerInfo) {
	now := a.d.Now()
	for _, p := range peers {
		if p.ID == a.self || !messages.ValidPeerID(p.ID) || a.known[p.ID] == nil {
			continue
		}
		if a.reachedDirectly(p.ID, false) {
			continue
		}
		a.reach.via[p.ID] = from
		if a.reach.intros[p.ID] == nil && len(a.reach.intros) < maxDialers {
			a.reach.intros[p.ID] = &introState{learned: now, next: now.Add(introDelay), gap: introDelay}
			// The first request goes out after introDelay, not at the
			// next tick; later ones follow on ticks.
			sendLater(a.sys, a.pid, introDelay, &introDue{id: p.ID})
		}
	}
}

// relayedOnly reports whether id's session runs through a relay. The
// peer is connected, yet introductions and punching go on for it: a
// punched path, once up, replaces the relayed session (a better path
// wins: connections.go), which is drained (relay.go). Without this, a
// pair whose relayed session came up before the introducer's Connect
// arrived (relayAfter is a second; a loaded machine can take longer to
// introduce) stayed relayed for good.
func (a *Actor) relayedOnly(id string) bool {
	e := a.sessions[id]
	if e == nil || e.conn == nil {
		return false
	}
	p, _ := transport.PathOf(e.conn)
	return p == transport.PathRelayed
}

// reachedDirectly reports whether id has a session (an up one, with up)
// that does not run through a relay: nothing to introduce or punch.
func (a *Actor) reachedDirectly(id string, up bool) bool {
	e := a.sessions[id]
	return e != nil && (e.up || !up) && !a.relayedOnly(id)
}

// introDue: the first introduction request for a peer is due.
type introDue struct{ id string }

// askIntro asks the peer that told us of id to introduce us, when the
// request is due and we are still not connected, or connected only
// through a relay (a punched path would replace that session, so it
// needs no room in the view).
func (a *Actor) askIntro(c actor.Context, id string, now time.Time) {
	if via := a.introDueNow(id, now); via != nil {
		c.Send(via, &sendFrame{env: &messages.Envelope{Kind: messages.KindConnectRequest, ConnectRequest: &messages.ConnectRequest{Peer: id}}})
	}
}

// introDueNow decides askIntro's request: the session to send it on
// (nil: none now), with the request counted as sent.
func (a *Actor) introDueNow(id string, now time.Time) *actor.PID {
	r := a.reach
	in := r.intros[id]
	if in == nil || a.reachedDirectly(id, false) || now.Before(in.next) {
		return nil
	}
	if !a.relayedOnly(id) && !a.introRoom(id, now) {
		return nil // the active view is full, or will be (view.go): ask again later
	}
	if a.introWaits(id, now) {
		return nil // the last ones came to nothing (introwait.go)
	}
	e := a.sessions[r.via[id]]
	if e == nil || !e.up {
		delete(r.intros, id) // the next exchange names another
		return nil
	}
	in.asked = now
	in.gap = min(in.gap*2, introMaxGap)
	in.next = now.Add(in.gap)
	a.introAsked(id, now)
	return e.pid
}

// introRoom reports whether an introduction to id may be asked for now:
// the view has room for it beside the sessions already on their way,
// and id did not leave us a moment ago.
func (a *Actor) introRoom(id string, now time.Time) bool {
	return a.viewRoom() > a.pendingNeighbours(now, id) && !a.gate.isHeld(id)
}

// introAnswer is how long an introduction request counts as on its way
// to a session while no Connect (and so no punch) has followed it.
const introAnswer = 2 * time.Second

// pendingNeighbours counts the peers other than except that may become
// neighbours without another decision of ours: an introduction we asked
// for within introAnswer, a punch dialer still running; each without a
// session yet.
//
// Introductions and the Connects they bring spend this budget with the
// view's room, as the dial gate spends its room on dials in flight (our
// own dials are not counted here: the gate bounds them, so a node's
// sessions on their way are at most twice its room; counting them too
// held a joining node's introductions back behind dials to peers that
// do not answer, and bursts in the 300-writer simulation's first
// seconds took 3-3.5 s to reach every node instead of 0.55).
// Without it a node one neighbour short asked for an introduction to
// every peer a leave's sample named, both sides of each punched, all the
// sessions came up together, and trimView sent leaves to as many
// established neighbours, each of whom was then short and did the same:
// in a fleet of 50 public nodes under a burst of claims, 1,000-1,150
// sessions a burst, three in four of them punched.
func (a *Actor) pendingNeighbours(now time.Time, except string) int {
	ids := map[string]bool{}
	for id, in := range a.reach.intros {
		if !in.asked.IsZero() && now.Sub(in.asked) < introAnswer {
			ids[id] = true
		}
	}
	for id, p := range a.reach.punching {
		if len(p.addrs) > 0 {
			ids[id] = true
		}
	}
	delete(ids, except)
	n := 0
	for id := range ids {
		if _, ok := a.sessions[id]; !ok {
			n++
		}
	}
	return n
}

// reachTick asks for introductions that are due and runs the probe.
func (a *Actor) reachTick(c actor.Context, now time.Time) {
	r := a.reach
	for id := range r.intros {
		a.askIntro(c, id, now)
	}
	a.pruneFruitless(now)
	for id, p := range r.punching {
		if now.After(p.until) {
			delete(r.punching, id)
		}
	}
	for k, t := range r.lastIntro {
		if now.Sub(t) > time.Minute {
			delete(r.lastIntro, k)
		}
	}
	for k, t := range r.lastConnect {
		if now.Sub(t) > time.Minute {
			delete(r.lastConnect, k)
		}
	}
	a.probeTick(c, now)
}

// onReach handles a reach frame from an established session.
func (a *Actor) onReach(c actor.Context, m *reachFrame) {
	e := a.sessions[m.from]
	if e == nil || !e.pid.Equal(m.pid) || !e.up {
		return
	}
	switch m.m.Kind {
	case messages.KindConnectRequest:
		a.introduce(c, m.from, m.m.ConnectRequest.Peer)
	case messages.KindConnect:
		a.onConnect(c, m.from, m.m.Connect)
	case messages.KindProbe:
		a.answerProbe(c, m.from, m.m.Probe.Nonce)
	case messages.KindProbeReply:
		a.onProbeReply(m.from, m.m.ProbeReply)
	}
}

// introduce sends each of from and target a Connect naming the other.
func (a *Actor) introduce(c actor.Context, from, target string) {
	t := a.sessions[target]
	if target == from || t == nil || !t.up {
		return // we cannot introduce a peer we are not connected to
	}
	now := a.d.Now()
	key := min(from, target) + "<>" + max(from, target) // both sides may ask at once
	if last, ok := a.reach.lastIntro[key]; ok && now.Sub(last) < introEvery {
		return
	}
	a.reach.lastIntro[key] = now
	f := a.sessions[from]
	a.reach.introductions++
	c.Send(t.pid, &sendFrame{env: &messages.Envelope{Kind: messages.KindConnect, Connect: connectFor(from, f)}})
	c.Send(f.pid, &sendFrame{env: &messages.Envelope{Kind: messages.KindConnect, Connect: connectFor(target, t)}})
}

// connectFor describes peer id (session e) for the other side.
func connectFor(id string, e *sessionEntry) *messages.Connect {
	m := &messages.Connect{Peer: id, Observed: udpObserved(e.conn)}
	if e.hello != nil {
		for _, s := range e.hello.Addrs {
			if _, ok := messages.PunchAddr(s); ok && len(m.Addrs) < messages.MaxConnectAddrs {
				m.Addrs = append(m.Addrs, s)
			}
		}
	}
	return m
}

// connectAddrs applies the address rules to a Connect: the introducer's
// observation, and hello addresses we already hold for the peer from an
// authenticated session. It returns the addresses to punch (at most
// maxPunchAddrs, the observation first) and how many were dropped.
func connectAddrs(m *messages.Connect, known []string) (out []string, dropped int) {
	seen := map[string]bool{}
	add := func(s string) {
		if !seen[s] && len(out) < maxPunchAddrs {
			seen[s] = true
			out = append(out, s)
		}
	}
	if m.Observed != "" {
		if ap, ok := messages.PunchAddr(m.Observed); ok {
			add(ap.String())
		} else {
			dropped++
		}
	}
	for _, s := range m.Addrs {
		ap, ok := messages.PunchAddr(s)
		if !ok || !slices.Contains(known, ap.String()) {
			dropped++
			continue
		}
		add(ap.String())
	}
	return out, dropped
}

// refuseConnect counts and records a refused Connect.
func (a *Actor) refuseConnect(from, why string) {
	a.reach.refused++
	a.diag.issue(a.d.Now(), messages.ConnectionIssue{PeerID: from, Kind: "connect", Reason: clip(why, 200)})
	a.log.Warn("refused a connect message", "from", short(from), "reason", why)
}

// onConnect checks a Connect and, when it passes, punches.
func (a *Actor) onConnect(c actor.Context, from string, m *messages.Connect) {
	now := a.d.Now()
	target := m.Peer
	switch {
	case !messages.ValidPeerID(target):
		a.refuseConnect(from, "connect names an invalid peer id")
		return
	case target == a.self || target == from:
		a.refuseConnect(from, "connect names this node or its sender")
		return
	}
	if p := a.reach.punching[target]; p != nil && p.via == from && now.Sub(p.until.Add(-punchWindow)) < connectPerPeer {
		return // the same introduction twice (both sides asked): already punching
	}
	if a.reachedDirectly(target, true) {
		return // already connected: nothing to punch
	}
	if !a.relayedOnly(target) && a.neighbours(now)+a.pendingNeighbours(now, target) >= a.viewCap() && !a.cutOff()[target] && len(a.spareNeighbours(a.upIDs())) == 0 {
		// Our active view is at its cap, counting the sessions on
		// their way (pendingNeighbours; view.go): the session would
		// come up as our own dial past it, and trimView would send a
		// random neighbour a leave. Where no neighbour has a view to
		// spare, that one is left short and asks for introductions in
		// turn: unbounded, that kept thousands of sessions a minute
		// coming up and going in a fleet of 50. It is also how a node
		// left short among full ones gets in (as HyParView's forced
		// join), so without a spare neighbour a view at its cap punches
		// for one introduction per leaveHold.
		if now.Sub(a.reach.pastCap) < leaveHold {
			return
		}
		a.reach.pastCap = now
	}
	var known []string
	if k := a.known[target]; k != nil {
		known = k.Addrs
	}
	addrs, _ := connectAddrs(m, known)
	if len(addrs) == 0 {
		a.refuseConnect(from, "connect names no address an authenticated peer reported")
		return
	}
	key := from + ">" + target
	if last, ok := a.reach.lastConnect[key]; ok && now.Sub(last) < connectPerPeer {
		a.refuseConnect(from, "connect over the rate limit")
		return
	}
	// Both the sender and the target must be writers of the network:
	// known as such (heartbeat.go keeps the ledger's answers, and a
	// session is admitted for writers only), or the ledger says so, asked
	// about at most maxWriterAsks Connects at once.
	a.hb.init()
	if !a.hb.notWriter[target].IsZero() {
		a.refuseConnect(from, "connect names a peer that is not a writer")
		return
	}
	var unknown []string
	for _, id := range []string{from, target} {
		if !a.knownWriter(id) {
			unknown = append(unknown, id)
		}
	}
	if len(unknown) > 0 && a.reach.checking >= maxWriterAsks {
		a.refuseConnect(from, "too many connects waiting on the ledger")
		return
	}
	a.reach.lastConnect[key] = now
	a.checkWriters(c, unknown, func(notWriter string) {
		switch notWriter {
		case "":
			a.punch(target, from, addrs)
			return
		case from:
			a.refuseConnect(from, "connect from a peer that is not a writer")
		default:
			a.refuseConnect(from, "connect names a peer that is not a writer")
		}
		delete(a.reach.lastConnect, key)
	})
}

// checkWriters asks the ledger whether each of ids is a writer, in
// turn, and calls then with the first that is not ("" when all are).
// Each answer is kept (hb.writers, hb.notWriter) as heartbeat.go keeps
// them; a question that got no answer counts as "not a writer" here
// and is not kept.
func (a *Actor) checkWriters(c actor.Context, ids []string, then func(notWriter string)) {
	if len(ids) == 0 {
		then("")
		return
	}
	id := ids[0]
	a.reach.checking++
	f := c.RequestFuture(a.d.Ledger, &messages.IsWriter{ID: id}, a.d.AskTimeout)
	c.ReenterAfter(f, func(res any, err error) {
		a.reach.checking--
		r, ok := res.(*messages.IsWriterReply)
		switch {
		case err != nil || !ok:
			then(id)
		case !r.OK:
			if len(a.hb.notWriter) < maxNotWriters {
				a.hb.notWriter[id] = a.d.Now()
			}
			then(id)
		default:
			a.hb.writers[id] = true
			a.checkWriters(c, ids[1:], then)
		}
	})
}

// punch dials target at addrs from our one socket, a few times.
func (a *Actor) punch(target, via string, addrs []string) {
	if a.closed || a.ctx.Err() != nil {
		return
	}
	if a.reachedDirectly(target, true) {
		return
	}
	now := a.d.Now()
	p := a.reach.punching[target]
	if p == nil {
		p = &punchState{addrs: map[string]bool{}}
		a.reach.punching[target] = p
	}
	p.via, p.until = via, now.Add(punchWindow)
	root, self, gate, ep := a.sys.Root, a.pid, a.gate, a.d.Endpoint
	ctx := a.ctx
	for _, addr := range addrs {
		if p.addrs[addr] || a.isOwn(addr) {
			continue // a punch dialer for it is still running, or it is ours
		}
		if !a.reach.takeToken(now) {
			a.refuseConnect(via, "punch rate limit reached")
			return
		}
		p.addrs[addr] = true
		a.reach.punches++
		a.diag.attempt()
		go func() {
			defer root.Send(self, &punchEnded{peer: target, addr: addr})
			for i := 0; i < punchTries; i++ {
				gate.mu.Lock()
				done := gate.connected[target]
				gate.mu.Unlock()
				if done || ctx.Err() != nil {
					return
				}
				actx, release := gate.attempt(ctx, target)
				dctx, cancel := context.WithTimeout(actx, punchAttempt)
				conn, err := ep.Dial(dctx, addr, target)
				beaten := actx.Err() != nil // another dial reached the peer
				cancel()
				release()
				if err == nil {
					gate.mark(target)
					root.Send(self, &newConn{conn: conn, addr: addr, path: "punched", via: via})
					return
				}
				if beaten {
					return
				}
				if errors.Is(err, transport.ErrSelf) {
					root.Send(self, &dialFailed{addr: addr, peer: target, err: err})
					return
				}
				// Jitter keeps two punching sides from settling into
				// lock-step retries.
				if !transport.Wait(ctx, punchGap+time.Duration(rand.Int64N(int64(punchGap/4)))) {
					return
				}
			}
		}()
	}
}

func (a *Actor) onPunchEnded(m *punchEnded) {
	if p := a.reach.punching[m.peer]; p != nil {
		delete(p.addrs, m.addr)
	}
}

// reachAdvice is what the diagnostics recommend about reachability.
func (a *Actor) reachAdvice() []string {
	if a.reach == nil {
		return nil
	}
	var out []string
	if a.natKind() == messages.NATSymmetric && len(a.d.Advertise) == 0 && a.mappedAddr() == "" {
		out = append(out, "This node is behind a NAT that gives every destination a new port (symmetric): peers behind other NATs cannot punch through to it. Forward the peer UDP port on the router and name the public address with --advertise-addr.")
	}
	if a.reach.refused > 0 {
		out = append(out, fmt.Sprintf("%d connect (introduction) messages were refused: a peer sent introductions naming non-writers or addresses no authenticated peer reported.", a.reach.refused))
	}
	return out
}

// --- NAT-type probe ---

// probeTick starts a probe when none ran recently (or the peers that
// probed us are gone) and ends one past its deadline.
func (a *Actor) probeTick(c actor.Context, now time.Time) {
	r := a.reach
	if r.probe != nil {
		if now.Sub(r.probe.started) >= probeTimeout {
			a.finishProbe(now)
		}
		return
	}
	if _, ok := a.d.Endpoint.(transport.RawPackets); !ok {
		return
	}
	if !r.probedAt.IsZero() && now.Sub(r.probedAt) < probeEvery {
		return
	}
	// The peer connected longest that has not probed us yet and sees us
	// at a usable address.
	var best *sessionEntry
	bestID := ""
	for id, e := range a.sessions {
		if !e.up || r.probedBy[id] || r.observed[id] == "" {
			continue
		}
		if best == nil || e.upAt.Before(best.upAt) {
			best, bestID = e, id
		}
	}
	if best == nil {
		return
	}
	nonce := rand.Uint64()
	r.probe = &probeState{peer: bestID, nonce: nonce, started: now, main: r.observed[bestID]}
	r.probedBy[bestID] = true
	c.Send(best.pid, &sendFrame{env: &messages.Envelope{Kind: messages.KindProbe, Probe: &messages.Probe{Nonce: nonce}}})
}

func (a *Actor) finishProbe(now time.Time) {
	r := a.reach
	p := r.probe
	r.probe = nil
	r.probedAt = now
	db := p.dialBack
	r.dialBack = &db
	r.probeMain, r.probeSeen = p.main, p.seen
	a.log.Info("reach probe finished", "peer", short(p.peer), "observed", p.main, "second", p.seen, "dialBack", p.dialBack,
		"nat", a.natKind())
}

// onRawProbe: a probe packet reached our socket (the dial-back).
func (a *Actor) onRawProbe(m *rawProbe) {
	p := a.reach.probe
	if p == nil || m.nonce != p.nonce {
		return
	}
	e := a.sessions[p.peer]
	if e == nil {
		return
	}
	if ap, ok := messages.PunchAddr(e.conn.RemoteAddr().String()); ok && ap.Addr() == m.from.Addr() {
		p.dialBack = true
	}
}

// onProbeReply: the probing peer told us its probe socket's port (we
// send our packet there) or where our packet came from.
func (a *Actor) onProbeReply(from string, m *messages.ProbeReply) {
	p := a.reach.probe
	if p == nil || from != p.peer || m.Nonce != p.nonce {
		return
	}
	if m.Seen != "" {
		if ap, ok := messages.PunchAddr(m.Seen); ok {
			p.seen = ap.String()
		}
		a.finishProbe(a.d.Now())
		return
	}
	if p.sent || m.Port <= 0 || m.Port > 65535 {
		return
	}
	raw, ok := a.d.Endpoint.(transport.RawPackets)
	e := a.sessions[from]
	if !ok || e == nil {
		return
	}
	ap, ok := messages.PunchAddr(e.conn.RemoteAddr().String())
	if !ok {
		return
	}
	p.sent = true
	// To the probing peer's own IP only: the port is the one thing it
	// chose.
	if err := raw.WriteRaw(transport.ProbePacket(p.nonce), netip.AddrPortFrom(ap.Addr(), uint16(m.Port))); err != nil {
		a.log.Debug("probe packet not sent", "err", err)
	}
}

// answerProbe serves a peer's probe: a packet from a fresh socket to
// where we see the peer, that socket's port, then where the peer's
// packet to it came from. One probe per peer at a time, each bounded by
// probeTimeout; the packet goes only to the peer's authenticated
// connection's address.
func (a *Actor) answerProbe(c actor.Context, from string, nonce uint64) {
	e := a.sessions[from]
	if e == nil || a.answering[from] {
		return
	}
	to, ok := messages.PunchAddr(e.conn.RemoteAddr().String())
	if !ok {
		return
	}
	ps, err := transport.OpenProbeSocket(a.d.Endpoint.Addr())
	if err != nil {
		a.log.Debug("cannot open a probe socket", "err", err)
		return
	}
	a.answering[from] = true
	pid := e.pid
	root, self := a.sys.Root, a.pid
	_ = ps.Send(nonce, to)
	root.Send(pid, &sendFrame{env: &messages.Envelope{Kind: messages.KindProbeReply, ProbeReply: &messages.ProbeReply{Nonce: nonce, Port: ps.Port()}}})
	// Closing the socket ends the wait at once when the node stops.
	stop := context.AfterFunc(a.ctx, func() { _ = ps.Close() })
	go func() {
		defer stop()
		defer ps.Close()
		seen, ok := ps.Wait(nonce, to.Addr(), time.Now().Add(probeTimeout))
		rep := &messages.ProbeReply{Nonce: nonce}
		if ok {
			rep.Seen = seen.String()
		}
		if rep.Seen != "" {
			root.Send(pid, &sendFrame{env: &messages.Envelope{Kind: messages.KindProbeReply, ProbeReply: rep}})
		}
		root.Send(self, &probeAnswered{peer: from})
	}()
}

// probeAnswered: our answer to a peer's probe ended.
type probeAnswered struct{ peer string }

// readRaw hands probe packets that reach the endpoint's socket to the
// supervisor until ctx ends or the endpoint closes.
func readRaw(ctx context.Context, raw transport.RawPackets, send func(*rawProbe)) {
	b := make([]byte, 64)
	for {
		n, from, err := raw.ReadRaw(ctx, b)
		if err != nil {
			return
		}
		if nonce, ok := transport.ParseProbePacket(b[:n]); ok {
			send(&rawProbe{nonce: nonce, from: from})
		}
	}
}

// pathLabel renders a session's path for logs.
func pathLabel(path, via string) string {
	if via == "" {
		return path
	}
	return path + " via " + short(via)
}
