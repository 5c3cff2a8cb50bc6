package peer

import (
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"peerdns/messages"
)

// TestUnadmittedKeyHoldsNoFrames: a key nobody invited connects and,
// instead of a hello, sends frames that are small on the wire and large
// once decoded (peer lists of 65,536 empty entries: 192 KiB each, 2.5
// MiB of heap). Until its session is established the node reads no
// more than one such frame; the rest waits in QUIC's flow control, which
// bounds it. The node's heap stays flat until the handshake times out,
// and the node serves a joiner afterwards.
func TestUnadmittedKeyHoldsNoFrames(t *testing.T) {
	a := newTestNode(t, "A", nodeOpts{})
	a.waitReady()
	big := &messages.Envelope{Kind: messages.KindPeers, Peers: make([]messages.PeerInfo, 1<<16)}
	const frames = 128 // ~24 MiB on the wire, ~320 MiB decoded

	var peak atomic.Uint64
	sample := func() {
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		if ms.HeapAlloc > peak.Load() {
			peak.Store(ms.HeapAlloc)
		}
	}
	runtime.GC()
	var base runtime.MemStats
	runtime.ReadMemStats(&base)
	stopSampling := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		tk := time.NewTicker(5 * time.Millisecond)
		defer tk.Stop()
		for {
			select {
			case <-stopSampling:
				return
			case <-tk.C:
				sample()
			}
		}
	}()

	r := dialRaw(t, mustGenerate(t), a)
	sent := 0
	for range frames {
		if r.conn.Send(big) != nil {
			break // the node closed the connection: handshake timeout
		}
		sent++
	}
	// Whether all went out or the node hung up, the node has by now had
	// every chance to read them; its handshake timeout closes it.
	select {
	case <-r.conn.Done():
	case <-time.After(15 * time.Second):
		t.Fatal("the connection that never said hello was not closed")
	}
	close(stopSampling)
	<-sampled
	grew := int64(peak.Load()) - int64(base.HeapAlloc)
	t.Logf("sent %d of %d frames; heap peak %d MiB above the start", sent, frames, grew>>20)
	if grew > 32<<20 {
		t.Fatalf("heap grew by %d MiB while an unadmitted key sent %d frames", grew>>20, sent)
	}
	// Flow control took only what fits the stream's window beside the
	// one frame read (512 KiB: a few frames).
	if sent > 8 {
		t.Fatalf("the node read %d frames of a key that never said hello", sent)
	}
	// A keeps serving: a joiner gets in.
	b := joinNode(t, "B", a)
	waitMesh(t, 15*time.Second, a, b)
}
