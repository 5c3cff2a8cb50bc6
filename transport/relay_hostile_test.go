package transport

import (
	"bytes"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"peerdns/internal/testutil"
	"peerdns/transport/identity"
	"strings"
	"sync"
	"testing"
	"time"
)

// A relayed connection is TLS between its two ends, so a relay that
// changes bytes it relays cannot make an end accept them: the first
// record it touched fails, and the connection closes on both ends with
// only bytes that were sent intact delivered.
func TestTamperingRelayFailsClosed(t *testing.T) {
	l := newRelayLab(t, RelayConfig{Rate: -1, TamperAfter: 20_000})
	out, in := l.pair(t)
	checkFailsClosed(t, in, out)
}

// hostileRelay plays the relay's part of the protocol for the relay
// side of rb (the requester's connection) and rc (the target's), and
// copies the requester's bytes to the target through mangle, which
// returns what to send in place of a chunk (the target's bytes go back
// untouched).
func hostileRelay(t *testing.T, rb, rc Conn, requester string, mangle func(chunk []byte, copied int) [][]byte) {
	go func() {
		s, err := rb.AcceptStream(ctxT(t))
		if err != nil {
			return
		}
		var hdr [2 + 32]byte
		if _, err := io.ReadFull(s, hdr[:]); err != nil || hdr[0] != StreamRelay || hdr[1] != 'C' {
			s.Abort()
			return
		}
		ts, err := rc.OpenStream(ctxT(t))
		if err != nil {
			s.Abort()
			return
		}
		key, _ := hex.DecodeString(requester)
		var st [1]byte
		if _, err := ts.Write(append([]byte{StreamRelay, 'I'}, key...)); err != nil {
			s.Abort()
			return
		}
		if _, err := io.ReadFull(ts, st[:]); err != nil {
			s.Abort()
			return
		}
		if _, err := s.Write(st[:]); err != nil {
			ts.Abort()
			return
		}
		var wg sync.WaitGroup
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, _ = io.Copy(s, ts)
			_ = s.CloseWrite()
		}()
		buf := make([]byte, 4096)
		copied := 0
		for {
			n, err := s.Read(buf)
			if n > 0 {
				for _, c := range mangle(buf[:n], copied) {
					if _, werr := ts.Write(c); werr != nil {
						break
					}
				}
				copied += n
			}
			if err != nil {
				break
			}
		}
		_ = ts.CloseWrite()
		wg.Wait()
		s.Abort()
		ts.Abort()
	}()
}

// A relay that replays bytes (a chunk it already passed on, sent again
// later) cannot make an end take them twice: TLS numbers its records,
// the replayed one fails, and the connection closes on both ends.
func TestReplayingRelayFailsClosed(t *testing.T) {
	r := newMulti(t, Options{})
	b := newMulti(t, Options{})
	c := newMulti(t, Options{})
	br, rb := quicPair(t, b, r)
	cr, rc := quicPair(t, c, r)
	serveKinds(c, cr)
	var mu sync.Mutex
	var seen [][]byte
	replayed := false
	hostileRelay(t, rb, rc, b.ID(), func(chunk []byte, copied int) [][]byte {
		mu.Lock()
		defer mu.Unlock()
		cp := bytes.Clone(chunk)
		seen = append(seen, cp)
		if copied > 20_000 && !replayed {
			replayed = true
			// A chunk from after the handshake, sent again after this one.
			return [][]byte{cp, seen[len(seen)-2]}
		}
		return [][]byte{cp}
	})
	out, err := b.DialRelay(ctxT(t), br, c.ID())
	if err != nil {
		t.Fatal(err)
	}
	in, err := c.Accept(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	checkFailsClosed(t, in, out)
	mu.Lock()
	defer mu.Unlock()
	if !replayed {
		t.Fatal("the relay never replayed a chunk")
	}
}

// checkFailsClosed sends 100 KB from out to in over a path that changes
// bytes after the first 20,000: in must not read it all, must read
// nothing but a prefix of it, and both connections must end.
func checkFailsClosed(t *testing.T, in, out Conn) {
	t.Helper()
	payload := bytes.Repeat([]byte("0123456789"), 10_000)
	got, _ := streamOnce(t, in, out, payload) // the write may fail: the path is tampered
	select {
	case b := <-got:
		if len(b) >= len(payload) || !bytes.HasPrefix(payload, b) {
			t.Fatalf("tampered path delivered %d bytes (prefix of what was sent: %v)", len(b), bytes.HasPrefix(payload, b))
		}
	case <-time.After(20 * time.Second):
		t.Fatal("reader never ended")
	}
	for _, c := range []Conn{in, out} {
		select {
		case <-c.Done():
		case <-time.After(20 * time.Second):
			t.Fatal("tampered connection still open")
		}
	}
}

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

func newStalledConn(c net.Conn) *stalledConn {
	return &stalledConn{Conn: c, stopped: make(chan struct{}), closed: make(chan struct{})}
}

// goroutineWith reports whether some goroutine's stack holds every one
// of frames.
func goroutineWith(frames ...string) bool {
	for _, g := range strings.Split(stacks(), "\n\n") {
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
	r, err := ListenMulti(Config{Identity: rid, ListenAddr: "127.0.0.1:0", WriteTimeout: 4 * time.Second,
		Logger: slog.New(slog.NewTextHandler(lb, nil))}, Options{Relay: RelayConfig{Rate: -1}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	b := newMulti(t, Options{})
	c := newMulti(t, Options{})
	br, rb := quicPair(t, b, r)
	cr, rc := quicPair(t, c, r)
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
	// The streams are opened before b stops reading: from then on, what
	// c sends waits for b, and the relay gives up on the link after its
	// WriteTimeout, with c's session.
	streams := make([]Stream, 8)
	for i := range streams {
		if streams[i], err = in.OpenStream(ctxT(t)); err != nil {
			t.Fatal(err)
		}
	}
	raw.stall()

	// c sends more than b's stream window and the relay's buffer hold.
	for _, cs := range streams {
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
