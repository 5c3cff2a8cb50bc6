package transport

import (
	"io"
	"testing"
)

// BenchmarkQUICStream is bytes a second one way over one stream between
// two endpoints on loopback, 1 MiB per op: the floor under a tunnel's
// throughput (a tunnel adds a TCP hop on each side).
func BenchmarkQUICStream(b *testing.B) {
	a, _ := newTestEndpoint(b)
	c, _ := newTestEndpoint(b)
	in, out := connect(b, a, c)
	done := make(chan error, 1)
	go func() {
		s, err := in.AcceptStream(ctxT(b))
		if err != nil {
			done <- err
			return
		}
		_, err = io.Copy(io.Discard, s)
		done <- err
	}()
	s, err := out.OpenStream(ctxT(b))
	if err != nil {
		b.Fatal(err)
	}
	chunk := make([]byte, 1<<20)
	b.SetBytes(int64(len(chunk)))
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		if _, err := s.Write(chunk); err != nil {
			b.Fatal(err)
		}
	}
	if err := s.CloseWrite(); err != nil {
		b.Fatal(err)
	}
	if err := <-done; err != nil {
		b.Fatal(err)
	}
}
