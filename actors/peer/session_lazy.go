package peer

import (
	"slices"
	"sync"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"peerdns/messages"
)

// Dissemination in the manner of Plumtree (Leitão, Pereira, Rodrigues,
// SRDS 2007). Every link starts eager: ops a node applies are pushed to
// its neighbours (push, session_sync.go). A node that gets an ops frame
// made only of ops it holds already (the ledger counts them as
// duplicates; their signatures were never checked, see onOps) tells the
// sender "prune", and both ends make the link lazy: from then on the
// sender announces the ids of ops it relays ("ihave") instead of the
// ops. The eager links left form a spanning tree, so an op arrives about
// once. A node that hears of an op by ihave and does not get it within
// LazyTimeout asks the announcer for it ("graft"), which also makes that
// link eager again: the tree repairs itself around a neighbour that
// stopped forwarding. A writer always pushes its own ops eagerly, so up
// to ActiveView writers (a full mesh, where the writer reaches everyone
// directly) ops travel as they always did.
//
// Every link starting eager made a network's first ops after its views
// formed (no op had pruned anything yet) flood every link: each node got
// each of them from all ~13 neighbours, and the prunes those duplicates
// caused, many at once and for ops of many writers, cut the shared tree
// into pieces that grafts then mended, one LazyTimeout at a time. So a
// node lets at most EagerLinks neighbours push to it from the start
// (its feeds): a session established while that many feed us prunes
// its link at once. The pruned end announces from then on; ours pushes
// until the other end prunes it for a duplicate, which it does only on
// a link it still pushes on (onDuplicates), so the links a node opened
// lazy stay one-way. Every node starts with min(EagerLinks, its links)
// feeds it chose, and a graph in which every node picks 4 feeds is
// connected with high probability; where it is not, grafts mend it. A
// node whose feeds end (trims, leaves, failures) asks as many other
// neighbours to push on its next tick (refeed) with a graft of no op,
// which unlike a graft of ops does not make the asker push in turn.
// Up to ActiveView writers nothing changes: a writer's own ops go to
// every neighbour whole.
//
// In the 100-writer simulation a burst right after the views filled
// received a quarter fewer ops per claim this way; the figures, and the
// variants tried and left, are in docs/scale.md ("Feeds").
//
// Hostile neighbours: ids a peer announces are rate-limited
// (ihaveRate ids a second, a burst of ihaveBurst); ids over the limit
// are ignored and counted, and a peer that goes over by
// maxIHaveFlood ids is dropped from the active view. Ids we grafted that
// the peer does not deliver within undeliveredAfter count against it;
// maxUndelivered of them drop it too. The periodic digest exchange
// repairs whatever a withholding neighbour kept back.

const (
	ihaveRate        = messages.MaxOpIDs // ids a second a peer may announce
	ihaveBurst       = 4 * messages.MaxOpIDs
	maxIHaveFlood    = 4 * messages.MaxOpIDs
	maxMissing       = 4 * messages.MaxOpIDs // announced ids we wait for, per peer
	maxUndelivered   = 64
	undeliveredAfter = 4 // × LazyTimeout after the graft
)

// lazyState is a session's Plumtree state. Touched only from Receive.
type lazyState struct {
	lazy        bool                        // we announce ids to the peer instead of pushing ops
	pruned      bool                        // we asked the peer to announce ids to us instead of pushing ops
	missing     map[messages.OpID]time.Time // announced by the peer, not held yet: when first heard
	grafted     map[messages.OpID]time.Time // asked of the peer: when
	due         bool                        // a lazyDue is scheduled
	tokens      float64
	tokensAt    time.Time
	flood       int64 // announced ids over the rate limit
	undelivered int
}

// graftBook is shared by a supervisor's sessions so one op announced by
// several lazy neighbours is grafted from one of them at a time.
type graftBook struct {
	mu sync.Mutex
	at map[messages.OpID]time.Time
}

// claim reports whether id may be grafted now (nobody did within d).
func (g *graftBook) claim(id messages.OpID, now time.Time, d time.Duration) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.at == nil {
		g.at = map[messages.OpID]time.Time{}
	}
	if t, ok := g.at[id]; ok && now.Sub(t) < d {
		return false
	}
	if len(g.at) >= 4*maxMissing {
		for k, t := range g.at {
			if now.Sub(t) >= d {
				delete(g.at, k)
			}
		}
	}
	g.at[id] = now
	return true
}

// feedMe: the supervisor wants the peer to push to us again (refeed).
type feedMe struct{}

// lazyDue: announced ops may be overdue; graft them.
type lazyDue struct{}

// dropNeighbour: a session asks the supervisor to drop its peer from the
// active view (it misbehaves).
type dropNeighbour struct {
	pid     *actor.PID
	id, why string
}

// announceIDs sends ids instead of ops on a lazy link. (Holding them a
// moment so that ids the peer announced meanwhile are left out was
// tried: the ids we announce also keep the peer from pushing those ops
// to us over its eager link, and the held ones did not: the 300-writer
// burst received 40-60% more ops for 25% fewer ids.)
func (s *session) announceIDs(ops []*messages.Op) {
	ids := make([]messages.OpID, 0, min(len(ops), messages.MaxOpIDs))
	for _, op := range ops {
		ids = append(ids, messages.OpID{Writer: op.Writer, Seq: op.Seq})
		if len(ids) == messages.MaxOpIDs {
			s.enqueue(&messages.Envelope{Kind: messages.KindIHave, Overlay: &messages.Overlay{IDs: ids}})
			s.stats.ihaveSent += int64(len(ids))
			ids = make([]messages.OpID, 0, min(len(ops), messages.MaxOpIDs))
		}
	}
	if len(ids) > 0 {
		s.enqueue(&messages.Envelope{Kind: messages.KindIHave, Overlay: &messages.Overlay{IDs: ids}})
		s.stats.ihaveSent += int64(len(ids))
	}
}

// held reports whether we have the op: applied, or received and
// verified by a session and on its way through our ledger. Under load
// an op can wait in our own ledger's queue longer than LazyTimeout;
// grafting it then costs the peer a resend and turns its link eager for
// nothing: counting only applied ops, a burst of 100 claims (about 600
// ops) on 50 processes sharing two cores made 27,309 grafts.
func (s *session) held(id messages.OpID) bool {
	return s.cfg.applied.Has(id.Writer, id.Seq) || s.cfg.checked.Seen(id.Writer, id.Seq)
}

// onIHave notes announced ops we lack and schedules their graft.
func (s *session) onIHave(c actor.Context, ids []messages.OpID) {
	l := &s.lz
	now := s.cfg.now()
	if l.tokensAt.IsZero() {
		l.tokens, l.tokensAt = ihaveBurst, now
	}
	l.tokens = min(ihaveBurst, l.tokens+now.Sub(l.tokensAt).Seconds()*ihaveRate)
	l.tokensAt = now
	if l.missing == nil {
		l.missing, l.grafted = map[messages.OpID]time.Time{}, map[messages.OpID]time.Time{}
	}
	for _, id := range ids {
		if l.tokens < 1 || len(l.missing) >= maxMissing {
			l.flood++
			continue
		}
		l.tokens--
		if id.Writer == "" {
			s.stats.idsUnknown++ // a short id we cannot resolve (messages, Short ids)
			continue
		}
		// The peer announces what its ledger applied, and a ledger
		// applies a writer's ops in order: it holds everything of the
		// writer up to id. Without this, what a lazy neighbour got from
		// others stayed unknown to us until its next vector, and a graft
		// or a push sent it again.
		if id.Seq > s.peerVV[id.Writer] {
			s.peerVV[id.Writer] = id.Seq
		}
		if s.held(id) {
			continue
		}
		if _, ok := l.missing[id]; !ok {
			l.missing[id] = now
		}
	}
	if l.flood >= maxIHaveFlood {
		s.drop(c, "announces more op ids than allowed")
		return
	}
	s.scheduleLazy(c)
}

func (s *session) scheduleLazy(c actor.Context) {
	l := &s.lz
	if l.due || (len(l.missing) == 0 && len(l.grafted) == 0) {
		return
	}
	l.due = true
	sendLater(c.ActorSystem(), c.Self(), s.cfg.lazyTimeout, &lazyDue{})
}

// onLazyDue grafts announced ops that did not arrive in time and counts
// grafted ones the peer did not deliver.
func (s *session) onLazyDue(c actor.Context) {
	l := &s.lz
	l.due = false
	now := s.cfg.now()
	for id, at := range l.grafted {
		switch {
		case s.held(id):
			delete(l.grafted, id)
		case now.Sub(at) >= undeliveredAfter*s.cfg.lazyTimeout:
			delete(l.grafted, id)
			l.undelivered++
		}
	}
	if l.undelivered >= maxUndelivered {
		s.drop(c, "announced ops it does not deliver")
		return
	}
	var want []messages.OpID
	for id, at := range l.missing {
		if s.held(id) {
			delete(l.missing, id)
			continue
		}
		if now.Sub(at) < s.cfg.lazyTimeout {
			continue
		}
		if s.cfg.grafts.claim(id, now, s.cfg.lazyTimeout) {
			want = append(want, id)
			delete(l.missing, id)
			l.grafted[id] = now
		} else {
			l.missing[id] = now // another neighbour was asked: wait for it first
		}
		if len(want) == messages.MaxOpIDs {
			break
		}
	}
	if len(want) > 0 {
		s.stats.grafts += int64(len(want))
		s.lz.lazy, s.lz.pruned = false, false // the peer is our tree link for these now
		s.enqueue(&messages.Envelope{Kind: messages.KindGraft, Overlay: &messages.Overlay{IDs: want}})
	}
	s.scheduleLazy(c)
}

// onGraft makes the link eager and sends the ops asked for: everything
// of their writers from the lowest seq asked, as a gap repair does, and
// nothing of other writers. (Answers also carried whatever else the
// peer lacked as far as we knew, peerVV, but for fresh ops: in the
// fifty-process burst that was 14 ops per grafted id, a third of all
// ops sent, and most of them reached the asker as duplicates, since
// what we know of a peer under load is seconds old. The periodic vector
// exchange repairs the rest; docs/bench-history.md, "Grafts answered
// with the grafted writers' ops alone".) A graft of no op (seq 0
// only: onFeedMe) asks for pushes alone: answering it with repairs
// brought ops the asker held, and that frame of duplicates pruned the
// link again.
func (s *session) onGraft(c actor.Context, ids []messages.OpID) {
	s.lz.lazy = false
	ids = slices.DeleteFunc(ids, func(id messages.OpID) bool {
		if id.Writer == "" && id.Seq > 0 {
			s.stats.idsUnknown++
			return true
		}
		return false
	})
	if !slices.ContainsFunc(ids, func(id messages.OpID) bool { return id.Seq > 0 }) {
		return // the asker does not push to us for it (onFeedMe)
	}
	s.lz.pruned = false // the asker pushes to us again too (onLazyDue)
	vv := copyVV(s.peerVV)
	grafted := map[string]bool{}
	for _, id := range ids {
		if id.Seq == 0 {
			continue
		}
		grafted[id.Writer] = true
		if n, ok := vv[id.Writer]; !ok || n >= id.Seq {
			vv[id.Writer] = id.Seq - 1
		}
	}
	s.startSync(c, vv, syncGraft, grafted)
}

// onDuplicates prunes an eager link that brought only ops we held.
func (s *session) onDuplicates(n, of int) {
	if n == 0 || n < of || s.lz.lazy {
		return
	}
	s.lz.lazy, s.lz.pruned = true, true
	s.stats.prunes++
	s.enqueue(&messages.Envelope{Kind: messages.KindPrune, Overlay: &messages.Overlay{}})
}

func (s *session) drop(c actor.Context, why string) {
	s.cfg.log.Warn("dropping neighbour", "peer", short(s.peer), "reason", why)
	c.Send(c.Parent(), &dropNeighbour{pid: c.Self(), id: s.peer, why: why})
}

// feeds counts our sessions whose peer we did not prune, as they last
// reported (a new session as it started).
func (a *Actor) feeds() int {
	n := 0
	for _, e := range a.sessions {
		if !e.stats.pruned {
			n++
		}
	}
	return n
}

// refeed asks another neighbour to push to us for every feed whose
// session ended since the last tick (trimmed, left, failed, replaced),
// up to EagerLinks feeds (a replacing session took a free place as it
// started): ops would otherwise reach us only by graft, a LazyTimeout
// late. Feeds pruned for a duplicate are not replaced: that is the tree
// forming.
func (a *Actor) refeed(c actor.Context) {
	need := min(a.view.feedsLost, a.d.EagerLinks-a.feeds())
	a.view.feedsLost = 0
	for _, e := range a.sessions {
		if need <= 0 {
			return
		}
		if e.up && e.stats.pruned {
			e.stats.pruned = false
			need--
			c.Send(e.pid, &feedMe{})
		}
	}
}

// onFeedMe grafts no op of the peer: it pushes to us again. Our pushes
// to it stay as they are (onGraft): it did not ask for them.
func (s *session) onFeedMe() {
	if !s.lz.pruned {
		return
	}
	s.lz.pruned = false
	s.enqueue(&messages.Envelope{Kind: messages.KindGraft, Overlay: &messages.Overlay{IDs: []messages.OpID{{Writer: s.cfg.hello.ID}}}})
}
