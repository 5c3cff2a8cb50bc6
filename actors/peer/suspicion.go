package peer

import (
	"hash/maphash"
	"iter"
	"maps"
	"slices"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"peerdns/messages"
)

// Suspicions: fast liveness with rare heartbeats.
//
// Heartbeats that every writer floods each second cost every node
// (writers × copies × ~150 B) per second: 40 KB/s at 20 writers, 200 KB/s
// at 100, 2 MB/s at 1,000. So heartbeats are rare (heartbeat.go: one per
// HeartbeatPerWriter per known writer, so each node receives about one
// writer's heartbeat every 5 s whatever the size) and say only "this
// writer exists and was alive lately". Who is alive right now is told by
// the writers that see it: every writer has sessions with its
// neighbours, which ping each second. When a neighbour goes silent
// (StaleAfter) or its session fails without a leave, the node signs a
// suspicion {writer, by, at, seq} (seq: the writer's latest heartbeat it
// holds) and floods it like a heartbeat. The suspected writer, when a
// suspicion of it reaches it, refutes it with a fresh heartbeat at once
// (at most one per refuteGap): its seq is above every seq it signed
// before, so above the suspicion's. A node forwards a suspicion only
// when it holds no unrefuted one of that writer with as high a seq: the
// writer's other neighbours suspect it too, and their suspicions add
// nothing a refutation would not clear with the first.
//
// A writer without a session to us counts as active while its latest
// heartbeat arrived within HeartbeatTimeout and no suspicion we hold of
// it names a seq at or above that heartbeat's (unrefuted). One suspicion
// is enough: a frozen writer leaves the quorum of every node once its
// neighbours' StaleAfterSparse (3.5 s beyond R writers)
// runs out and the suspicion crosses the overlay (log(n) hops), under 5 s
// at 1,000 nodes;
// a live writer wrongly suspected is back one refutation round trip
// later. This is SWIM's suspicion with refutation, with the overlay's
// neighbour pings as the failure detector instead of random probes: the
// neighbours already ping each other every second, so detection costs no
// new traffic, and the overlay is connected, so a suspicion reaches
// everyone.
//
// Trust: a suspicion counts only when signed by a writer (ledger
// IsWriter, as for heartbeats) other than the one it names, and fresh
// (At within the heartbeat timeout, and at most a minute ahead of our
// clock). One we hold from the same author with an At as late or later,
// or one already refuted (its seq below the writer's latest heartbeat we
// took), is a duplicate: a map lookup, no signature check, not
// forwarded. So a replayed suspicion changes nothing once the writer
// has refuted it, and a forged one is refused (and counted against the
// neighbour that sent it, as a forged heartbeat). A stale one is refused
// and not counted against the neighbour: the heartbeat timeout, and so
// the TTL, grows with the writers a node knows, and a neighbour that
// knows more holds suspicions we find stale. A writer can still
// sign false suspicions of others: each costs the victim one refutation
// and keeps it out of quorums for one round trip; suspicions are
// counted (suspicionsNew per author is in the logs) and a writer doing
// this is a matter for the membership, not the overlay.
//
// Writers no longer heard: a writer we heard once whose heartbeats
// stopped arriving (HeartbeatTimeout) and that has no session with us is
// suspected by us too, unless a suspicion we hold already names it
// (suspectUnheard). It is dead, or beyond a partition that outlasted the
// timeout; the suspicions of the partition's start have expired by then,
// and at the heal its held heartbeats are too old to cross
// (heartbeatMaxAge), so without a suspicion it would count out on the
// other side until its next heartbeat, a whole interval later. Writers
// of the membership we never heard at all are suspected the same way
// once we have been a timeout in the network (suspectNeverHeard).
//
// New neighbours: a session that comes up with a peer whose hello says it
// has no neighbours (a node that just started or restarted, or one cut
// off from the overlay) gets our held heartbeats signed within the last
// half minute and our unrefuted suspicions in one liveness frame, so it
// counts the writers that heartbeat lately at once instead of after a
// heartbeat round (minutes at 100 writers). Older heartbeats stay
// behind: the peer would refuse them as stale (heartbeatMaxAge) and
// count each against us: maxBadHeartbeats of them and it drops us. A
// peer that has neighbours is in the flood already and gets none: the
// frame holds a heartbeat per writer (~150 KB at 1,000), and
// sent on every new session it made view changes the costliest idle
// traffic at 100 writers. For the same reason a peer is greeted at most
// greetsPerInterval times a heartbeat interval, whatever its hellos
// say: more often, it restarts in a loop (or claims to), and it gets the
// heartbeats in the next round, as one with neighbours does. The
// receiver takes what is new and does not forward it (its sender's
// other neighbours have it).

const (
	// greetsPerInterval bounds the greetings a peer gets within a
	// heartbeat interval (greetLiveness): a node restarted twice in one
	// (an upgrade and its rollback) is still greeted each time.
	greetsPerInterval = 3
	// heartbeatFloor is the least scaled heartbeat interval.
	heartbeatFloor = 30 * time.Second
	// refuteGap is the least time between two heartbeats we sign to
	// refute suspicions.
	refuteGap = time.Second
)

// suspicionState is the supervisor's suspicion bookkeeping.
type suspicionState struct {
	held                      map[string]map[string]*heldSuspicion // writer → author → latest
	last                      uint64                               // At of the last suspicion we signed
	asking                    map[string][]heldSus                 // author → suspicions waiting on IsWriter
	sent, taken, dup, refused int64
	refutations               int64
	seed                      maphash.Seed // bridgeTo's draw
	// askingWriters: suspectNeverHeard's GetWriters is in flight;
	// neverHeardDue: its first run, a timeout after netSince, is done.
	askingWriters, neverHeardDue bool
}

type heldSuspicion struct {
	s  *messages.Suspicion
	at time.Time // when it arrived (or we signed it)
}

func (s *suspicionState) init() {
	if s.held == nil {
		s.held = map[string]map[string]*heldSuspicion{}
	}
}

// suspected reports whether we hold an unrefuted suspicion of w.
func (a *Actor) suspected(w string) bool {
	for _, hs := range a.sus.held[w] {
		if hs.s.Seq >= a.hb.latest[w] {
			return true
		}
	}
	return false
}

// suspectedLong reports whether we have held an unrefuted suspicion of w
// for cutOffSuspected or more: a live writer wrongly suspected refutes
// within a round trip of the overlay, so w is dead or in a part of the
// graph we are cut off from.
func (a *Actor) suspectedLong(w string, now time.Time) bool {
	for _, hs := range a.sus.held[w] {
		if hs.s.Seq >= a.hb.latest[w] && now.Sub(hs.at) >= cutOffSuspected {
			return true
		}
	}
	return false
}

// bridgeTo reports whether we are one of the about ActiveView writers
// that dial w past a full view while it is suspected long (cutOff): a
// pseudo-random draw per pair (a hash with this process's seed), of
// probability ActiveView over the writers we know. Every node suspects
// a writer that froze, died or sits across a partition; were every one
// to dial it, a writer back after a pause would take a session from each
// (a dial that asks for room is always taken) and each dialer would send
// one of its own neighbours away: a storm of leaves and redials across
// the network. Drawn, about ActiveView nodes dial it, as many as its
// view holds, and a partition still gets about ActiveView × |A| × |B| / n
// dials across it, at least ActiveView whatever the sides' sizes.
func (a *Actor) bridgeTo(w string) bool {
	n := uint64(len(a.hb.latest) + 1)
	k := uint64(max(a.d.ActiveView, 1))
	if n <= k {
		return true
	}
	if a.sus.seed == (maphash.Seed{}) {
		a.sus.seed = maphash.MakeSeed()
	}
	return maphash.String(a.sus.seed, w)%n < k
}

// bridging reports whether w, no longer heard or suspected long, and
// drawn as ours (bridgeTo), may be dialed past a full view (cutOff) with
// a hello that asks for room (helloNeighbours).
func (a *Actor) bridging(w string, now time.Time) bool {
	if _, heard := a.hb.heard[w]; heard && !a.suspectedLong(w, now) {
		return false
	}
	return a.bridgeTo(w)
}

// cutOffSuspected: how long a writer stays suspected before we take it
// for cut off (cutOff) and may dial it past a full view. Long against a
// refutation (a round trip of the overlay: under a second in the
// simulation, a few on a loaded machine), so a passing suspicion never
// asks anyone for room (at 100 writers, room asked of every suspected
// writer at once fed a loop of evictions and suspicions); short against
// a partition, whose two sides suspect each other from its first
// seconds and, their views full again, would otherwise not meet after
// the heal until the heartbeat timeout (3 × 5 s × writers: hours at
// 1,000).
const cutOffSuspected = 15 * time.Second

// topSuspicion is the highest seq among the unrefuted suspicions of w
// we hold, and whether we hold one.
func (a *Actor) topSuspicion(w string) (uint64, bool) {
	var top uint64
	held := false
	for _, hs := range a.sus.held[w] {
		if hs.s.Seq >= a.hb.latest[w] && (!held || hs.s.Seq > top) {
			top, held = hs.s.Seq, true
		}
	}
	return top, held
}

// suspicionTick forgets suspicions older than the heartbeat timeout (the
// writer is no longer heard by then anyway) and reports a change. Those
// a heartbeat refuted are kept until then too: a held suspicion whose
// seq is below its writer's latest heartbeat counts for nothing but the
// duplicate check, so the same suspicion sent again later (a neighbour
// replaying it) is a lookup, not a check and a flood that has its writer
// refute it once more (onSuspicions passes on a suspicion refuted here
// by a heartbeat too old for its sender to take).
func (a *Actor) suspicionTick(now time.Time) bool {
	changed := false
	timeout := a.hbTimeout()
	for w, m := range a.sus.held {
		for by, hs := range m {
			if now.Sub(hs.at) >= timeout {
				delete(m, by)
				changed = true
			}
		}
		if len(m) == 0 {
			delete(a.sus.held, w)
		}
	}
	return changed
}

// suspicionTTL is how old a suspicion may be (by its author's clock) and
// still be taken.
func (a *Actor) suspicionTTL() time.Duration { return max(a.hbTimeout(), heartbeatMaxAge) }

// suspect signs and floods a suspicion of w, a neighbour that went
// silent or whose session failed.
func (a *Actor) suspect(c actor.Context, w string) {
	if a.network == "" || w == a.self {
		return
	}
	a.hb.init()
	s := a.signSuspicion(w, a.d.Now())
	a.log.Info("suspecting writer", "peer", short(w))
	a.forwardSuspicions(c, "", []*messages.Suspicion{s})
	a.updateGate()
	a.connectedChanged(c)
}

// signSuspicion signs a suspicion of w and holds it as ours.
func (a *Actor) signSuspicion(w string, now time.Time) *messages.Suspicion {
	at := max(a.sus.last+1, uint64(now.UnixMilli()))
	a.sus.last = at
	s := &messages.Suspicion{Writer: w, By: a.self, At: at, Seq: a.hb.latest[w]}
	s.Sig = a.d.Identity.Sign(messages.SuspicionSigningBytes(a.network, s))
	a.hold(s, now)
	a.sus.sent++
	a.gate.unhold(w)
	return s
}

// suspectUnheard signs and floods a suspicion of every writer we heard
// once that has no session with us, whose heartbeats stopped reaching
// us (HeartbeatTimeout) and that no suspicion we hold names; the tick
// calls it when a writer's heartbeats timed out or a suspicion expired.
// Such a writer is dead, or beyond a partition that outlasted the
// timeout; without a suspicion, nothing would tell it that we no longer
// hear it. Once the parts meet again, the suspicions cross with the
// first session that bridges them (tellSuspicions), and each live writer
// refutes with a fresh heartbeat that floods back: it counts again
// everywhere within a round trip instead of after its next heartbeat (an
// interval, 5 s × writers: 205 s at 40, 83 min at 1,000; the heartbeats
// held of it are too old to cross, heartbeatMaxAge). A writer gone for
// good costs one flood per HeartbeatTimeout, when the last suspicion of
// it expires (suspicionTick).
func (a *Actor) suspectUnheard(c actor.Context, now time.Time) {
	if a.network == "" {
		return
	}
	a.suspectSilent(c, now, maps.Keys(a.hb.latest), "no longer heard")
}

// suspectSilent signs and floods a suspicion of each of ws that has no
// session with us, is not heard, and that no suspicion we hold names.
func (a *Actor) suspectSilent(c actor.Context, now time.Time, ws iter.Seq[string], what string) {
	var ss []*messages.Suspicion
	for w := range ws {
		if _, direct := a.sessions[w]; direct {
			continue
		}
		if _, heard := a.hb.heard[w]; heard || a.suspected(w) {
			continue
		}
		ss = append(ss, a.signSuspicion(w, now))
	}
	if len(ss) == 0 {
		return
	}
	a.log.Info("suspecting writers "+what, "writers", len(ss))
	a.forwardSuspicions(c, "", ss)
}

// suspectNeverHeard does for the writers of the membership we never
// heard (none of their heartbeats reached us, and no session) what
// suspectUnheard does for those we heard once, once we have run a whole
// HeartbeatTimeout: a live writer's heartbeat reaches every node within
// an interval, so such a writer is dead, or was beyond a partition from
// before its first heartbeat reached us. Without it, a network split
// soon after its nodes met and healed past the timeout kept each side's
// writers counted out on the other until their next heartbeat, an
// interval after the heal: nobody there held a suspicion of them to
// cross and be refuted. The membership is the ledger's (GetWriters),
// asked only when the tick finds something changed (suspectUnheard's
// moments), and first a timeout after we joined the network (or started
// in it).
func (a *Actor) suspectNeverHeard(c actor.Context, now time.Time) {
	if a.network == "" || a.sus.askingWriters || now.Sub(a.netSince) < a.hbTimeout() {
		return
	}
	a.sus.askingWriters = true
	f := c.RequestFuture(a.d.Ledger, &messages.GetWriters{}, a.d.AskTimeout)
	c.ReenterAfter(f, func(res any, err error) {
		a.sus.askingWriters = false
		r, ok := res.(*messages.GetWritersReply)
		if err != nil || !ok {
			return // asked again at the next change
		}
		never := func(yield func(string) bool) {
			for _, w := range r.IDs {
				if _, once := a.hb.latest[w]; once || w == a.self {
					continue // suspectUnheard's, or us
				}
				if !yield(w) {
					return
				}
			}
		}
		a.suspectSilent(c, a.d.Now(), never, "never heard")
	})
}

// hold keeps s as the latest suspicion its author signed of its writer.
func (a *Actor) hold(s *messages.Suspicion, now time.Time) {
	a.sus.init()
	m := a.sus.held[s.Writer]
	if m == nil {
		m = map[string]*heldSuspicion{}
		a.sus.held[s.Writer] = m
	}
	m[s.By] = &heldSuspicion{s: s, at: now}
}

// forwardSuspicions sends suspicions to every established neighbour but
// from (the suspected writer too: it is the one to refute them).
func (a *Actor) forwardSuspicions(c actor.Context, from string, ss []*messages.Suspicion) {
	if len(ss) == 0 {
		return
	}
	for id, e := range a.sessions {
		if !e.up || id == from {
			continue
		}
		sendSuspicions(c, e, ss)
	}
}

// sendSuspicions sends ss to a neighbour in frames of at most half
// MaxSuspicions (a full one of ids as text is close to MaxFrameSize).
func sendSuspicions(c actor.Context, e *sessionEntry, ss []*messages.Suspicion) {
	for len(ss) > 0 {
		k := min(len(ss), messages.MaxSuspicions/2)
		c.Send(e.pid, &sendFrame{env: &messages.Envelope{Kind: messages.KindSuspicions, Overlay: &messages.Overlay{Suspicions: ss[:k:k]}}})
		ss = ss[k:]
	}
}

// onSuspicions takes a neighbour's suspicions and forwards the new ones
// (unless they came in a new neighbour's greeting).
func (a *Actor) onSuspicions(c actor.Context, from string, ss []*messages.Suspicion, forward bool) {
	a.hb.init()
	a.sus.init()
	now := a.d.Now()
	var fresh []*messages.Suspicion
	var answer []*messages.Heartbeat
	changed := false
	for _, s := range ss {
		refuted := s.Writer != a.self && s.Seq < a.hb.latest[s.Writer]
		carry := false
		if refuted && s.By != a.self && from != "" {
			// Already refuted here: the sender (and the author, if it
			// is the sender) may never have had the refuting heartbeat;
			// it goes back with the answer, signed by its writer. A
			// heartbeat too old for the sender to take (heartbeatMaxAge
			// by its clock) would not refute it there: then the
			// suspicion goes on toward its writer, who refutes it with
			// a fresh one (a partition's two sides meeting again hold
			// each other's suspicions from its start, and each side
			// the other's heartbeats from during it).
			if hb := a.hb.beats[s.Writer]; hb != nil && youngBeat(hb, now) {
				answer = append(answer, hb)
			} else {
				carry = true
			}
		}
		if prev := a.sus.held[s.Writer][s.By]; (prev != nil && prev.s.At >= s.At) || (refuted && !carry) || s.By == a.self {
			a.sus.dup++ // a lookup, no signature check
			continue
		}
		switch {
		case s.By == s.Writer || !messages.ValidPeerID(s.Writer):
			a.sus.refused++
			a.refuseBeat(c, from, "malformed suspicion")
			continue
		case !a.knownWriter(s.By):
			a.askAuthor(c, from, s, forward)
			continue
		}
		ttl := a.suspicionTTL()
		if ahead(uint64(s.At), now) {
			a.sus.refused++
			a.refuseBeat(c, from, "suspicion from the future")
			continue
		}
		if int64(s.At) < now.Add(-ttl).UnixMilli() {
			// Refused, not held against the neighbour: the TTL grows
			// with the writers a node knows (a few minutes at 20, 25
			// at 100), so a neighbour holds in good faith suspicions
			// that a node which knows fewer (one that just restarted,
			// which its neighbours greet with them) finds stale.
			a.sus.refused++
			continue
		}
		if ahead(s.Seq, now) {
			// Seq is a heartbeat of the suspect's, its clock in ms: one
			// further ahead than clocks differ could only be refuted by
			// a heartbeat the suspect will not sign before then, so any
			// writer could count any other out for as long as it kept
			// signing such suspicions.
			a.sus.refused++
			a.refuseBeat(c, from, "suspicion of a heartbeat from the future")
			continue
		}
		if !messages.ValidPeerID(s.By) || !messages.VerifyPeer(s.By, messages.SuspicionSigningBytes(a.network, s), s.Sig) {
			a.sus.refused++
			a.refuseBeat(c, from, "bad suspicion signature")
			continue
		}
		a.sus.taken++
		top, held := a.topSuspicion(s.Writer)
		a.hold(s, now)
		if s.Writer == a.self {
			fresh = append(fresh, s)
			a.hb.refute = true
			continue
		}
		if !held || s.Seq > top {
			// Only a suspicion that changes what a refutation must
			// beat goes on: one failure is suspected by each of the
			// writer's ~13 neighbours, and flooding every one of them
			// cost each node ~37 KB per failure at 20 writers.
			fresh = append(fresh, s)
		}
		if _, direct := a.sessions[s.Writer]; !direct {
			a.gate.unhold(s.Writer)
			changed = true
		}
	}
	if a.hb.refute && a.network != "" && now.Sub(a.hb.last) >= refuteGap {
		a.beat(c, now)
	}
	if forward {
		a.forwardSuspicions(c, from, fresh)
	}
	if e := a.sessions[from]; e != nil && e.up && len(answer) > 0 {
		c.Send(e.pid, &sendFrame{env: &messages.Envelope{Kind: messages.KindHeartbeats, Overlay: &messages.Overlay{Heartbeats: answer}}})
	}
	if changed {
		a.updateGate()
		a.connectedChanged(c)
	}
}

// askAuthor asks the ledger whether a suspicion's author is a writer,
// holding it (and the author's others that come meanwhile) until it
// answers; then they are taken as if they arrived now. Not a writer:
// refused, not held against the neighbour (as for heartbeats). An author
// we never heard sends one suspicion per writer it does not hear: at a
// heal, one per writer of the other side (500 at 1,000 writers split in
// halves), and each may be the only one to reach its writer, so the
// bound is on what all authors hold together (maxHeldSuspicions, a
// frame's worth, about 1 MB at most for one round trip to the ledger), not
// a few per author; past it a suspicion is refused and counted.
func (a *Actor) askAuthor(c actor.Context, from string, s *messages.Suspicion, forward bool) {
	by := s.By
	if a.sus.asking == nil {
		a.sus.asking = map[string][]heldSus{}
	}
	if a.sus.heldForAuthors() >= maxHeldSuspicions {
		a.sus.refused++
		return
	}
	if held, ok := a.sus.asking[by]; ok {
		a.sus.asking[by] = append(held, heldSus{from, s, forward})
		return
	}
	if len(a.sus.asking) >= maxWriterAsks || !messages.ValidPeerID(by) || !a.hb.notWriter[by].IsZero() {
		a.sus.refused++
		return
	}
	a.sus.asking[by] = []heldSus{{from, s, forward}}
	f := c.RequestFuture(a.d.Ledger, &messages.IsWriter{ID: by}, a.d.AskTimeout)
	c.ReenterAfter(f, func(res any, err error) {
		held := a.sus.asking[by]
		delete(a.sus.asking, by)
		if r, ok := res.(*messages.IsWriterReply); err != nil || !ok || !r.OK {
			a.sus.refused += int64(len(held))
			return
		}
		a.hb.writers[by] = true
		for _, h := range held {
			a.onSuspicions(c, h.from, []*messages.Suspicion{h.s}, h.forward)
		}
	})
}

// maxHeldSuspicions bounds the suspicions askAuthor holds, all authors
// together: one full frame's worth.
const maxHeldSuspicions = messages.MaxSuspicions

// heldForAuthors is how many suspicions wait on askAuthor's questions
// (at most maxWriterAsks authors to add up).
func (s *suspicionState) heldForAuthors() int {
	n := 0
	for _, held := range s.asking {
		n += len(held)
	}
	return n
}

type heldSus struct {
	from    string
	s       *messages.Suspicion
	forward bool
}

// knownWriter reports whether id is a writer of the network as far as we
// know: the ledger said so for its heartbeats, or it has a session with
// us (sessions are admitted for writers only).
func (a *Actor) knownWriter(id string) bool {
	if a.hb.writers[id] {
		return true
	}
	e := a.sessions[id]
	return e != nil && e.up
}

// youngBeat reports whether hb is young enough to send a neighbour
// that did not ask for it: signed within half of heartbeatMaxAge by our
// clock, so that the neighbour, whose clock may differ, does not refuse
// it as stale and count it against us (refuseBeat).
func youngBeat(hb *messages.Heartbeat, now time.Time) bool {
	return int64(hb.Seq) >= now.Add(-heartbeatMaxAge/2).UnixMilli()
}

// greetLiveness sends a new neighbour that had no neighbours the
// heartbeats we hold that it will take (youngBeat) and the unrefuted
// suspicions we hold, unless we greeted it greetsPerInterval times
// within a heartbeat interval.
func (a *Actor) greetLiveness(c actor.Context, id string) {
	e := a.sessions[id]
	if e == nil || a.network == "" {
		return
	}
	a.hb.init()
	now := a.d.Now()
	// A hello's zero neighbours is its sender's word: unbounded, a
	// writer reconnecting over and over would draw the whole frame each
	// time.
	every := a.hbInterval()
	for p, ats := range a.hb.greeted {
		ats = slices.DeleteFunc(ats, func(at time.Time) bool { return now.Sub(at) >= every })
		if len(ats) == 0 {
			delete(a.hb.greeted, p)
		} else {
			a.hb.greeted[p] = ats
		}
	}
	if len(a.hb.greeted[id]) >= greetsPerInterval {
		return
	}
	a.hb.greeted[id] = append(a.hb.greeted[id], now)
	// Only heartbeats the peer will take: one older than
	// heartbeatMaxAge by its clock is refused as stale and counted
	// against us, and we hold them up to HeartbeatTimeout (minutes past
	// a dozen writers).
	var hbs []*messages.Heartbeat
	if hb := a.hb.own; hb != nil && youngBeat(hb, now) {
		hbs = append(hbs, hb)
	}
	for w, hb := range a.hb.beats {
		if w != id && youngBeat(hb, now) {
			hbs = append(hbs, hb)
		}
	}
	ss := a.unrefuted()
	for len(hbs) > 0 || len(ss) > 0 {
		o := &messages.Overlay{}
		n := min(len(hbs), messages.MaxHeartbeats/2)
		o.Heartbeats, hbs = hbs[:n], hbs[n:]
		k := min(len(ss), messages.MaxSuspicions/2)
		o.Suspicions, ss = ss[:k], ss[k:]
		c.Send(e.pid, &sendFrame{env: &messages.Envelope{Kind: messages.KindLiveness, Overlay: o}})
	}
}

// unrefuted is every suspicion we hold that no heartbeat refuted.
func (a *Actor) unrefuted() []*messages.Suspicion {
	var ss []*messages.Suspicion
	for w, m := range a.sus.held {
		for _, hs := range m {
			if hs.s.Seq >= a.hb.latest[w] {
				ss = append(ss, hs.s)
			}
		}
	}
	return ss
}

// tellSuspicions sends a neighbour every unrefuted suspicion we hold,
// to be taken and forwarded as a flood. For a session that bridges a
// partition (we dialed a writer cut off by suspicion, or it dialed us):
// the suspected writers of its side learn of their suspicions through
// it and refute them, and the refutations come back across it, so the
// two sides count each other in again within a few round trips instead
// of when the suspicions expire. Duplicates cost the receiver a lookup.
func (a *Actor) tellSuspicions(c actor.Context, id string) {
	e := a.sessions[id]
	if e == nil || a.network == "" {
		return
	}
	sendSuspicions(c, e, a.unrefuted())
}

// stopping reports whether the supervisor is shutting down (its sessions
// end then because we end them).
func (a *Actor) stopping() bool { return a.ctx != nil && a.ctx.Err() != nil }
