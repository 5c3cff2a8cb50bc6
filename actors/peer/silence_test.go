package peer

import (
	"io"
	"log/slog"
	"testing"
	"testing/synctest"
	"time"

	"github.com/asynkron/protoactor-go/actor"
)

// silenceRig runs one session's silence bookkeeping in a child actor
// (on virtual time) and reports when its parent is told the peer is
// silent.
type silenceRig struct {
	sys    *actor.ActorSystem
	child  *actor.PID
	silent chan time.Time
}

func newSilenceRig(t *testing.T) *silenceRig {
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	r := &silenceRig{
		sys:    actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return quiet })),
		silent: make(chan time.Time, 4),
	}
	s := &session{peer: "ab"}
	s.cfg.log, s.cfg.now = quiet, time.Now
	s.stats.lastSeen = time.Now()
	ready := make(chan *actor.PID, 1)
	r.sys.Root.Spawn(actor.PropsFromFunc(func(c actor.Context) {
		switch m := c.Message().(type) {
		case *actor.Started:
			ready <- c.Spawn(actor.PropsFromFunc(func(c actor.Context) {
				switch m := c.Message().(type) {
				case *tick:
					s.lookSilent(c, m.now, m.staleAfter, m.interval)
				case *silentDue:
					s.onSilentDue(c, m)
				case func(*session):
					m(s)
				}
			}))
		case *peerSilent:
			if m.silent {
				r.silent <- time.Now()
			}
		}
	}))
	r.child = <-ready
	t.Cleanup(r.sys.Shutdown)
	return r
}

func (r *silenceRig) tick(stale time.Duration) {
	r.sys.Root.Send(r.child, &tick{now: time.Now(), staleAfter: stale, interval: time.Second})
}

// A peer goes silent at the instant StaleAfter has passed since its last
// frame, not at the first tick after it; a frame heard before that
// instant keeps it, and a peer heard within StaleAfter less a tick needs
// no look between ticks.
func TestSilentAtTheInstant(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const stale = 2500 * time.Millisecond
		r := newSilenceRig(t)
		start := time.Now()
		looked := make(chan bool, 1)
		peek := func() bool {
			r.sys.Root.Send(r.child, func(s *session) { looked <- s.silentLook })
			return <-looked
		}

		time.Sleep(time.Second)
		r.tick(stale) // quiet 1 s: due in 1.5 s, after the next tick
		if peek() {
			t.Fatal("a look was scheduled for a peer quiet less than StaleAfter less a tick")
		}
		time.Sleep(time.Second)
		r.tick(stale) // quiet 2 s: due in 0.5 s, before the next tick
		synctest.Wait()
		select {
		case at := <-r.silent:
			t.Fatalf("silent %v after the last frame, before StaleAfter", at.Sub(start))
		default:
		}
		at := <-r.silent
		if got := at.Sub(start); got < stale || got > stale+10*time.Millisecond {
			t.Fatalf("silent %v after the last frame, want %v (not the next tick)", got, stale)
		}

		// Heard again (the supervisor is told so elsewhere): the next
		// silence is counted from that frame, and a frame that comes
		// before the scheduled look keeps the peer.
		heard := time.Now()
		r.sys.Root.Send(r.child, func(s *session) { s.silent, s.stats.lastSeen = false, heard })
		time.Sleep(2 * time.Second)
		r.tick(stale) // look scheduled for heard+2.5 s
		time.Sleep(400 * time.Millisecond)
		heard = time.Now()
		r.sys.Root.Send(r.child, func(s *session) { s.stats.lastSeen = heard })
		time.Sleep(200 * time.Millisecond) // past the scheduled look
		synctest.Wait()
		select {
		case at := <-r.silent:
			t.Fatalf("silent at %v although heard %v before", at.Sub(start), at.Sub(heard))
		default:
		}
		if peek() {
			t.Fatal("a look made by the timer scheduled another")
		}
		time.Sleep(1400 * time.Millisecond)
		r.tick(stale) // quiet 1.4 s: after the next tick
		time.Sleep(time.Second)
		r.tick(stale) // quiet 2.4 s: due in 0.1 s
		at = <-r.silent
		if got := at.Sub(heard); got < stale || got > stale+10*time.Millisecond {
			t.Fatalf("silent %v after the frame, want %v", got, stale)
		}
	})
}
