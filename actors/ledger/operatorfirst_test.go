package ledger

import (
	"slices"
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

// backlog is how many peers' ops messages wait in the ledger's mailbox
// in the tests below.
const backlog = 100

// behindOnPeerOps starts a ledger whose clock is held inside one peers'
// ops message while n more queue behind it: the ledger's next clock
// reading waits on g.waiting for a token. The clock is let go at the
// test's end, before the ledger stops.
func behindOnPeerOps(t *testing.T, n int) (*testLedger, *clockGate) {
	t.Helper()
	g := newClockGate()
	l := newTestLedgerWith(t, t.TempDir(), func(d *Deps) { d.Now = g.now })
	t.Cleanup(g.release)
	ask[*messages.GetSidecarStatusReply](t, l, &messages.GetSidecarStatus{}) // loaded

	g.held.Store(true)
	l.sys.Root.Send(l.pid, &messages.ApplyOps{From: "peer", Sent: time.Now()})
	<-g.waiting // the ledger is inside a message: the rest queue
	for range n {
		l.sys.Root.Send(l.pid, &messages.ApplyOps{From: "peer", Sent: time.Now()})
	}
	return l, g
}

// handOut gives the held ledger its clock readings one at a time, at
// most limit in all, until seen is true of a value received on ch; with
// every reading handed out (the ledger stuck in its backlog) it waits up
// to 10 s more. It returns the readings handed out and whether seen
// became true.
func handOut[T any](g *clockGate, limit int, ch <-chan T, seen func(T) bool) (int, bool) {
	readings := 1
	g.tokens <- struct{}{}
	for readings < limit {
		select {
		case v := <-ch:
			if seen(v) {
				return readings, true
			}
		case <-g.waiting:
			readings++
			g.tokens <- struct{}{}
		}
	}
	deadline := time.After(10 * time.Second)
	for {
		select {
		case v := <-ch:
			if seen(v) {
				return readings, true
			}
		case <-deadline:
			return readings, false
		}
	}
}

// A ledger behind on peers' ops answers the health probe's question
// after the message in hand, not after the backlog queued before the
// question (internal/mailbox). The ledger gets half as many clock
// readings as the backlog has messages, each of which reads the clock
// at least once, so the question is answered only if it went first;
// handed out one at a time, and then no more until the answer comes.
func TestHealthQuestionOvertakesPeerOps(t *testing.T) {
	l, g := behindOnPeerOps(t, backlog)
	fut := l.sys.Root.RequestFuture(l.pid, &messages.GetSidecarStatus{}, time.Minute) // posted on return
	answered := make(chan error, 1)
	go func() {
		_, err := fut.Result()
		answered <- err
	}()
	readings, ok := handOut(g, backlog/2, answered, func(err error) bool {
		if err != nil {
			t.Fatalf("health question: %v", err)
		}
		return true
	})
	if !ok {
		t.Fatalf("no answer within %d clock readings: the question waits behind the %d ops messages queued before it", readings, backlog)
	}
	t.Logf("answered within %d clock readings, with at least %d ops messages still queued", readings, backlog-readings)
}

// An operator's claim sent while the ledger is behind on peers' ops is
// taken and committed (signed, stored, ready for the peers) before the
// backlog queued ahead of it: our op writing the claim is in the
// ledger's store while the ledger has had half as many clock readings as
// the backlog has messages. The store is looked at each time the ledger
// waits for a reading (it is then inside a message, its work so far on
// disk), so what is counted is the ledger's own progress, not how soon
// another goroutine gets to ask it.
func TestOperatorClaimOvertakesPeerOps(t *testing.T) {
	l, g := behindOnPeerOps(t, backlog)
	const name = "operator.p2p"
	key := messages.ClaimKey(name, l.id.ID())
	l.sys.Root.RequestFuture(l.pid, &messages.AddDomain{Domain: name, Hash: hashA}, time.Minute)

	for readings := 1; readings <= backlog/2; readings++ {
		g.tokens <- struct{}{}
		select {
		case <-g.waiting:
		case <-time.After(10 * time.Second):
			t.Fatalf("the ledger asked for no clock reading within 10 s after reading %d, with ops messages still queued", readings)
		}
		if l.holdsOwnWrite(t, key) {
			t.Logf("claim committed within %d clock readings, with at least %d ops messages still queued", readings, backlog-readings)
			return
		}
	}
	t.Fatalf("claim not committed within %d clock readings: it waits behind the %d ops messages queued before it", backlog/2, backlog)
}

// holdsOwnWrite reports whether the ledger's store holds an op of this
// node's writer that writes key.
func (l *testLedger) holdsOwnWrite(t *testing.T, key string) bool {
	t.Helper()
	kvs, err := l.ldb.List(opPrefix + l.id.ID() + ":")
	if err != nil {
		t.Fatal(err)
	}
	for _, kv := range kvs {
		var op messages.Op
		if err := op.UnmarshalCBOR([]byte(kv.Value)); err != nil {
			t.Fatalf("op %s: %v", kv.Key, err)
		}
		if op.Key == key || slices.ContainsFunc(op.Batch, func(w messages.Write) bool { return w.Key == key }) {
			return true
		}
	}
	return false
}
