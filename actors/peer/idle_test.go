package peer

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"peerdns/internal/testutil"
	"peerdns/messages"
	"peerdns/transport"
)

// A ping that asks for no pong gets none, one that does gets its pong;
// a node's own pings ask for a pong only now and then (the first of a
// session, then every pongEvery-th), since each end's pings already tell
// the other it is alive.
func TestPongsOnlyWhenAsked(t *testing.T) {
	mem := transport.NewMemNetwork()
	a := newTestNode(t, "A", nodeOpts{mem: mem})
	e := newTestNode(t, "E", nodeOpts{mem: mem, join: a.invite(0)})
	waitMesh(t, 15*time.Second, a, e)
	eID := e.id
	net := ask[*messages.GetNetworkReply](t, a.sys, a.ledger, &messages.GetNetwork{})
	e.stop()
	testutil.Eventually(t, 10*time.Second, func() error {
		if len(a.peerIDs()) != 0 {
			return errors.New("E still connected")
		}
		return nil
	})

	// E again, as a raw connection that speaks the protocol by hand.
	ep := mem.Listen(eID, nil)
	t.Cleanup(func() { ep.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	conn, err := ep.Dial(ctx, a.addr, a.id.ID())
	cancel()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close("test over") })
	frames := make(chan *messages.Envelope, 256)
	go func() {
		defer close(frames)
		for {
			m, err := conn.Recv()
			if err != nil {
				return
			}
			frames <- m
		}
	}()
	conn.Send(&messages.Envelope{Kind: messages.KindHello, Hello: &messages.Hello{ID: eID.ID(), Network: net.Key, Root: net.Root}})
	conn.Send(&messages.Envelope{Kind: messages.KindAccept, Accept: &messages.Accept{}})
	conn.Send(&messages.Envelope{Kind: messages.KindPing, Ping: &messages.Ping{SentUnixNano: 1, NoPong: true}})
	conn.Send(&messages.Envelope{Kind: messages.KindPing, Ping: &messages.Ping{SentUnixNano: 2}})

	var pings []*messages.Ping
	gotPong := false
	deadline := time.After(10 * time.Second)
	for !gotPong || len(pings) < 2 {
		select {
		case m, ok := <-frames:
			if !ok {
				t.Fatalf("A hung up (pings %d, pong %v)", len(pings), gotPong)
			}
			switch m.Kind {
			case messages.KindPong:
				if m.Ping.SentUnixNano == 1 {
					t.Fatal("A answered a ping that asked for no pong")
				}
				if m.Ping.SentUnixNano == 2 {
					gotPong = true
				}
			case messages.KindPing:
				pings = append(pings, m.Ping)
			}
		case <-deadline:
			t.Fatalf("after 10 s: %d pings from A, pong to ours %v", len(pings), gotPong)
		}
	}
	if pings[0].NoPong || !pings[1].NoPong {
		t.Fatalf("A's first two pings ask for no pong: %v, %v; want false, true", pings[0].NoPong, pings[1].NoPong)
	}
}

// Idle neighbours whose vectors match send digests only every
// digestRefresh sync intervals, not every interval; a change still goes
// out at the next interval (the claim below reaches the other node).
func TestIdleDigestsThinOut(t *testing.T) {
	nodes := overlayNet(t, 2, 4)
	a, b := nodes[0], nodes[1]
	waitMesh(t, 10*time.Second, a, b)
	a.addDomain("thin.p2p", hash('c'))
	waitConverged(t, 10*time.Second, a, b)
	// Settled: the first equal digest each way has been seen.
	testutil.Eventually(t, 10*time.Second, func() error {
		if o := diag(t, a).Summary.Overlay; o.DigestsEqual < 2 {
			return fmt.Errorf("digests matched %d times", o.DigestsEqual)
		}
		return nil
	})
	start, t0 := diag(t, a).Summary.Overlay.DigestsEqual, time.Now()
	window := 4 * time.Second
	// Not a wait for a condition: digests are counted over a window.
	<-time.After(window)
	got := diag(t, a).Summary.Overlay.DigestsEqual - start
	// The harness's sync interval is 200 ms: one digest per interval
	// would be ~20 in the window; thinned, ~5. A loaded machine runs
	// fewer ticks, never more.
	if limit := int64(time.Since(t0) / (2 * 200 * time.Millisecond)); got > limit {
		t.Fatalf("A got %d equal digests from its idle neighbour in %v, want at most %d", got, time.Since(t0).Round(time.Millisecond), limit)
	}
	b.addDomain("after.p2p", hash('e'))
	waitConverged(t, 10*time.Second, a, b)
}
