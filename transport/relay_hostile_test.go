package transport

import (
	"bytes"
	"encoding/hex"
	"io"
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
