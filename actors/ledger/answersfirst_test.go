package ledger

import (
	"sync/atomic"
	"testing"
	"time"

	"peerdns/messages"
)

// clockGate is a ledger clock (Deps.Now) that, while held, gives out one
// reading per token: the test decides when the ledger may go on.
type clockGate struct {
	held     atomic.Bool
	waiting  chan struct{} // a reading is asked for
	tokens   chan struct{}
	released chan struct{}
}

func newClockGate() *clockGate {
	return &clockGate{waiting: make(chan struct{}), tokens: make(chan struct{}), released: make(chan struct{})}
}

func (g *clockGate) now() time.Time {
	if g.held.Load() {
		select {
		case g.waiting <- struct{}{}:
			select {
			case <-g.tokens:
			case <-g.released:
			}
		case <-g.released:
		}
	}
	return time.Now()
}

func (g *clockGate) release() {
	if g.held.CompareAndSwap(true, false) {
		close(g.released)
	}
}

// A ledger behind on peers' ops answers the health probe's question
// after the message in hand, not after the backlog queued before the
// question (internal/mailbox): the question is answered within a few
// readings of the clock, where the backlog alone takes two per message.
func TestHealthQuestionOvertakesPeerOps(t *testing.T) {
	g := newClockGate()
	l := newTestLedgerWith(t, t.TempDir(), func(d *Deps) { d.Now = g.now })
	defer g.release()
	ask[*messages.GetSidecarStatusReply](t, l, &messages.GetSidecarStatus{}) // loaded

	g.held.Store(true)
	l.sys.Root.Send(l.pid, &messages.ApplyOps{From: "peer", Sent: time.Now()})
	<-g.waiting // the ledger is inside that message: the rest queue
	const backlog = 50
	for range backlog {
		l.sys.Root.Send(l.pid, &messages.ApplyOps{From: "peer", Sent: time.Now()})
	}
	fut := l.sys.Root.RequestFuture(l.pid, &messages.GetSidecarStatus{}, time.Minute) // posted on return
	answered := make(chan error, 1)
	go func() {
		_, err := fut.Result()
		answered <- err
	}()
	readings := 1
	g.tokens <- struct{}{}
	for {
		select {
		case err := <-answered:
			if err != nil {
				t.Fatalf("health question: %v", err)
			}
			if readings > backlog {
				t.Fatalf("answered after %d clock readings: it waited for the %d ops messages queued before it", readings, backlog)
			}
			t.Logf("answered after %d clock readings, %d ops messages still queued at most", readings, backlog)
			return
		case <-g.waiting:
			readings++
			if readings > 4*backlog {
				t.Fatalf("no answer after %d clock readings", readings)
			}
			g.tokens <- struct{}{}
		}
	}
}
