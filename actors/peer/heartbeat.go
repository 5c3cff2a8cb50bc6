package peer

import (
	"maps"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"peerdns/messages"
)

// Liveness without a full mesh: every writer signs a heartbeat each
// HeartbeatInterval and sends it to its neighbours, who forward it to
// theirs, as ops travel. By default the interval scales with the writers
// we know (HeartbeatPerWriter, 5 s, each; at least 30 s; the first ones
// 1, 2, 4 ... s apart), so a node receives about one writer's heartbeat
// every 5 s whatever the size: heartbeats say a writer exists and was
// alive lately, and suspicions (suspicion.go) take a failed one out
// within seconds. A heartbeat is
// {writer, seq = Unix ms at the writer, strictly increasing, signature
// over network, writer and seq}.
//
//   - A duplicate (seq not above the highest we took from that writer)
//     costs one map lookup and is neither checked nor forwarded; only a
//     new one has its signature checked, once, and goes on to every
//     neighbour but the one it came from and its writer.
//   - Only writers of the network count (the ledger answers IsWriter once
//     per id; the answer is kept). A heartbeat whose signature does not
//     verify is refused and counted: no peer can speak for another
//     writer's liveness. A neighbour that sends maxBadHeartbeats refused
//     ones (bad signature, stale) is dropped from the active view. One
//     of an id that is not a writer is refused and goes no further, but
//     is not held against the neighbour: a new writer heartbeats before
//     the op that added it reaches every ledger (askWriter).
//   - A heartbeat older than heartbeatMaxAge by our clock is refused, so
//     a replay after our restart cannot make a dead writer active.
//
// The active set the ledger counts (messages.PeerSetChanged) is: writers
// with a session to us as today (heard directly within StaleAfter), plus
// writers without an established session whose heartbeat arrived within
// HeartbeatTimeout (default three intervals) and that are not suspected.
// Heartbeats of a writer we have a session with are forwarded but do not
// count: its session decides, so up to ActiveView writers (a full mesh)
// the set and its timing are exactly those of a full mesh. Beyond, a
// frozen writer leaves the active sets when its neighbours' suspicion
// arrives (StaleAfter, plus the hops).
//
// Cost: each heartbeat reaches every node once per neighbour that has
// not seen it from us first (~13 copies of ~150 B with a view of 12), so
// a node receives ~2 KB per writer per interval, ~400 B/s with the
// scaled interval at any size; a new neighbour gets the heartbeats we
// hold once, those young enough for it to take (suspicion.go).
//
// Forwarding: a heartbeat to pass on waits for the next tick (1 s) and
// goes out with the ping every session sends on that tick, in the same
// QUIC packet, so a hop costs bytes but no packet (and no
// acknowledgement) of its own; our own heartbeats are signed on the tick
// and go with it. A neighbour that sends us a heartbeat we hold queued
// for it is spared it. On a fleet that has just formed, the first
// heartbeats (above) are most of what travels, and forwarded one by one
// each was a packet on every link: an idle node of fifty sent ~100
// packets a second, about 30 with the heartbeats on the tick. A hop now
// takes up to a tick, so a heartbeat crosses the graph (diameter 4-5 at
// 1,000) in a few seconds, well inside HeartbeatTimeout (at least 90 s).
// What refutes a suspicion goes at once: our heartbeat signed to refute
// one, and a fresh heartbeat of a writer we hold suspected, since until
// it arrives that writer counts out of every quorum.

const (
	// heartbeatMaxAge: a heartbeat whose seq is older than this by our
	// clock, or further ahead of it, is refused (clocks of writers may
	// differ this much).
	heartbeatMaxAge = time.Minute
	// maxBadHeartbeats refused heartbeats from one neighbour drop it.
	maxBadHeartbeats = 16
	// maxWriterAsks bounds IsWriter questions in flight (and the
	// heartbeats waiting on them).
	maxWriterAsks = 64
	// notWriterFor is how long a "not a writer" answer is kept, for at
	// most maxNotWriters ids.
	notWriterFor  = 30 * time.Second
	maxNotWriters = 1024
)

// heartbeatState is the supervisor's liveness bookkeeping.
type heartbeatState struct {
	seq                 uint64                         // our last heartbeat's seq
	last                time.Time                      // when we sent it
	own                 *messages.Heartbeat            // and the heartbeat itself
	refute              bool                           // a suspicion of us arrived: heartbeat at once
	changed             bool                           // a writer was first heard, or heard again after a suspicion: tell the ledger (heardChanged)
	sent                int                            // heartbeats we signed
	latest              map[string]uint64              // writer → highest seq taken
	beats               map[string]*messages.Heartbeat // writer → that heartbeat, for new neighbours
	beatAt              map[string]time.Time           // writer → when it arrived
	heard               map[string]time.Time           // writer without a session → when its heartbeat came
	writers             map[string]bool                // ids the ledger says are writers
	notWriter           map[string]time.Time           // ids it says are not, with when it said so
	asking              map[string][]heldBeat
	bad                 map[string]int         // neighbour → refused heartbeats it sent
	greeted             map[string][]time.Time // neighbour → when we greeted it within a heartbeat interval (greetLiveness)
	taken, dup, refused int64
}

type heldBeat struct {
	from    string
	hb      *messages.Heartbeat
	forward bool // false: it came in a greeting (onHeartbeats)
}

func (h *heartbeatState) init() {
	if h.latest == nil {
		h.latest, h.heard = map[string]uint64{}, map[string]time.Time{}
		h.beats, h.beatAt = map[string]*messages.Heartbeat{}, map[string]time.Time{}
		h.writers, h.notWriter = map[string]bool{}, map[string]time.Time{}
		h.asking, h.bad = map[string][]heldBeat{}, map[string]int{}
		h.greeted = map[string][]time.Time{}
	}
}

// heartbeatTick sends our heartbeat when due, forgets writers whose
// heartbeats stopped and suspects them (suspectUnheard).
func (a *Actor) heartbeatTick(c actor.Context, now time.Time) {
	h := &a.hb
	h.init()
	changed := a.suspicionTick(now)
	timeout := a.hbTimeout()
	for w, at := range h.beatAt {
		if now.Sub(at) >= timeout {
			delete(h.beatAt, w)
			delete(h.beats, w)
		}
	}
	for w, at := range h.heard {
		if now.Sub(at) >= timeout {
			delete(h.heard, w)
			changed = true
			// Unheard: dead, or in a part of the graph we are cut off
			// from. A leave no longer keeps us from dialing it; the dial
			// asks it to make room (helloNeighbours).
			a.gate.unhold(w)
		}
	}
	for w, at := range h.notWriter {
		if now.Sub(at) >= notWriterFor {
			delete(h.notWriter, w)
		}
	}
	// A whole timeout in the network: writers never heard are suspected
	// as those no longer heard are, then again at each change.
	firstDue := !a.sus.neverHeardDue && a.network != "" && now.Sub(a.netSince) >= timeout
	if firstDue {
		a.sus.neverHeardDue = true
	}
	if changed || firstDue {
		a.suspectNeverHeard(c, now)
	}
	if changed {
		// A writer's heartbeats timed out or a suspicion expired.
		a.suspectUnheard(c, now)
		a.connectedChanged(c)
	}
	if a.network == "" {
		return
	}
	// The first heartbeats come 1, 2, 4 ... s apart up to the interval:
	// at start our neighbours (and theirs) come up one by one, and a
	// heartbeat sent before a node had any neighbour reaches nobody.
	every := min(a.hbInterval(), time.Second<<min(h.sent, 16))
	if !due(now, h.last, every, a.d.TickInterval) && !(h.refute && now.Sub(h.last) >= refuteGap) {
		return
	}
	a.beat(c, now)
}

// beat signs and sends our heartbeat now.
func (a *Actor) beat(c actor.Context, now time.Time) {
	h := &a.hb
	refuting := h.refute
	if refuting {
		a.sus.refutations++
	}
	h.last, h.refute = now, false
	h.sent++
	h.seq = max(h.seq+1, uint64(now.UnixMilli()))
	if refuting {
		// A heartbeat refutes a suspicion whose seq is below its own. A
		// suspicion names one of our heartbeats, so an honest one's seq
		// is below h.seq; one further ahead names a heartbeat we never
		// signed (taken, as clocks may differ, up to heartbeatMaxAge
		// ahead: ahead), and signed at our clock its refutation would
		// refute nothing until our clock passed it, which kept us out
		// for up to that long.
		for _, hs := range a.sus.held[a.self] {
			h.seq = max(h.seq, hs.s.Seq+1)
		}
	}
	hb := &messages.Heartbeat{Writer: a.self, Seq: h.seq}
	hb.Sig = a.d.Identity.Sign(messages.HeartbeatSigningBytes(a.network, a.self, h.seq))
	h.own = hb
	a.forwardBeats(c, "", []*messages.Heartbeat{hb}, refuting)
}

// hbInterval is how often we sign a heartbeat: Deps.HeartbeatInterval, or
// HeartbeatPerWriter for every writer we know of, at least
// heartbeatFloor.
func (a *Actor) hbInterval() time.Duration {
	if a.d.HeartbeatInterval > 0 {
		return a.d.HeartbeatInterval
	}
	return max(heartbeatFloor, time.Duration(len(a.hb.latest)+1)*a.d.HeartbeatPerWriter)
}

// hbTimeout is how long a writer without a session counts as active
// after its last heartbeat arrived (unless suspected).
func (a *Actor) hbTimeout() time.Duration {
	if a.d.HeartbeatTimeout > 0 {
		return a.d.HeartbeatTimeout
	}
	return 3 * a.hbInterval()
}

// forwardBeats queues heartbeats for every established neighbour except
// from and each heartbeat's own writer; they go out at the next tick
// (flushBeats), or at once when urgent.
func (a *Actor) forwardBeats(c actor.Context, from string, hbs []*messages.Heartbeat, urgent bool) {
	if len(hbs) == 0 {
		return
	}
	for id, e := range a.sessions {
		if !e.up || id == from {
			continue
		}
		for _, hb := range hbs {
			if hb.Writer == id {
				continue
			}
			if e.beatsOut == nil {
				e.beatsOut = map[string]*messages.Heartbeat{}
			}
			if q := e.beatsOut[hb.Writer]; q == nil || q.Seq < hb.Seq {
				e.beatsOut[hb.Writer] = hb
			}
		}
		if urgent || len(e.beatsOut) >= messages.MaxHeartbeats {
			a.flushBeatsTo(c, e)
		}
	}
}

// heldBy notes that the neighbour e sent us hb: it need not get it (or
// an older one of its writer) from us at the next tick.
func heldBy(e *sessionEntry, hb *messages.Heartbeat) {
	if q := e.beatsOut[hb.Writer]; q != nil && q.Seq <= hb.Seq {
		delete(e.beatsOut, hb.Writer)
	}
}

// flushBeats sends every neighbour the heartbeats queued for it.
func (a *Actor) flushBeats(c actor.Context) {
	for _, e := range a.sessions {
		a.flushBeatsTo(c, e)
	}
}

func (a *Actor) flushBeatsTo(c actor.Context, e *sessionEntry) {
	if len(e.beatsOut) == 0 {
		return
	}
	if e.up {
		out := slices.SortedFunc(maps.Values(e.beatsOut), func(x, y *messages.Heartbeat) int { return strings.Compare(x.Writer, y.Writer) })
		for len(out) > 0 {
			n := min(len(out), messages.MaxHeartbeats)
			c.Send(e.pid, &sendFrame{env: &messages.Envelope{Kind: messages.KindHeartbeats, Overlay: &messages.Overlay{Heartbeats: out[:n:n]}}})
			out = out[n:]
		}
	}
	e.beatsOut = nil
}

// onHeartbeats takes a neighbour's heartbeats and forwards the new ones
// (unless they came in a new neighbour's greeting: forward false).
func (a *Actor) onHeartbeats(c actor.Context, from string, hbs []*messages.Heartbeat, forward bool) {
	h := &a.hb
	h.init()
	var fresh, refuting []*messages.Heartbeat
	refutes := false // a fresh one refutes a suspicion we hold: it goes on at once
	sender := a.sessions[from]
	for _, hb := range hbs {
		if hb.Writer == a.self || hb.Seq <= h.latest[hb.Writer] {
			h.dup++ // a lookup, no signature check
			if sender != nil {
				heldBy(sender, hb)
			}
			continue
		}
		switch {
		case h.writers[hb.Writer]:
			suspected := a.suspected(hb.Writer)
			if a.takeBeat(c, from, hb) {
				fresh = append(fresh, hb)
				refutes = refutes || suspected
				if suspected {
					refuting = append(refuting, hb)
				}
			}
		case !h.notWriter[hb.Writer].IsZero():
			h.refused++ // not counted against the neighbour (refuseBeat)
		default:
			a.askWriter(c, from, hb, forward)
		}
	}
	a.heardChanged(c)
	switch {
	case forward:
		a.forwardBeats(c, from, fresh, refutes)
	case len(refuting) > 0:
		// A greeting's heartbeats are not passed on (the greeter's
		// other neighbours hold them), except those that refute a
		// suspicion we held: our neighbours hold it too. A greeting
		// comes with every session that asks for room, and so with
		// each one that bridges a healed partition, whose two sides
		// hold each other's suspicions from its start.
		a.forwardBeats(c, from, refuting, true)
	}
}

// ahead reports whether ms, a writer's clock in milliseconds (a
// heartbeat's seq, a suspicion's time), is further ahead of now than
// writers' clocks may differ (heartbeatMaxAge).
func ahead(ms uint64, now time.Time) bool {
	return ms > uint64(now.Add(heartbeatMaxAge).UnixMilli())
}

// takeBeat checks a new heartbeat and records it; false if refused.
func (a *Actor) takeBeat(c actor.Context, from string, hb *messages.Heartbeat) bool {
	h := &a.hb
	if hb.Seq <= h.latest[hb.Writer] {
		h.dup++
		return false
	}
	now := a.d.Now()
	if int64(hb.Seq) < now.Add(-heartbeatMaxAge).UnixMilli() {
		a.refuseBeat(c, from, "stale")
		return false
	}
	if ahead(hb.Seq, now) {
		// As far ahead as clocks may differ, no further: taken, a seq
		// from a clock a year fast made every later heartbeat of its
		// writer, with the clock put right, a duplicate here for a
		// year (never heard again, and no suspicion of it refuted).
		a.refuseBeat(c, from, "from the future")
		return false
	}
	if !messages.ValidPeerID(hb.Writer) || !messages.VerifyPeer(hb.Writer, messages.HeartbeatSigningBytes(a.network, hb.Writer, hb.Seq), hb.Sig) {
		a.refuseBeat(c, from, "bad signature")
		return false
	}
	h.taken++
	// Before latest moves: whether the writer was suspected is judged
	// against the seq we held until now (with the new one every
	// suspicion it refutes already looks refuted, the active set would
	// not be sent again, and the ledger would keep it counted out).
	refuted := a.suspected(hb.Writer)
	h.latest[hb.Writer] = hb.Seq
	h.beats[hb.Writer], h.beatAt[hb.Writer] = hb, now
	if e := a.sessions[hb.Writer]; e == nil || !e.up {
		_, was := h.heard[hb.Writer]
		h.heard[hb.Writer] = now
		if !was || refuted {
			h.changed = true // told once the frame is taken (heardChanged)
		}
	}
	return true
}

// heardChanged tells the ledger the active set once after the
// heartbeats of one frame (or one ledger answer) were taken, not once
// per writer first heard: a node that starts among 1,000 writers hears
// them in a few frames, and each PeerSetChanged carries the whole set.
func (a *Actor) heardChanged(c actor.Context) {
	if a.hb.changed {
		a.hb.changed = false
		a.connectedChanged(c)
	}
}

// refuseBeat counts a refused heartbeat against the neighbour that sent
// it; one that keeps sending them leaves the active view.
func (a *Actor) refuseBeat(c actor.Context, from, why string) {
	h := &a.hb
	h.refused++
	h.bad[from]++
	if h.bad[from] == maxBadHeartbeats {
		a.log.Warn("dropping neighbour: it forwards heartbeats we refuse", "peer", short(from), "last", why)
		a.diag.issue(a.d.Now(), messages.ConnectionIssue{PeerID: from, Kind: "heartbeat", Reason: why})
		delete(h.bad, from)
		a.sendLeave(c, from)
	}
}

// askWriter asks the ledger whether hb's writer is one, holding hb (and
// later ones of the same writer) until it answers.
func (a *Actor) askWriter(c actor.Context, from string, hb *messages.Heartbeat, forward bool) {
	h := &a.hb
	w := hb.Writer
	if held, ok := h.asking[w]; ok {
		if len(held) < 4 {
			h.asking[w] = append(held, heldBeat{from: from, hb: hb, forward: forward})
		}
		return
	}
	if len(h.asking) >= maxWriterAsks || !messages.ValidPeerID(w) {
		h.refused++
		return
	}
	h.asking[w] = []heldBeat{{from: from, hb: hb, forward: forward}}
	f := c.RequestFuture(a.d.Ledger, &messages.IsWriter{ID: w}, a.d.AskTimeout)
	c.ReenterAfter(f, func(res any, err error) {
		held := h.asking[w]
		delete(h.asking, w)
		r, ok := res.(*messages.IsWriterReply)
		if err != nil || !ok {
			return // asked again at its next heartbeat
		}
		if !r.OK {
			// Not a writer of ours, or one whose addition has not
			// reached our ledger yet: a new writer heartbeats at once,
			// and its heartbeats travel faster than the op that added
			// it. So the neighbour that forwarded it is not at fault and
			// it is not counted against it; the heartbeat is refused
			// and goes no further. The answer is kept a while (bounded,
			// so heartbeats of made-up ids cannot grow it) to spare the
			// ledger a question per heartbeat.
			if len(h.notWriter) < maxNotWriters {
				h.notWriter[w] = a.d.Now()
			}
			h.refused += int64(len(held))
			return
		}
		h.writers[w] = true
		for _, b := range held {
			// As onHeartbeats: a heartbeat that refutes a suspicion we
			// held goes on at once, from a greeting too. A bridge
			// across a healed partition greets with the heartbeats of
			// its side, whose writers the other side may never have
			// heard: taken here and not passed on, it would leave the
			// rest of our side counting its writer out until its next
			// heartbeat, minutes later.
			suspected := a.suspected(w)
			if a.takeBeat(c, b.from, b.hb) && (b.forward || suspected) {
				a.forwardBeats(c, b.from, []*messages.Heartbeat{b.hb}, suspected)
			}
		}
		a.heardChanged(c)
	})
}

// activeIDs is the set the ledger counts: connected writers (upIDs) and
// writers heard by heartbeat that have no session with us.
func (a *Actor) activeIDs() []string {
	ids := a.upIDs()
	if len(a.hb.heard) == 0 {
		return ids
	}
	have := make(map[string]bool, len(ids))
	for _, id := range ids {
		have[id] = true
	}
	for w := range a.hb.heard {
		if e := a.sessions[w]; (e == nil || !e.up) && !have[w] && !a.suspected(w) {
			ids = append(ids, w)
		}
	}
	sort.Strings(ids)
	return ids
}

// heardNow marks a writer we stop having a session with as heard now, so
// dropping it from the active view does not drop it from the quorum
// before its next heartbeat arrives another way.
func (a *Actor) heardNow(id string) {
	a.hb.init()
	a.hb.heard[id] = a.d.Now()
}

// writersAdded forgets the "not a writer" answers once an applied op adds
// a writer, and says whether it did: the id asked about may be the new
// writer's, whose heartbeats count from now on (and whose address a
// peer list may have named: relearn).
func (a *Actor) writersAdded(ops []*messages.Op) bool {
	if len(a.hb.notWriter) == 0 {
		return false
	}
	p := messages.KeyWriter + ":"
	for _, op := range ops {
		if strings.HasPrefix(op.Key, p) {
			clear(a.hb.notWriter)
			return true
		}
		for _, w := range op.Batch {
			if strings.HasPrefix(w.Key, p) {
				clear(a.hb.notWriter)
				return true
			}
		}
	}
	return false
}
