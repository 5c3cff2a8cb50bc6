package transport

import (
	"io"
	"runtime/metrics"
	"testing"
	"time"
)

// A write that waits moves its stream up to topUrgency, then round-robin,
// and then there is nothing left to move: a write that goes on waiting
// (a peer that never reads) costs no timer firing every waitLimit for as
// long as it waits.
func TestStreamSendOrderStopsWatchingAtTheTop(t *testing.T) {
	a, _ := newTestEndpoint(t)
	b, _ := newTestEndpoint(t)
	in, out := connect(t, a, b)
	st, err := out.OpenStream(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Abort()
	o := st.(quicStream).order
	o.limit = time.Millisecond
	wrote := make(chan error, 1)
	go func() { // far more than the peer's windows: it waits for the peer to read
		_, err := st.Write(make([]byte, 8<<20))
		wrote <- err
	}()
	atTop := func() bool {
		o.mu.Lock()
		defer o.mu.Unlock()
		return o.watched && o.waitedTop && o.urgency == topUrgency && o.incremental
	}
	for deadline := time.Now().Add(10 * time.Second); !atTop(); {
		if time.Now().After(deadline) {
			t.Fatal("a write waiting for the peer did not move its stream to the top, round-robin")
		}
		time.Sleep(time.Millisecond) // polling the state
	}
	// Each firing of the wait timer is a goroutine of its own.
	created := []metrics.Sample{{Name: "/sched/goroutines-created:goroutines"}}
	metrics.Read(created)
	g0 := created[0].Value.Uint64()
	for deadline := time.Now().Add(300 * time.Millisecond); time.Now().Before(deadline); {
		metrics.Read(created)
		if n := created[0].Value.Uint64() - g0; n > 30 {
			t.Fatalf("%d goroutines created while one write waited at the top (%v each); the wait timer keeps firing", n, o.limit)
		}
		time.Sleep(5 * time.Millisecond) // polling the count
	}
	// The write still ends once the peer reads.
	rs, err := in.AcceptStream(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	defer rs.Abort()
	if _, err := io.CopyN(io.Discard, rs, 8<<20); err != nil {
		t.Fatal(err)
	}
	if err := <-wrote; err != nil {
		t.Fatal(err)
	}
}
