package peer

import (
	"time"

	"github.com/asynkron/protoactor-go/actor"
)

// A peer is silent once StaleAfter has passed since we last heard it,
// at that moment, not at the first tick after it. The tick looks (once a
// second); when the peer would fall due before the next tick, the session
// looks again at the instant it does (silentDue, one timer at most, and
// only for a peer already quiet for StaleAfter less a tick: a peer that
// pings every second never needs one).
//
// Why: counted on the tick alone, a peer went silent anywhere from
// StaleAfter to StaleAfter plus a tick after its last frame, and the
// bound on a frozen voter (out of every quorum within 3 s up to R
// writers) had to hold over the sum. With the look at the instant, the
// time is StaleAfter itself whatever the tick's phase, so StaleAfter can
// be set where the tolerance of a late ping wants it (2.5 s: one missed
// ping and half a second of lateness pass unnoticed) and the bound keeps
// half a second for the hops and the processing.

// silentDue asks a session to look again whether its peer is silent.
type silentDue struct{ stale time.Duration }

// silentSlack is added to a scheduled look so that the clock read there
// is surely past the instant (timers do not fire early, but heardAt may
// hold a time without a monotonic reading).
const silentSlack = time.Millisecond

// onSilentDue makes the look a silentDue asked for.
func (s *session) onSilentDue(c actor.Context, m *silentDue) {
	s.silentLook = false
	s.lookSilent(c, s.cfg.now(), m.stale, 0)
}

// lookSilent tells the supervisor the peer is silent when it has not
// been heard for stale by now. Otherwise, when interval > 0 (a tick) and
// the peer would fall due before the next tick, it schedules one more
// look at that instant; a look made by that timer (interval 0)
// schedules none, so the tick stays the only clock that repeats.
func (s *session) lookSilent(c actor.Context, now time.Time, stale, interval time.Duration) {
	if s.silent || stale <= 0 {
		return
	}
	heard := s.heardAt(now)
	if quiet := now.Sub(heard); quiet >= stale {
		s.silent = true
		s.cfg.log.Info("peer silent", "peer", short(s.peer), "for", quiet.Round(time.Millisecond).String())
		c.Send(c.Parent(), &peerSilent{pid: c.Self(), id: s.peer, silent: true})
		return
	}
	wait := heard.Add(stale).Sub(now)
	if interval <= 0 || wait >= interval || s.silentLook {
		return
	}
	s.silentLook = true
	sendLater(c.ActorSystem(), c.Self(), wait+silentSlack, &silentDue{stale: stale})
}
