package transport

import (
	"errors"
	"testing"
	"time"

	"peerdns/internal/testutil"
)

// TestReplacedByPeer: a connection closed with ReasonReplaced reads as
// replaced on the other end (its Recv error and its Err), over QUIC and
// in memory; not on the end that closed it, and not for another reason.
func TestReplacedByPeer(t *testing.T) {
	pairs := map[string]func(t *testing.T) (closer, other Conn){
		"quic": func(t *testing.T) (Conn, Conn) {
			a, _ := newTestEndpoint(t)
			b, _ := newTestEndpoint(t)
			in, out := connect(t, a, b)
			return out, in
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
				if !errors.Is(err, ErrClosed) && name == "mem" {
					t.Errorf("a memory link's close error %v is not ErrClosed", err)
				}
			})
		}
	}
}
