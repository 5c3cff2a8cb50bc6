package peer

import (
	"math/rand/v2"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"peerdns/messages"
)

// Bounded neighbours, in the manner of HyParView (Leitão, Pereira,
// Rodrigues, DSN 2007):
//
//   - The active view is the set of peers we keep a session with, at most
//     Deps.ActiveView (default 12). Peers we learn of get dialers, at most
//     twice ActiveView of them (learnedDialerCap), and the dial gate lets
//     one through only while the view has room (ActiveView minus sessions
//     minus dials in flight), so the view fills from random known peers
//     and never grows past the cap by our own doing. A dialer the gate
//     has held back for retireAfter (30 s: the view is full, or its peer
//     is connected another way) ends, and so at once do those of a peer
//     that refused us or left (held off for leaveHold); while the view
//     has room, every tick (and every refusal or leave) starts dialers
//     for random known peers that have neither a session nor a dialer
//     (refillDialers). So a settled node runs no dialer for peers it
//     does not need, whatever the size of the network.
//   - The passive view is the address book (known peers, persisted in
//     node.db, capped at maxKnownPeers): the peers we may dial when a
//     neighbour goes. HyParView keeps a small passive view in memory; ours
//     is the address book we already keep and restore after a restart.
//   - A peer that dials us says in its hello how many neighbours it has:
//     the priority of its request. With none (a new node, or one whose
//     neighbours all left) it is always taken, and if that puts the view
//     past its cap a random neighbour gets a "leave" and goes. With some,
//     it is taken while the view is below its cap (ActiveView plus
//     viewSlack), or at the cap when it is short of ActiveView and one
//     of our neighbours has more than ActiveView of its own (that one
//     gets the leave and keeps a full view), and otherwise refused at
//     the hello (RefuseViewFull), before a session comes up; the dialer
//     holds off redialing us for leaveHold and dials another. A leave
//     carries a random sample of our views, so the one who leaves learns
//     where else to go, and it also holds off redialing us for
//     leaveHold.
//   - Hysteresis: our own dials fill the view to ActiveView, peers that
//     ask are taken up to ActiveView + viewSlack, and only past that is
//     the view trimmed. A node a neighbour short then finds a peer that
//     takes it instead of being taken and sent a leave by each full peer
//     in turn, so the view settles: once every node has ActiveView
//     neighbours nobody dials and nothing is dropped.
//   - We shuffle with one random neighbour every ExchangeInterval while
//     the view has room, and every shuffleEvery intervals once it is
//     full: a sample of at most ShuffleSize peers (us, random neighbours,
//     random known peers), answered with a sample of the same size. A
//     sample is bounded and random; never the whole address book.
//     Entries with a bad id or address are ignored and counted. A full
//     view dials nobody, so its passive view matters only when a
//     neighbour goes; with the 30 s (and the leaves' samples, which come
//     when a neighbour goes) it is at most half a minute stale, and the
//     settled node saves two thirds of the shuffle bytes (~90 B/s of an
//     idle ~1 KB/s).
//   - Sessions the tunnel layer used lately (Mesh.Conn within pinFor) are
//     kept besides the active view and do not count against it, so a
//     tunnel never loses its carrier to a shuffle.
//
// With no more writers than ActiveView every node keeps a session with
// every other, as a full mesh does: no dial is held back and no leave is
// ever sent.

const (
	// leaveHold is how long a peer that left (either way) is not
	// redialed, so two full nodes do not dial and drop each other in a
	// loop.
	leaveHold = 30 * time.Second
	// pinFor keeps a session the tunnel layer used within this long.
	pinFor = 5 * time.Minute
	// shuffleEvery: a full view shuffles every this many exchange
	// intervals (30 s by default).
	shuffleEvery = 3
)

// viewState is the supervisor's overlay bookkeeping.
type viewState struct {
	garbage  int64 // sample entries ignored: bad id or address
	leaves   int64 // leaves we sent
	left     int64 // leaves we got
	shuffles int64 // shuffles we started
	refusals int64 // neighbour requests refused at the hello: view full
	refused  int64 // our requests full peers refused
	ups      int64 // sessions established
	ends     int64 // established sessions that ended
	// withholding: neighbours dropped for holding ops back (session_owed.go)
	withholding int64
	// feedsLost: sessions of peers that pushed to us that ended since
	// the last tick (refeed, session_lazy.go)
	feedsLost int
	// past: the overlay counters of sessions that ended, so the totals
	// diagnostics show only grow
	past sessionCounts
}

// retire counts a session leaving the supervisor's table: an end if it
// was established, and its overlay counters into the totals.
func (v *viewState) retire(e *sessionEntry) {
	if e.up {
		v.ends++
	}
	if !e.stats.pruned {
		v.feedsLost++ // refeed replaces it
	}
	v.past.add(e.stats.sessionCounts)
}

// counts is the sessions' counters summed over every session since
// start: those that ended and those in the table.
func (a *Actor) counts() sessionCounts {
	c := a.view.past
	for _, e := range a.sessions {
		c.add(e.stats.sessionCounts)
	}
	return c
}

// pinned reports whether the tunnel layer relies on id's session.
func (a *Actor) pinned(id string, now time.Time) bool {
	return a.d.Mesh.usedSince(id, now.Add(-pinFor))
}

// neighbours counts the sessions in the active view (handshaking ones
// too: they will be in it in a moment), excluding pinned ones.
func (a *Actor) neighbours(now time.Time) int {
	n := 0
	for id := range a.sessions {
		if !a.pinned(id, now) {
			n++
		}
	}
	return n
}

// viewRoom is how many more neighbours the active view takes.
func (a *Actor) viewRoom() int {
	return max(0, a.d.ActiveView-a.neighbours(a.d.Now()))
}

// updateGate tells the dialers how much room the view has.
//
// A full view still lets one dial through to a writer whose heartbeats
// stopped reaching us, or that we have suspected for 15 s, when we drew
// it as ours to bridge to (cutOff): the graph may have split into parts whose
// views are all full, and no node of either part would dial otherwise.
// The dial asks the peer to make room (helloNeighbours), and our own view
// sheds a random neighbour when the session comes up (trimView). So
// does a bootstrap peer never heard (cutOff says when).
func (a *Actor) updateGate() (beyond map[string]bool) {
	beyond = a.cutOff()
	a.gate.setRoom(a.viewRoom())
	a.gate.setBeyond(beyond)
	return beyond
}

// cutOff lists the writers we heard a heartbeat from once that have no
// session with us, whose heartbeats no longer arrive or that we have
// suspected for cutOffSuspected, and that we drew as ours to bridge to
// (suspicion.go, bridgeTo), and, once we have been up isolatedAfter, the
// bootstrap peers we never heard at all.
//
// The draw holds for writers no longer heard as for suspected ones: a
// writer that died for good stays in the membership until it is removed,
// and its address in every address book. Were every node to dial it past
// a full view, a network of 1,000 would send a dead address about 33
// dials a second (one per node per 30 s, the dialers' longest backoff)
// for as long as the membership names it, whoever holds that address
// next; drawn, about ActiveView nodes do, which is what joining two
// parts needs (bridgeTo).
//
// The second kind: a node that knows nobody (the network's first, with
// no bootstrap of its own) is reached only by peers that dial it, and
// when all of those filled their views with others before their dial
// went out (a higher id waits before a mutual dial), it stayed alone
// for good: one run in ten of the 20-writer simulation. Every connected
// writer's first heartbeats reach everyone within seconds, so a
// bootstrap peer never heard in isolatedAfter is dead or alone, and a
// dial to it costs a failed attempt or heals it.
func (a *Actor) cutOff() map[string]bool {
	var out map[string]bool
	add := func(w string) {
		if out == nil {
			out = map[string]bool{}
		}
		out[w] = true
	}
	now := a.d.Now()
	for w := range a.hb.latest {
		if _, direct := a.sessions[w]; direct {
			continue
		}
		if a.bridging(w, now) {
			add(w)
		}
	}
	if a.network == "" || a.startedAt.IsZero() || now.Sub(a.startedAt) < isolatedAfter {
		return out
	}
	for _, t := range a.bootstrap {
		if t.id == "" || t.id == a.self {
			continue
		}
		if _, direct := a.sessions[t.id]; direct {
			continue
		}
		if _, ever := a.hb.latest[t.id]; !ever {
			add(t.id)
		}
	}
	return out
}

// isolatedAfter: a bootstrap peer never heard this long after we
// started may be dialed past a full view (cutOff). A writer heartbeats
// at its start and 1, 2, 4 ... s after, and a node with no neighbours
// gets every heartbeat its first neighbour holds, so any writer with a
// neighbour is heard within about a second of our first session. The
// lone node, once reached, still has to fill its view past full peers
// that refuse it (each holds it off 30 s): reached at 10 s its view took
// up to a minute to fill (and once longer, in 55 runs at 20 writers);
// at 3 s, at most 31 s in 40 runs.
const isolatedAfter = 3 * time.Second

// trimView makes the active view fit after a session came up: newID's
// session, or (newID "") whichever random one. A newcomer that has
// neighbours of its own is the one that leaves, unless it is short of a
// full view and a spare neighbour can go in its place (admit took it for
// that); otherwise a random other neighbour leaves, one with more than
// ActiveView neighbours of its own where there is one (spareNeighbours),
// so that it is not left short.
func (a *Actor) trimView(c actor.Context, newID string) {
	now := a.d.Now()
	for a.neighbours(now) > a.viewCap() {
		victim := ""
		if e := a.sessions[newID]; e != nil && !e.conn.Outbound() && e.hello != nil && e.hello.Neighbours > 0 && !a.pinned(newID, now) {
			// A newcomer short of a full view was taken for a spare
			// neighbour (admit); any other newcomer with neighbours is
			// the one that goes.
			victim = newID
			if spare := a.roomFor(newID, e.hello.Neighbours, now); len(spare) > 0 {
				victim = spare[rand.IntN(len(spare))]
			}
		} else {
			cands := a.trimmable(newID, now)
			if len(cands) == 0 {
				return
			}
			if spare := a.spareNeighbours(cands); len(spare) > 0 {
				cands = spare
			}
			victim = cands[rand.IntN(len(cands))]
		}
		a.sendLeave(c, victim)
	}
}

// trimmable is the neighbours trimView may drop to make room for newID:
// up, not pinned, not our inviter, and not younger than SyncInterval (a
// session that has not synced once yet, a joiner may still be joining,
// and sparing it keeps a burst of dials from churning).
func (a *Actor) trimmable(newID string, now time.Time) []string {
	var out []string
	for id, e := range a.sessions {
		young := now.Sub(e.upAt) < a.d.SyncInterval
		if id == newID || !e.up || young || a.pinned(id, now) || (a.joinInv != nil && id == a.joinInv.Inviter) {
			continue
		}
		out = append(out, id)
	}
	return out
}

// roomFor is the neighbours that may leave to make room for a dialer id
// with neighbours of its own, short of ActiveView: those trimView may
// drop (trimmable) that have a view to spare (spareNeighbours). None
// when the dialer's view is full.
func (a *Actor) roomFor(id string, neighbours int, now time.Time) []string {
	if neighbours >= a.d.ActiveView {
		return nil
	}
	return a.spareNeighbours(a.trimmable(id, now))
}

// spareNeighbours keeps the ids whose last peer list named more than
// ActiveView peers: dropped by us they still have a full view, so they
// dial nobody and the eviction goes no further.
func (a *Actor) spareNeighbours(ids []string) []string {
	var out []string
	for _, id := range ids {
		if e := a.sessions[id]; e != nil && e.theirs > a.d.ActiveView {
			out = append(out, id)
		}
	}
	return out
}

// sendLeave drops id from the active view: it gets a leave with a sample
// and the session closes once it went out.
func (a *Actor) sendLeave(c actor.Context, id string) {
	e := a.sessions[id]
	if e == nil {
		return
	}
	a.view.leaves++
	a.view.retire(e)
	a.log.Info("dropping neighbour: active view full", "peer", short(id), "view", a.d.ActiveView)
	c.Send(e.pid, &sendLeave{sample: a.sample(id)})
	delete(a.sessions, id)
	a.d.Mesh.dropConn(id, e.conn)
	a.reachDown(id) // what onTerminated does, which will not find the session
	a.relayDown(id)
	a.gate.hold(id, a.d.Now().Add(leaveHold))
	a.gate.set(a.directGate())
	a.updateGate()
	// It no longer counts as connected; it was alive a moment ago, and
	// its heartbeats keep it active from now on (heartbeat.go).
	a.heardNow(id)
	a.connectedChanged(c)
	a.exchange(c) // addressbook.go: neighbours relay id's ops to us again
}

// viewSlack is how far past ActiveView the view takes neighbours that ask
// (ActiveView/6: 2 for the default 12, none below 6). The view fills by
// our own dials up to ActiveView and is trimmed only past ActiveView +
// viewSlack, so a node one neighbour short that dials a node just filled
// is taken instead of being taken and dropped: without the margin, the
// nodes a few neighbours short of a full view in a network larger than
// the view dial full nodes again and again, and every such session comes
// up, exchanges vectors and peer lists, and is sent a leave.
func (a *Actor) viewSlack() int { return a.d.ActiveView / 6 }

// viewCap is the most neighbours the view keeps.
func (a *Actor) viewCap() int { return a.d.ActiveView + a.viewSlack() }

// admit decides at its hello whether a peer that dialed us joins the
// active view, as HyParView answers a neighbour request: one with no
// neighbours (priority high: neighbours 0, which a dialer also sends to
// a writer it no longer hears, see helloNeighbours) is always taken and
// trimView makes room; one with neighbours is taken only while the view
// is below its cap, and otherwise refused before any session comes up
// (RefuseViewFull: the dialer holds off redialing us, onViewFull).
// Pinned peers are always taken.
func (a *Actor) admit(id string, neighbours int) bool {
	now := a.d.Now()
	if neighbours == 0 || a.pinned(id, now) {
		return true
	}
	others := 0
	for sid := range a.sessions {
		if sid != id && !a.pinned(sid, now) {
			others++
		}
	}
	if others < a.viewCap() {
		return true
	}
	// At the cap, a dialer short of a full view is still taken when a
	// neighbour of ours has more than a full view of its own: trimView
	// drops that one, which keeps a full view and dials nobody. Without
	// it, a node a neighbour short whose every non-neighbour sits at
	// the cap stays short for good (each refusal holds it off 30 s).
	if len(a.roomFor(id, neighbours, now)) > 0 {
		return true
	}
	a.view.refusals++
	return false
}

// onViewFull: a peer we dialed refused us because its view is full. We
// do not redial it for leaveHold (unless its heartbeats stop reaching
// us, as after a leave), learn the peers its refusal named (bad entries
// are ignored and counted, as in a shuffle) and the dial gate lets
// another dial through.
func (a *Actor) onViewFull(c actor.Context, m *viewFull) {
	a.view.refused++
	a.gate.hold(m.id, a.d.Now().Add(leaveHold))
	a.retireDialersOf(m.id)
	a.learnSample(c, m.sample)
	a.refillDialers(a.updateGate())
}

// onLeft handles a neighbour's leave: we hold off redialing it and learn
// the peers it named.
func (a *Actor) onLeft(c actor.Context, m *peerLeft) {
	e := a.sessions[m.id]
	if e == nil || !e.pid.Equal(m.pid) {
		if a.ended[m.pid.Id] != m.id {
			return
		}
		// The session's Terminated came first (onTerminated): it left,
		// it did not fail.
		delete(a.ended, m.pid.Id)
	} else {
		e.left = true
	}
	a.view.left++
	a.heardNow(m.id)
	a.gate.hold(m.id, a.d.Now().Add(leaveHold))
	a.retireDialersOf(m.id)
	a.learnSample(c, m.sample)
	a.refillDialers(a.updateGate())
}

// sample is a bounded random sample of our views for peer to: us with
// our addresses, then neighbours and known peers in random order, at most
// ShuffleSize entries, never to itself.
func (a *Actor) sample(to string) []messages.PeerInfo {
	size := min(a.d.ShuffleSize, messages.MaxSample)
	out := make([]messages.PeerInfo, 0, size)
	out = append(out, messages.PeerInfo{ID: a.self, Addrs: a.advertise()})
	seen := map[string]bool{a.self: true, to: true}
	add := func(ids []string) {
		rand.Shuffle(len(ids), func(i, j int) { ids[i], ids[j] = ids[j], ids[i] })
		for _, id := range ids {
			if len(out) >= size {
				return
			}
			if seen[id] {
				continue
			}
			seen[id] = true
			k := a.known[id]
			if k == nil || len(k.Own) == 0 || k.LastSeen == 0 {
				// Only peers we were connected to, at the addresses
				// their sessions gave us: an address another peer's
				// list named for them (made up, perhaps) is never
				// passed on, so it cannot circulate.
				continue
			}
			out = append(out, messages.PeerInfo{ID: id, Addrs: append([]string(nil), k.Own...)})
		}
	}
	active := make([]string, 0, len(a.sessions))
	for id, e := range a.sessions {
		if e.up {
			active = append(active, id)
		}
	}
	// Half from the active view, the rest from the address book, as
	// HyParView's shuffle mixes both.
	half := make([]string, 0, len(active))
	half = append(half, active...)
	if len(half) > size/2 {
		rand.Shuffle(len(half), func(i, j int) { half[i], half[j] = half[j], half[i] })
		half = half[:size/2]
	}
	add(half)
	// A random window of the address book, not all of it: the sample
	// costs O(ShuffleSize) however many peers we know.
	passive := make([]string, 0, size*2)
	for id, k := range a.known { // map order is random
		if len(passive) >= size*2 {
			break
		}
		if k.LastSeen != 0 {
			passive = append(passive, id)
		}
	}
	add(passive)
	return out
}

// learnSample takes the entries of a shuffle or leave sample that make
// sense and counts the rest: an entry with a bad id is ignored whole, a
// bad address alone.
func (a *Actor) learnSample(c actor.Context, s []messages.PeerInfo) {
	good := make([]messages.PeerInfo, 0, len(s))
	for _, p := range s {
		if !messages.ValidPeerID(p.ID) || len(p.Addrs) > maxAddrsPerPeer*2 {
			a.view.garbage++
			continue
		}
		addrs := make([]string, 0, len(p.Addrs))
		for _, ad := range p.Addrs {
			if validAddr(ad) {
				addrs = append(addrs, ad)
			} else {
				a.view.garbage++
			}
		}
		if p.ID == a.self {
			continue
		}
		good = append(good, messages.PeerInfo{ID: p.ID, Addrs: addrs})
	}
	a.learn(c, "", good)
}

// shuffle sends a sample to one random neighbour.
func (a *Actor) shuffle(c actor.Context) {
	var up []string
	for id, e := range a.sessions {
		if e.up {
			up = append(up, id)
		}
	}
	if len(up) == 0 {
		return
	}
	to := up[rand.IntN(len(up))]
	a.view.shuffles++
	c.Send(a.sessions[to].pid, &sendFrame{env: &messages.Envelope{Kind: messages.KindShuffle, Overlay: &messages.Overlay{Sample: a.sample(to)}}})
}

// onShuffle answers a neighbour's shuffle with a sample of ours and
// learns from its sample.
func (a *Actor) onShuffle(c actor.Context, m *overlayFrame) {
	if m.m.Kind == messages.KindShuffle {
		if e := a.sessions[m.from]; e != nil && e.up {
			c.Send(e.pid, &sendFrame{env: &messages.Envelope{Kind: messages.KindShuffleReply, Overlay: &messages.Overlay{Sample: a.sample(m.from)}}})
		}
	}
	a.learnSample(c, m.m.Overlay.Sample)
}

// helloNeighbours is the neighbour count our hello on conn carries: the
// priority of our request to join the peer's active view. It is 0 ("make
// room for me") when we have no neighbours, as in HyParView, and also
// when we dialed a writer whose heartbeats do not reach us, or that we
// have suspected long, and drew as ours to bridge to (bridging): it is
// in another part of the graph (or we just learned of it), and a link to
// it is worth an eviction; about ActiveView nodes ask it, not all. Once
// heartbeats flow from everyone, requests of nodes with neighbours are
// low priority and a full peer turns them away, so a leave never starts
// a chain of evictions.
func (a *Actor) helloNeighbours(conn interface {
	Outbound() bool
	PeerID() string
}) int {
	if conn.Outbound() && a.hb.latest != nil {
		// Not on a passing suspicion: at 100 writers, room asked of
		// suspected writers fed a loop of evictions and suspicions.
		if a.bridging(conn.PeerID(), a.d.Now()) {
			return 0
		}
	}
	return a.upNeighbours()
}

// upNeighbours counts established sessions in the active view (the
// priority a hello carries).
func (a *Actor) upNeighbours() int {
	now, n := a.d.Now(), 0
	for id, e := range a.sessions {
		if e.up && !a.pinned(id, now) {
			n++
		}
	}
	return n
}

// onOverlay dispatches an overlay frame from an established session.
func (a *Actor) onOverlay(c actor.Context, m *overlayFrame) {
	e := a.sessions[m.from]
	if e == nil || !e.pid.Equal(m.pid) {
		return
	}
	switch m.m.Kind {
	case messages.KindShuffle, messages.KindShuffleReply:
		a.onShuffle(c, m)
	case messages.KindHeartbeats:
		a.onHeartbeats(c, m.from, m.m.Overlay.Heartbeats, true)
	case messages.KindSuspicions:
		a.onSuspicions(c, m.from, m.m.Overlay.Suspicions, true)
	case messages.KindLiveness:
		// A new neighbour's greeting: heartbeats first, so a suspicion
		// they refute is recognised as refuted.
		if len(m.m.Overlay.Heartbeats) > 0 {
			a.onHeartbeats(c, m.from, m.m.Overlay.Heartbeats, false)
		}
		if len(m.m.Overlay.Suspicions) > 0 {
			a.onSuspicions(c, m.from, m.m.Overlay.Suspicions, false)
		}
	}
}

// overlayDiag is the diagnostics summary's overlay section.
func (a *Actor) overlayDiag() *messages.OverlayDiag {
	now := a.d.Now()
	o := &messages.OverlayDiag{
		ActiveView: a.d.ActiveView, LeavesSent: a.view.leaves, LeavesReceived: a.view.left,
		Shuffles: a.view.shuffles, ViewRefusals: a.view.refusals, ViewRefused: a.view.refused, SessionsUp: a.view.ups, SessionsEnded: a.view.ends, SampleGarbage: a.view.garbage, Withholding: a.view.withholding,
		HeardByHeartbeat: len(a.hb.heard), HeartbeatsNew: a.hb.taken, HeartbeatsDup: a.hb.dup, HeartbeatsBad: a.hb.refused,
		SuspicionsSent: a.sus.sent, SuspicionsNew: a.sus.taken, SuspicionsDup: a.sus.dup, SuspicionsBad: a.sus.refused,
		Refutations: a.sus.refutations,
	}
	c := a.counts()
	o.DigestsEqual, o.DigestsDiffer = c.digestsEqual, c.digestsDiffer
	o.IHaveSent, o.Grafts, o.Prunes = c.ihaveSent, c.grafts, c.prunes
	o.IDsUnknown = c.idsUnknown
	o.OpSigChecks, o.OpSigReused = c.sigChecks, c.sigReused
	for w := range a.sus.held {
		if a.suspected(w) {
			o.Suspected++
		}
	}
	for id, e := range a.sessions {
		if e.up && e.stats.lazy {
			o.LazyLinks++
		}
		switch {
		case a.pinned(id, now):
			o.Pinned++
		case e.up:
			o.Neighbours++
		}
	}
	return o
}
