package transport

import (
	"fmt"
	"io"
	"sync"
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

// BenchmarkQUICParallelStreams: four streams at once between two
// endpoints, on one connection or on a connection each (the tunnel benchmark's
// "several QUIC connections per peer pair" lever). Each connection has
// its own quic-go run loop; the endpoints' sockets are shared.
func BenchmarkQUICParallelStreams(b *testing.B) {
	const streams = 4
	for _, conns := range []int{1, streams} {
		b.Run(fmt.Sprintf("conns=%d", conns), func(b *testing.B) {
			a, _ := newTestEndpoint(b)
			c, _ := newTestEndpoint(b)
			type pair struct{ in, out Conn }
			ps := make([]pair, conns)
			for i := range ps {
				ps[i].in, ps[i].out = connect(b, a, c)
			}
			done := make(chan error, streams)
			ss := make([]Stream, streams)
			for i := range ss {
				p := ps[i%conns]
				s, err := p.out.OpenStream(ctxT(b))
				if err != nil {
					b.Fatal(err)
				}
				// A stream is announced by its first byte.
				if _, err := s.Write([]byte{0}); err != nil {
					b.Fatal(err)
				}
				r, err := p.in.AcceptStream(ctxT(b))
				if err != nil {
					b.Fatal(err)
				}
				go func() {
					_, err := io.Copy(io.Discard, r)
					done <- err
				}()
				ss[i] = s
			}
			chunk := make([]byte, 1<<20)
			b.SetBytes(int64(len(chunk)) * streams)
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				var wg sync.WaitGroup
				for _, s := range ss {
					wg.Go(func() {
						if _, err := s.Write(chunk); err != nil {
							b.Error(err)
						}
					})
				}
				wg.Wait()
			}
			b.StopTimer()
			for _, s := range ss {
				if err := s.CloseWrite(); err != nil {
					b.Fatal(err)
				}
			}
			for range ss {
				if err := <-done; err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
