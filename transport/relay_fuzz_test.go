package transport

import (
	"io"
	"testing"
	"time"
)

// idConn is a Conn that only knows its peer id: all ServeRelayStream asks
// of the connection a request came on.
type idConn struct {
	Conn
	id string
}

func (c idConn) PeerID() string { return c.id }

// FuzzServeRelayStream feeds arbitrary bytes to the relay stream handler
// as a peer would: it must answer or close, never panic or hang, and
// never hand a connection to Accept (no bytes can pass TLS here).
func FuzzServeRelayStream(f *testing.F) {
	f.Add([]byte("C" + string(make([]byte, 32))))
	f.Add([]byte("I" + string(make([]byte, 32)) + "\x16\x03\x01\x00\x05hello"))
	f.Add([]byte("X"))
	f.Add([]byte{})
	e := newMulti(f, Options{})
	e.SetRelay(func(string) bool { return true }, func(string) (Conn, bool) { return nil, false })
	peer := idConn{id: "aa"}
	f.Fuzz(func(t *testing.T, in []byte) {
		a, b := newMemStreamPair()
		done := make(chan struct{})
		go func() {
			defer close(done)
			e.ServeRelayStream(peer, b)
		}()
		go func() {
			_ = a.SetWriteDeadline(time.Now().Add(2 * time.Second))
			_, _ = a.Write(in)
			_ = a.CloseWrite()
		}()
		_ = a.SetReadDeadline(time.Now().Add(15 * time.Second))
		_, _ = io.Copy(io.Discard, a)
		a.Abort()
		select {
		case <-done:
		case <-time.After(15 * time.Second):
			t.Fatal("relay handler did not end")
		}
		if st := e.Stats(); st.RelayedIn != 0 {
			t.Fatalf("a relayed connection was accepted from garbage: %+v", st)
		}
	})
}
