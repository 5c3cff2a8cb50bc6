package transport

import (
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"peerdns/internal/testutil"
	"peerdns/transport/identity"
)

// stalledConn is a byte stream whose reads stop once stall is called:
// an end that takes nothing more from the wire (its reads wait until
// the conn is closed).
type stalledConn struct {
	net.Conn
	once    sync.Once
	stopped chan struct{}
	closed  chan struct{}
	cOnce   sync.Once
}

func newStalledConn(c net.Conn) *stalledConn {
	return &stalledConn{Conn: c, stopped: make(chan struct{}), closed: make(chan struct{})}
}

func (c *stalledConn) stall() { c.once.Do(func() { close(c.stopped) }) }

func (c *stalledConn) Read(p []byte) (int, error) {
	select {
	case <-c.stopped:
		<-c.closed
		return 0, net.ErrClosed
	default:
	}
	return c.Conn.Read(p)
}

func (c *stalledConn) Close() error {
	c.cOnce.Do(func() { close(c.closed) })
	return c.Conn.Close()
}

// goroutineWith reports whether some goroutine's stack holds every one
// of frames.
func goroutineWith(frames ...string) bool {
	buf := make([]byte, 1<<20)
	buf = buf[:runtime.Stack(buf, true)]
	for _, g := range strings.Split(string(buf), "\n\n") {
		all := true
		for _, f := range frames {
			all = all && strings.Contains(g, f)
		}
		if all {
			return true
		}
	}
	return false
}

// A requester that stops reading its relayed stream must not pin the
// relay: once the target's end is gone, the relay tears the link down
// and gives its budget back, even though its copy towards the requester
// is waiting for room that will never come.
func TestRelayFreesLinkOfRequesterThatNeverReads(t *testing.T) {
	checkLeaks(t)
	rid, err := identity.Generate()
	if err != nil {
		t.Fatal(err)
	}
	lb := &testutil.LogBuffer{}
	r, err := ListenMulti(Config{Identity: rid, ListenAddr: "127.0.0.1:0", WriteTimeout: 2 * time.Second,
		Logger: slog.New(slog.NewTextHandler(lb, nil))}, Options{Relay: RelayConfig{Rate: -1}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	b := newMulti(t, Options{})
	c := newMulti(t, Options{})
	br, err := b.q.Dial(ctxT(t), r.Addr().String(), r.ID())
	if err != nil {
		t.Fatal(err)
	}
	rb, err := r.Accept(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	cr, err := c.q.Dial(ctxT(t), r.Addr().String(), r.ID())
	if err != nil {
		t.Fatal(err)
	}
	rc, err := r.Accept(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	conns := map[string]Conn{b.ID(): rb, c.ID(): rc}
	r.SetRelay(func(string) bool { return true }, func(id string) (Conn, bool) { cn, ok := conns[id]; return cn, ok })
	serveKinds(r, rb)
	serveKinds(r, rc)
	serveKinds(c, cr)

	// b asks for c by hand and runs its end of the stream path over a
	// byte stream whose reads it can stop (no keep-alive of its own, so
	// nothing of b's ends the session).
	s, err := br.OpenStream(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	key, _ := hex.DecodeString(c.ID())
	if _, err := s.Write(append([]byte{StreamRelay, 'C'}, key...)); err != nil {
		t.Fatal(err)
	}
	var st [1]byte
	if _, err := io.ReadFull(s, st[:]); err != nil || st[0] != RelayOK {
		t.Fatalf("relay answered %v, %v", st, err)
	}
	raw := newStalledConn(newBatchConn(&streamNetConn{Stream: s, local: relayAddr{r.ID(), b.ID()}, remote: relayAddr{r.ID(), c.ID()}}))
	cfg := b.cfg
	cfg.KeepAlive = time.Hour
	out, err := newStreamConn(ctxT(t), raw, true, b.cert, b.ID(), c.ID(), &cfg, PathRelayed, r.ID())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { out.Close("test over") })
	in, err := c.Accept(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	raw.stall()

	// c sends more than b's stream window and the relay's buffer hold.
	for range 8 {
		cs, err := in.OpenStream(ctxT(t))
		if err != nil {
			t.Fatal(err)
		}
		go func() {
			_, _ = cs.Write(make([]byte, 256<<10))
			cs.Abort()
		}()
	}
	testutil.Eventually(t, 10*time.Second, func() error {
		if !goroutineWith("(*relayState).copy", "(*batchConn).Write") {
			return errors.New("the relay's copy towards b is not waiting for room yet")
		}
		return nil
	})
	in.Close("gone")
	testutil.Eventually(t, 10*time.Second, func() error {
		if n := r.Stats().RelayActive; n != 0 {
			return fmt.Errorf("relay still holds %d link(s) for a target that is gone", n)
		}
		return nil
	})
}

// A peer on a stream path whose datagrams nobody reads (its session is
// not up yet, or its reader is behind) can make us hold no more of its datagrams than a QUIC
// connection would hold of its unread data (its initial connection
// window, 1 MiB): keys cost nothing, and every pending place would
// otherwise hold 512 datagrams of up to 64 KiB, 32 MiB each.
func TestStreamPathDatagramQueueBounded(t *testing.T) {
	a, b := newMulti(t, Options{}), newMulti(t, Options{})
	out, in := tcpPair(t, b, a)
	sc := in.(*streamConn)
	// b writes the datagram frames itself, then ends its datagram
	// stream, so a's reader ends once it has taken them all.
	dg := out.(*streamConn).dgram
	frame := make([]byte, 2+maxStreamDatagram)
	frame[0], frame[1] = 0xff, 0xff
	const sent = 600
	for range sent {
		if _, err := dg.Write(frame); err != nil {
			t.Fatal(err)
		}
	}
	_ = dg.Close()
	testutil.Eventually(t, 20*time.Second, func() error {
		if n := strings.Count(stacks(), "(*streamConn).readDatagrams"); n > 1 {
			return fmt.Errorf("%d datagram readers still reading", n)
		}
		return nil
	})
	if held := len(sc.dgIn) * maxStreamDatagram; held > 1<<20 {
		t.Fatalf("a peer's %d datagrams left %d of them (%d bytes) queued", sent, len(sc.dgIn), held)
	}
}

func stacks() string {
	buf := make([]byte, 1<<20)
	return string(buf[:runtime.Stack(buf, true)])
}
