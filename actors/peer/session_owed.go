package peer

import (
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"peerdns/messages"
)

// Withholding neighbours.
//
// Plumtree's lazy links and the digest exchange repair ops one neighbour
// kept back only when another neighbour has them to give. A node whose
// every neighbour withholds (or is too slow to matter) would stay cut off
// until its view changed by chance. What gives a withholder away is its
// own vector: a neighbour answers our digest with its full vector when
// the two differ, so we learn it holds ops we lack. If, from then on, we
// make no progress on that writer for owedAfter, no neighbour is giving
// us those ops, and this one holds them: the supervisor drops it from the
// active view (a leave, counted as withholding), so the view takes a
// neighbour that delivers, as HyParView replaces a failed neighbour.
//
// Progress on the writer resets the clock, so a busy ledger working
// through a burst never looks like a withholder. A writer that is itself
// our neighbour is exempt: neighbours do not relay a writer's ops to a
// node connected to that writer (session_sync.go), so the writer owes
// them, not the relay. A pinned session (tunnels) is never dropped.

// owedAfter is how long we wait, in sync intervals, without progress on
// a writer whose ops a neighbour holds, before we call it withholding.
// Five intervals: the peer answers our vector within one or two, and a
// relayed op is usually on its way within one.
const owedAfter = 5

// owedState is one session's view of what its peer owes us.
type owedState struct {
	writers  map[string]owedWriter
	reported time.Time // when we last told the supervisor
}

type owedWriter struct {
	seq   uint64    // highest seq the peer's vector showed
	ours  uint64    // our applied seq when since was set
	since time.Time // last progress on this writer
}

// neighbourOwes tells the supervisor that the peer's vector has held ops
// of writer we lack, with no progress, for owedAfter sync intervals.
type neighbourOwes struct {
	pid        *actor.PID
	id, writer string
}

// noteOwed compares the peer's vector with what our ledger applied. A
// vector is the peer's whole one, so what it owes us is what this one
// shows: a writer it no longer names is forgotten. (Kept across vectors,
// the writers of a neighbour that named new ones in each vector, none
// of which we would ever hold, piled up for as long as the session
// lasted: 20,000 a frame, 4 MiB.)
func (s *session) noteOwed(c actor.Context, peerVV messages.VersionVector) {
	if s.cfg.applied == nil {
		return
	}
	o := &s.owed
	now := s.cfg.now()
	wait := owedAfter * s.cfg.syncInterval
	var late string
	var next map[string]owedWriter
	for w, n := range peerVV {
		if w == s.cfg.hello.ID {
			continue // our own ops
		}
		ours := s.cfg.applied.Seq(w)
		if n <= ours {
			continue
		}
		ow, ok := o.writers[w]
		if !ok || ours > ow.ours {
			ow = owedWriter{ours: ours, since: now}
		}
		ow.seq = max(ow.seq, n)
		if next == nil {
			next = map[string]owedWriter{}
		}
		next[w] = ow
		if now.Sub(ow.since) >= wait {
			late = w
		}
	}
	o.writers = next
	// While our reader waits for our ledger, what the peer sent is
	// unread here: the lag is ours.
	if late != "" && now.Sub(o.reported) >= wait && now.Sub(s.heardAt(now)) < s.cfg.syncInterval {
		o.reported = now
		c.Send(c.Parent(), &neighbourOwes{pid: c.Self(), id: s.peer, writer: late})
	}
}

// onNeighbourOwes drops a neighbour that holds ops we lack and does not
// send them, unless the writer is our neighbour, the session is pinned or
// we are still joining.
func (a *Actor) onNeighbourOwes(c actor.Context, m *neighbourOwes) {
	e := a.sessions[m.id]
	if e == nil || !e.pid.Equal(m.pid) {
		return
	}
	if _, direct := a.sessions[m.writer]; direct || a.pinned(m.id, a.d.Now()) {
		return
	}
	// A node whose own addition has not reached its ledger yet is still
	// joining: it lags by definition, and no peer but its inviter takes
	// it as a neighbour yet.
	f := c.RequestFuture(a.d.Ledger, &messages.IsWriter{ID: a.self}, a.d.AskTimeout)
	c.ReenterAfter(f, func(res any, err error) {
		if r, ok := res.(*messages.IsWriterReply); err == nil && ok && r.OK {
			a.dropWithholder(c, m)
		}
	})
}

// dropWithholder drops m's neighbour once we are a writer.
func (a *Actor) dropWithholder(c actor.Context, m *neighbourOwes) {
	e := a.sessions[m.id]
	if e == nil || !e.pid.Equal(m.pid) {
		return
	}
	a.view.withholding++
	a.log.Warn("dropping neighbour: it holds ops we lack and does not send them", "peer", short(m.id), "writer", short(m.writer))
	a.diag.issue(a.d.Now(), messages.ConnectionIssue{Addr: e.conn.RemoteAddr().String(), PeerID: m.id, Kind: "overlay", Reason: "holds ops we lack and does not send them"})
	a.sendLeave(c, m.id)
}
