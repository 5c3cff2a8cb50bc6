package peer

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"peerdns/internal/testutil"
	"peerdns/transport"
)

// ekm names a connection the same way on both of its ends.
func ekm(t *testing.T, c transport.Conn) []byte {
	t.Helper()
	b, err := c.ExportKeyingMaterial("peerdns test duplicate", nil, 16)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestDuplicateSessionsResolveAlike: two connections between the same
// two nodes reach each end in opposite orders, as when both dial at
// once (each sees its own dial complete first) or when one dials twice
// and its dials return in another order than the peer accepted them.
// Both ends must keep the same one of the two, and it must stay up: an
// end that kept another would close the one the peer kept, and both
// sessions would die. Many rounds, each order at random.
func TestDuplicateSessionsResolveAlike(t *testing.T) {
	nodes := memMesh(t, "A", "B")
	lo, hi := nodes[0], nodes[1]
	if hi.id.ID() < lo.id.ID() {
		lo, hi = hi, lo
	}
	mem := lo.opts.mem
	// Second endpoints with the nodes' keys dial the connections this
	// test hands the supervisors itself, in the order it chooses; the
	// peer's accept loop takes the other end as it comes.
	loEP, hiEP := mem.Listen(lo.id, nil), mem.Listen(hi.id, nil)
	t.Cleanup(func() { loEP.Close(); hiEP.Close() })
	dial := func(from *transport.MemEndpoint, to *testNode) transport.Conn {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		c, err := from.Dial(ctx, to.addr, to.id.ID())
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	hand := func(n *testNode, c transport.Conn) {
		n.sys.Root.Send(n.peers, &newConn{conn: c, addr: c.RemoteAddr().String()})
	}
	rng := rand.New(rand.NewPCG(7, 11))
	tests := []struct {
		name string
		// make dials the round's connections and hands our ends of them
		// to the supervisors; it returns them all.
		make func() []transport.Conn
	}{
		{"both dial at once", func() []transport.Conn {
			x, y := dial(loEP, hi), dial(hiEP, lo)
			if rng.IntN(2) == 0 {
				hand(lo, x)
				hand(hi, y)
			} else {
				hand(hi, y)
				hand(lo, x)
			}
			return []transport.Conn{x, y}
		}},
		{"the lower id dials twice", func() []transport.Conn {
			x1, x2 := dial(loEP, hi), dial(loEP, hi) // hi accepts x1 first
			if rng.IntN(2) == 0 {
				x1, x2 = x2, x1
			}
			hand(lo, x2)
			hand(lo, x1)
			return []transport.Conn{x1, x2}
		}},
		{"the higher id dials twice", func() []transport.Conn {
			y1, y2 := dial(hiEP, lo), dial(hiEP, lo)
			if rng.IntN(2) == 0 {
				y1, y2 = y2, y1
			}
			hand(hi, y2)
			hand(hi, y1)
			return []transport.Conn{y1, y2}
		}},
	}
	held := func() (transport.Conn, error) {
		cl, ok1 := lo.mesh.Conn(hi.id.ID())
		ch, ok2 := hi.mesh.Conn(lo.id.ID())
		if !ok1 || !ok2 {
			return nil, errors.New("no established session on both ends")
		}
		if cl.Err() != nil || ch.Err() != nil || !bytes.Equal(ekm(t, cl), ekm(t, ch)) {
			return nil, errors.New("the ends hold different connections")
		}
		return cl, nil
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for round := range 10 {
				var prev transport.Conn
				testutil.Eventually(t, 5*time.Second, func() (err error) {
					prev, err = held()
					return err
				})
				ours := tt.make()
				// Every connection of the round is either closed or the
				// one both ends hold, which is one of the round's or the
				// one held before it: had the ends kept different ones,
				// both would have died, and the redial after would be
				// another.
				testutil.Eventually(t, 5*time.Second, func() error {
					c, err := held()
					if err != nil {
						return fmt.Errorf("round %d: %w", round, err)
					}
					kept := ekm(t, c)
					known := bytes.Equal(kept, ekm(t, prev))
					for _, o := range ours {
						same := bytes.Equal(kept, ekm(t, o))
						known = known || same
						if !same && o.Err() == nil {
							return fmt.Errorf("round %d: a duplicate is still open", round)
						}
					}
					if !known {
						return fmt.Errorf("round %d: the ends hold a connection dialed after the round's: theirs died", round)
					}
					return nil
				})
			}
		})
	}
}

// TestReplacedConnectionIsNoFailure: an end that replaces a connection
// with a duplicate closes the old one as replaced, and its peer may see
// that close before the duplicate reaches its own supervisor (its accept
// queue, or its dial's return, hold it a moment). The peer must take it
// for what it is: no suspicion of a live node, and no redial of its own
// while the kept connection comes, which would replace that one in turn.
func TestReplacedConnectionIsNoFailure(t *testing.T) {
	lo, hi, x := hiDialedPair(t)
	// lo's second endpoint dials hi: hi's accept loop takes its end at
	// once, while lo's end waits in the test's hands. hi keeps it (the
	// lower id's dial stays) and closes x as replaced.
	loEP := lo.opts.mem.Listen(lo.id, nil)
	t.Cleanup(func() { loEP.Close() })
	sent := func(n *testNode) int64 { return diag(t, n).Summary.Overlay.SuspicionsSent }
	loSent, hiSent, dialed := sent(lo), sent(hi), diag(t, lo).Summary.SuccessfulDials
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	y, err := loEP.Dial(ctx, hi.addr, hi.id.ID())
	cancel()
	if err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 5*time.Second, func() error {
		if y.Err() != nil {
			return fmt.Errorf("hi closed the duplicate: %w", y.Err())
		}
		if x.Err() == nil {
			return errors.New("hi has not replaced the old connection")
		}
		return nil
	})
	if !transport.ReplacedByPeer(x.Err()) {
		t.Fatalf("lo's end of the replaced connection says %v, want replaced by the peer", x.Err())
	}
	testutil.Eventually(t, 5*time.Second, func() error {
		if _, ok := lo.mesh.Conn(hi.id.ID()); ok {
			return errors.New("lo still holds the replaced session")
		}
		return nil
	})
	// The first answer comes once lo handled the session's end; the
	// second once it handled what that queued (a suspicion's onEnded).
	diag(t, lo)
	if got := sent(lo); got != loSent {
		t.Fatalf("lo signed %d suspicions when hi replaced their connection, want none", got-loSent)
	}
	lo.sys.Root.Send(lo.peers, &newConn{conn: y, addr: y.RemoteAddr().String()})
	testutil.Eventually(t, 5*time.Second, func() error {
		cl, ok1 := lo.mesh.Conn(hi.id.ID())
		ch, ok2 := hi.mesh.Conn(lo.id.ID())
		if !ok1 || !ok2 {
			return errors.New("no established session on both ends")
		}
		if !bytes.Equal(ekm(t, cl), ekm(t, y)) || !bytes.Equal(ekm(t, ch), ekm(t, y)) {
			return errors.New("the ends do not both hold the duplicate hi kept")
		}
		return nil
	})
	if got := diag(t, lo).Summary.SuccessfulDials; got != dialed+1 {
		t.Errorf("lo took %d dialed connections, want 1 (the duplicate): it redialed hi", got-dialed)
	}
	if got, got2 := sent(lo), sent(hi); got != loSent || got2 != hiSent {
		t.Errorf("suspicions signed: lo %d, hi %d; want none", got-loSent, got2-hiSent)
	}
}

// hiDialedPair meshes two nodes until the connection they settle on was
// dialed by the higher id (the joiner dials, and the lower id may dial
// back and replace it), and returns the lower, the higher and that
// connection as the lower holds it.
func hiDialedPair(t *testing.T) (lo, hi *testNode, x transport.Conn) {
	for range 20 {
		nodes := memMesh(t, "A", "B")
		lo, hi = nodes[0], nodes[1]
		if hi.id.ID() < lo.id.ID() {
			lo, hi = hi, lo
		}
		testutil.Eventually(t, 10*time.Second, func() error {
			cl, ok1 := lo.mesh.Conn(hi.id.ID())
			ch, ok2 := hi.mesh.Conn(lo.id.ID())
			if !ok1 || !ok2 || cl.Err() != nil || !bytes.Equal(ekm(t, cl), ekm(t, ch)) {
				return errors.New("the ends do not hold one connection")
			}
			x = cl
			return nil
		})
		if !x.Outbound() {
			return lo, hi, x
		}
		hi.stop()
		lo.stop()
	}
	t.Fatal("20 pairs of nodes in a row settled on a connection the lower id dialed")
	return nil, nil, nil
}
