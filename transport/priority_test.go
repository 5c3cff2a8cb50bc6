package transport

import (
	"bytes"
	"io"
	"testing"
)

// TestStreamSendOrder: a stream's writes are non-incremental (sent whole,
// one stream after another) for the first burstBytes of a burst, then
// round-robin for the rest of it; a pause of burstGap starts a new burst.
// Every byte arrives in order whatever the priority.
func TestStreamSendOrder(t *testing.T) {
	a, _ := newTestEndpoint(t)
	b, _ := newTestEndpoint(t)
	in, out := connect(t, a, b)
	st, err := out.OpenStream(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	qs := st.(quicStream)
	var sent bytes.Buffer
	got := make(chan []byte, 1)
	go func() {
		rs, err := in.AcceptStream(ctxT(t))
		if err != nil {
			got <- nil
			return
		}
		d, _ := io.ReadAll(rs)
		got <- d
	}()
	write := func(n int) {
		t.Helper()
		p := bytes.Repeat([]byte{byte(sent.Len())}, n)
		if _, err := st.Write(p); err != nil {
			t.Fatal(err)
		}
		sent.Write(p)
	}
	if !qs.order.incremental {
		t.Fatal("a new stream is not quic-go's default (incremental)")
	}
	write(1 << 10)
	if qs.order.incremental {
		t.Fatal("an answer's first write is round-robin, want non-incremental")
	}
	for sent.Len() <= burstBytes+32<<10 {
		write(32 << 10)
	}
	// The bulk writes may have paused (a loaded machine): the rule is by
	// the burst's bytes, so only a whole burst past burstBytes counts.
	if qs.order.burst > burstBytes && !qs.order.incremental {
		t.Fatalf("a burst of %d bytes is still non-incremental", qs.order.burst)
	}
	qs.order.last -= burstGap // as if the stream had paused
	write(1 << 10)
	if qs.order.incremental || qs.order.burst != 1<<10 {
		t.Fatalf("after a pause: incremental %v, burst %d; want a new non-incremental burst", qs.order.incremental, qs.order.burst)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	if d := <-got; !bytes.Equal(d, sent.Bytes()) {
		t.Fatalf("received %d bytes, want the %d sent, in order", len(d), sent.Len())
	}
}
