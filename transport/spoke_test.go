package transport

import (
	"io"
	"testing"
	"time"
)

// Spoke sees, at its first look and without waiting, on every kind of
// stream, the far side's end of its data and its reset once they came,
// and on a stream path bytes it sent unasked; on a stream where nothing
// came it takes nothing, however often it looks, and the stream goes
// on.
func TestStreamSpoke(t *testing.T) {
	for _, kind := range []string{"quic", "tcp", "mem"} {
		t.Run(kind, func(t *testing.T) {
			s, r, out, in := streamPairOn(t, kind)
			for range 3 {
				begun := time.Now()
				if Spoke(s, new([1]byte)) {
					t.Fatal("Spoke on a quiet stream")
				}
				if d := time.Since(begun); d > time.Second {
					t.Fatalf("Spoke waited %v", d)
				}
			}
			// What comes next is read whole: nothing was taken.
			_ = s.SetReadDeadline(time.Now().Add(10 * time.Second))
			go func() { _, _ = r.Write([]byte("next")) }()
			got := make([]byte, 4)
			if _, err := io.ReadFull(s, got); err != nil || string(got) != "next" {
				t.Fatalf("after the looks: %q, %v", got, err)
			}
			if kind == "tcp" {
				if _, err := r.Write([]byte("unasked")); err != nil {
					t.Fatal(err)
				}
				after(t, kind, out, in)
				if !Spoke(s, new([1]byte)) {
					t.Fatal("bytes sent unasked not seen")
				}
			}

			for name, end := range map[string]func(Stream){
				"end":   func(r Stream) { _ = r.CloseWrite() },
				"reset": func(r Stream) { r.Abort() },
			} {
				s, r, out, in := streamPairOn(t, kind)
				end(r)
				after(t, kind, out, in)
				if !Spoke(s, new([1]byte)) {
					t.Fatalf("the far side's %s not seen at the first look", name)
				}
			}
		})
	}
}

// after returns once what in sent to out before it was called has been
// taken in by out: a stream in opens after it, and its first byte, read
// by out, came behind the rest (packets and frames of a connection are
// handled in order). The in-memory pipes deliver at once.
func after(t *testing.T, kind string, out, in Conn) {
	t.Helper()
	if kind == "mem" {
		return
	}
	s, err := in.OpenStream(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := s.Write([]byte("!")); err != nil {
		t.Fatal(err)
	}
	r, err := out.AcceptStream(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var b [1]byte
	if _, err := io.ReadFull(r, b[:]); err != nil {
		t.Fatal(err)
	}
}
