package peer

import (
	"encoding/hex"
	"math/rand/v2"
	"runtime"
	"testing"
	"time"

	"peerdns/messages"
)

// TestOwedWritersFollowThePeersVector: a writer sends vector after
// vector, each naming 20,000 writers nobody knows, none twice. What the
// node keeps of the peer's vectors (to notice a neighbour that holds ops
// and does not send them) is what the latest one shows: its heap does
// not grow with every vector.
func TestOwedWritersFollowThePeersVector(t *testing.T) {
	a := newTestNode(t, "A", nodeOpts{})
	b := joinNode(t, "B", a)
	waitMesh(t, 15*time.Second, a, b)
	r := impersonate(t, b, a)
	pongs := make(chan int64, 16)
	go func() {
		for {
			m, err := r.conn.Recv()
			if err != nil {
				return
			}
			if m.Kind == messages.KindPong {
				pongs <- m.Ping.SentUnixNano
			}
		}
	}()
	// barrier waits until A's session has handled every frame sent
	// before it: it answers a ping in order with the rest.
	barrier := func(n int64) {
		t.Helper()
		if err := r.conn.Send(&messages.Envelope{Kind: messages.KindPing, Ping: &messages.Ping{SentUnixNano: n}}); err != nil {
			t.Fatal(err)
		}
		timeout := time.After(30 * time.Second)
		for {
			select {
			case got := <-pongs:
				if got == n {
					return
				}
			case <-timeout:
				t.Fatal("A did not answer the ping")
			}
		}
	}
	rng := rand.New(rand.NewChaCha8([32]byte{7}))
	vector := func() messages.VersionVector {
		vv := make(messages.VersionVector, 20000)
		var k [32]byte
		for range 20000 {
			for i := range k {
				k[i] = byte(rng.Uint32())
			}
			vv[hex.EncodeToString(k[:])] = 1 + rng.Uint64N(1000)
		}
		return vv
	}
	heap := func() int64 {
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		return int64(ms.HeapAlloc)
	}
	send := func(n int) {
		for range n {
			if err := r.conn.Send(&messages.Envelope{Kind: messages.KindVV, VV: vector()}); err != nil {
				t.Fatal(err)
			}
		}
	}
	send(2) // A holds one vector's worth from here on
	barrier(1)
	base := heap()
	const frames = 24
	send(frames)
	barrier(2)
	grew := heap() - base
	t.Logf("heap grew by %d MiB over %d more vectors", grew>>20, frames)
	if grew > 24<<20 {
		t.Fatalf("heap grew by %d MiB over %d vectors of unknown writers", grew>>20, frames)
	}
	if got := a.peerIDs(); len(got) != 1 {
		t.Fatalf("A's peers = %v, want the writer", shortAll(got))
	}
}
