package peer

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"peerdns/internal/testutil"
	"peerdns/messages"
	"peerdns/transport"
)

// onTCP is a connection its endpoint made over TCP (a stream path).
type onTCP struct{ transport.Conn }

func (onTCP) Path() string { return transport.PathTCP }
func (onTCP) Via() string  { return "" }

// closingQUIC dials its "QUIC" connections in memory and hands them over
// closed, as a QUIC connection lost between its handshake and the
// supervisor's admission is.
type closingQUIC struct {
	*transport.MemEndpoint
	dials atomic.Int64
}

func (e *closingQUIC) DialQUIC(ctx context.Context, addr, peerID string) (transport.Conn, error) {
	e.dials.Add(1)
	c, err := e.Dial(ctx, addr, peerID)
	if err == nil {
		_ = c.Close("lost")
	}
	return c, err
}

// A QUIC retry whose connection came up but was refused at admission
// (closed already by then) failed like one that never connected: the
// next retry comes after the gap. The retry once stayed in flight for
// good, so that TCP session was never retried over QUIC again.
func TestQUICRetryRefusedAtAdmissionRetriedAgain(t *testing.T) {
	r := newSessionsRig(t)
	peer := newIdentities(t, 1)[0]
	mem := transport.NewMemNetwork()
	ep := &closingQUIC{MemEndpoint: mem.Listen(r.a.d.Identity, r.a.d.Log)}
	peerEP := mem.Listen(peer, r.a.d.Log)
	t.Cleanup(func() { ep.Close(); peerEP.Close() })
	tcp, err := ep.Dial(t.Context(), peerEP.Addr().String(), peer.ID())
	if err != nil {
		t.Fatal(err)
	}
	// The supervisor's messages from the retry's goroutine reach the
	// functions they would in Receive.
	fwd := r.sys.Root.Spawn(actor.PropsFromFunc(func(c actor.Context) {
		switch m := c.Message().(type) {
		case *newConn:
			r.sys.Root.Send(r.pid, func(c actor.Context) { r.a.onConn(c, m) })
		case *quicRetryDone:
			r.sys.Root.Send(r.pid, func(actor.Context) { r.a.onQuicRetryDone(m) })
		}
	}))
	stub := r.sys.Root.Spawn(actor.PropsFromFunc(func(actor.Context) {}))
	r.run(func(actor.Context) {
		a := r.a
		a.d.Endpoint, a.pid, a.ctx, a.netKnown = ep, fwd, t.Context(), true
		a.quicRetries = map[string]*quicRetry{}
		a.sessions[peer.ID()] = &sessionEntry{up: true, pid: stub, conn: onTCP{tcp}, upAt: time.Now().Add(-time.Hour),
			hello: &messages.Hello{ID: peer.ID(), Addrs: []string{peerEP.Addr().String()}}}
		a.quicRetryTick(time.Now())
	})
	inFlight := func() (in bool) {
		r.run(func(actor.Context) { in = r.a.quicRetries[peer.ID()].inFlight })
		return in
	}
	testutil.Eventually(t, 5*time.Second, func() error {
		if n := ep.dials.Load(); n != 1 || inFlight() {
			return fmt.Errorf("%d QUIC dials, retry in flight %v: want the first refused and over", n, inFlight())
		}
		return nil
	})
	r.run(func(actor.Context) {
		if e := r.a.sessions[peer.ID()]; e == nil || e.pid != stub {
			t.Error("the closed QUIC connection replaced the TCP session")
		}
		r.a.quicRetryTick(time.Now().Add(quicRetryMax + time.Minute))
	})
	testutil.Eventually(t, 5*time.Second, func() error {
		if n := ep.dials.Load(); n != 2 {
			return fmt.Errorf("%d QUIC dials, want a second once the gap passed", n)
		}
		return nil
	})
}
