package transport

import (
	"errors"
	"testing"
	"time"

	"peerdns/internal/testutil"
)

// TestReplacedByPeer: a connection closed with ReasonReplaced reads as
// replaced on the other end (its Recv error and its Err), over QUIC and
// in memory, over TCP and through a relay; not on the end that closed
// it, and not for another reason.
func TestReplacedByPeer(t *testing.T) {
	pairs := map[string]func(t *testing.T) (closer, other Conn){
		"quic": func(t *testing.T) (Conn, Conn) {
			a, _ := newTestEndpoint(t)
			b, _ := newTestEndpoint(t)
			in, out := connect(t, a, b)
			return out, in
		},
		"tcp": func(t *testing.T) (Conn, Conn) {
			a := newMulti(t, Options{})
			b := newMulti(t, Options{})
			out, in := tcpPair(t, b, a)
			return out, in
		},
		"relayed": func(t *testing.T) (Conn, Conn) {
			return newRelayLab(t, RelayConfig{Rate: -1}).pair(t)
		},
		"mem": func(t *testing.T) (Conn, Conn) {
			a, b, _ := newMemPair(t)
			out, err := b.Dial(ctxT(t), a.Addr().String(), a.ID())
			if err != nil {
				t.Fatal(err)
			}
			in, err := a.Accept(ctxT(t))
			if err != nil {
				t.Fatal(err)
			}
			return out, in
		},
	}
	for name, pair := range pairs {
		for _, reason := range []string{ReasonReplaced, "session stopped"} {
			t.Run(name+"/"+reason, func(t *testing.T) {
				closer, other := pair(t)
				if err := closer.Close(reason); err != nil {
					t.Fatal(err)
				}
				_, recvErr := other.Recv()
				if recvErr == nil {
					t.Fatal("Recv on a closed connection returned a frame")
				}
				var err error
				testutil.Eventually(t, 5*time.Second, func() error {
					if err = other.Err(); err == nil {
						return errors.New("the other end is not closed yet")
					}
					return nil
				})
				want := reason == ReasonReplaced
				if got := ReplacedByPeer(recvErr); got != want {
					t.Errorf("other end's Recv error %v: replaced by peer %v, want %v", recvErr, got, want)
				}
				if got := ReplacedByPeer(err); got != want {
					t.Errorf("other end's Err %v: replaced by peer %v, want %v", err, got, want)
				}
				if ReplacedByPeer(closer.Err()) {
					t.Errorf("the end that closed reads its own close as the peer's: %v", closer.Err())
				}
				if sc, ok := closer.(*streamConn); ok {
					// The peer closed the byte stream on reading the
					// notice: the closer did not wait for its bound.
					testutil.Eventually(t, replacedLinger/2, func() error {
						if !sc.sess.IsClosed() {
							return errors.New("the closer's byte stream is still open")
						}
						return nil
					})
				}
				if !errors.Is(err, ErrClosed) && name == "mem" {
					t.Errorf("a memory link's close error %v is not ErrClosed", err)
				}
			})
		}
	}
}

// TestReplacedLingerBounded: a stream path closed as replaced whose peer
// never reads the notice closes its byte stream at replacedLinger, and
// the peer then sees the end.
func TestReplacedLingerBounded(t *testing.T) {
	a := newMulti(t, Options{})
	b := newMulti(t, Options{})
	closer, other := tcpPair(t, b, a)
	start := time.Now()
	if err := closer.Close(ReasonReplaced); err != nil {
		t.Fatal(err)
	}
	select {
	case <-closer.Done():
	default:
		t.Fatal("a connection closed as replaced is not closed for its own side at once")
	}
	sc := closer.(*streamConn)
	testutil.Eventually(t, 3*replacedLinger, func() error {
		if !sc.sess.IsClosed() {
			return errors.New("the closer's byte stream is still open")
		}
		return nil
	})
	if waited := time.Since(start); waited < replacedLinger/2 {
		t.Errorf("the closer's byte stream closed after %v with the peer not reading; want about %v", waited, replacedLinger)
	}
	testutil.Eventually(t, 5*time.Second, func() error {
		if other.Err() == nil {
			return errors.New("the other end is not closed yet")
		}
		return nil
	})
}
