package transport

import (
	"io"
	"net"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"

	"peerdns/internal/procs"
)

// countingRelay forwards datagrams between one client and to, counting
// those the client sends; the client dials pc's address.
type countingRelay struct {
	pc   net.PacketConn
	sent atomic.Int64
}

func newCountingRelay(t *testing.T, to net.Addr) *countingRelay {
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	up, err := net.DialUDP("udp", nil, to.(*net.UDPAddr))
	if err != nil {
		t.Fatal(err)
	}
	r := &countingRelay{pc: pc}
	var wg sync.WaitGroup
	forwardUDP(pc, up, func() bool { r.sent.Add(1); return true }, &wg)
	t.Cleanup(func() { pc.Close(); up.Close(); wg.Wait() })
	return r
}

// On one P, writes that many goroutines make at once to their streams
// leave in a few packets, not one each: the connection's loop, woken by
// the first write, runs after the other writers (writersFirst).
func TestWritersFirstPacksStreams(t *testing.T) {
	defer procs.Set(runtime.GOMAXPROCS(0))
	procs.Set(1)
	a, _ := newTestEndpoint(t)
	b, _ := newTestEndpoint(t)
	relay := newCountingRelay(t, a.Addr())
	out, err := b.Dial(ctxT(t), relay.pc.LocalAddr().String(), a.ID())
	if err != nil {
		t.Fatalf("Dial: %v", err)
	}
	in, err := a.Accept(ctxT(t))
	if err != nil {
		t.Fatalf("Accept: %v", err)
	}
	const n = 16
	// Open the streams and see each arrive (one byte), so that the
	// burst below carries only the writes.
	streams := make([]Stream, n)
	accepted := make([]Stream, n)
	for i := range streams {
		s, err := out.OpenStream(ctxT(t))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.Write([]byte{byte(i)}); err != nil {
			t.Fatal(err)
		}
		as, err := in.AcceptStream(ctxT(t))
		if err != nil {
			t.Fatal(err)
		}
		var one [1]byte
		if _, err := io.ReadFull(as, one[:]); err != nil {
			t.Fatal(err)
		}
		streams[int(one[0])], accepted[int(one[0])] = s, as
	}
	t.Cleanup(func() {
		for _, s := range streams {
			s.Close()
		}
	})
	msg := make([]byte, 100)
	start := make(chan struct{})
	var wrote sync.WaitGroup
	for _, s := range streams {
		wrote.Add(1)
		go func() {
			defer wrote.Done()
			<-start
			_, _ = s.Write(msg)
		}()
	}
	before := relay.sent.Load()
	close(start)
	wrote.Wait()
	for i, as := range accepted {
		if _, err := io.ReadFull(as, make([]byte, len(msg))); err != nil {
			t.Fatalf("stream %d: %v", i, err)
		}
	}
	packets := relay.sent.Load() - before
	t.Logf("%d writes of %d B on %d streams left in %d datagrams", n, len(msg), n, packets)
	if packets > n/2 {
		t.Errorf("%d writes went in %d datagrams, want at most %d: the connection's loop sent after each write", n, packets, n/2)
	}
}
