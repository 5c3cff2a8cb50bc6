package transport

import (
	"errors"
	"io"
	"os"
	"testing"
	"time"
)

// streamPair opens a stream on a fresh connection of the named transport
// and returns the opener's and the acceptor's ends. The opener writes
// first byte "!" so a QUIC peer sees the stream; the acceptor reads it.
func streamPair(t *testing.T, kind string) (opener, acceptor Stream) {
	t.Helper()
	opener, acceptor, _, _ = streamPairOn(t, kind)
	return opener, acceptor
}

// streamPairOn is streamPair, with the opener's and the acceptor's
// connections.
func streamPairOn(t *testing.T, kind string) (opener, acceptor Stream, out, in Conn) {
	t.Helper()
	switch kind {
	case "quic":
		a, _ := newTestEndpoint(t)
		b, _ := newTestEndpoint(t)
		in, out = connect(t, a, b)
	case "tcp": // TLS and yamux over TCP: the stream path
		a, b := newMulti(t, Options{}), newMulti(t, Options{})
		var err error
		if out, err = b.DialTCP(ctxT(t), a.Addr().String(), a.ID()); err != nil {
			t.Fatal(err)
		}
		if in, err = a.Accept(ctxT(t)); err != nil {
			t.Fatal(err)
		}
	case "mem":
		a, b, _ := newMemPair(t)
		var err error
		if out, err = b.Dial(ctxT(t), a.Addr().String(), a.ID()); err != nil {
			t.Fatal(err)
		}
		if in, err = a.Accept(ctxT(t)); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() { out.Close("done"); in.Close("done") })
	s, err := out.OpenStream(ctxT(t))
	if err != nil {
		t.Fatalf("OpenStream: %v", err)
	}
	wrote := make(chan error, 1)
	go func() { _, err := s.Write([]byte("!")); wrote <- err }() // mem pipes are synchronous
	r, err := in.AcceptStream(ctxT(t))
	if err != nil {
		t.Fatalf("AcceptStream: %v", err)
	}
	var b [1]byte
	if _, err := io.ReadFull(r, b[:]); err != nil {
		t.Fatalf("first byte: %v", err)
	}
	if err := <-wrote; err != nil {
		t.Fatalf("first write: %v", err)
	}
	_ = s.SetDeadline(time.Now().Add(10 * time.Second))
	_ = r.SetDeadline(time.Now().Add(10 * time.Second))
	return s, r, out, in
}

var streamKinds = []string{"quic", "mem"}

// A FIN in one direction reaches the other side as io.EOF while the
// other direction keeps flowing, on both transports.
func TestStreamHalfClose(t *testing.T) {
	for _, kind := range streamKinds {
		t.Run(kind, func(t *testing.T) {
			s, r := streamPair(t, kind)
			go func() {
				_, _ = s.Write([]byte("ping"))
				_ = s.CloseWrite()
			}()
			got, err := io.ReadAll(r)
			if err != nil || string(got) != "ping" {
				t.Fatalf("read to the opener's FIN = %q, %v; want %q", got, err, "ping")
			}
			// Our direction ended; the other one still carries bytes.
			go func() {
				_, _ = r.Write([]byte("pong"))
				_ = r.CloseWrite()
			}()
			got, err = io.ReadAll(s)
			if err != nil || string(got) != "pong" {
				t.Fatalf("read after our half-close = %q, %v; want %q", got, err, "pong")
			}
			if _, err := s.Write([]byte("late")); err == nil {
				t.Fatal("write after CloseWrite succeeded")
			}
			if err := s.Close(); err != nil {
				t.Fatalf("Close after both FINs: %v", err)
			}
			if err := r.Close(); err != nil {
				t.Fatalf("Close after both FINs: %v", err)
			}
		})
	}
}

// Abort fails the peer's reads (not a clean EOF) and its writes.
func TestStreamAbort(t *testing.T) {
	for _, kind := range streamKinds {
		t.Run(kind, func(t *testing.T) {
			s, r := streamPair(t, kind)
			s.Abort()
			_, err := io.ReadAll(r)
			if err == nil {
				t.Fatal("read of an aborted stream ended cleanly")
			}
			if !writeFails(r) {
				t.Fatal("writes to an aborted stream never failed")
			}
			r.Close()
		})
	}
}

// Close ends both directions: the peer reads our FIN, and what it still
// writes fails instead of filling our window.
func TestStreamCloseStopsReading(t *testing.T) {
	for _, kind := range streamKinds {
		t.Run(kind, func(t *testing.T) {
			s, r := streamPair(t, kind)
			if err := r.Close(); err != nil {
				t.Fatal(err)
			}
			if got, err := io.ReadAll(s); err != nil || len(got) != 0 {
				t.Fatalf("read after the peer's Close = %q, %v; want a clean EOF", got, err)
			}
			if !writeFails(s) {
				t.Fatal("writes to a closed stream never failed")
			}
			s.Close()
		})
	}
}

// writeFails writes until a write fails (QUIC learns of the peer's
// STOP_SENDING or reset a round trip later), within the stream deadline.
func writeFails(s Stream) bool {
	buf := make([]byte, 1024)
	for i := 0; i < 100000; i++ {
		if _, err := s.Write(buf); err != nil {
			return !errors.Is(err, os.ErrDeadlineExceeded)
		}
	}
	return false
}
