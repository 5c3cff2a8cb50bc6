package transport

import (
	"bytes"
	"context"
	"io"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestStreamSendOrder: a long write goes non-incremental (sent whole,
// one stream after another) at its burst's urgency, startUrgency at
// first; a write that waited moves the burst up to topUrgency, then
// makes it round-robin; a burst past burstBytes is round-robin; short
// writes and what a write leaves queued go round-robin at topUrgency; a
// pause of burstGap starts afresh. Every byte arrives in order whatever
// the priority.
func TestStreamSendOrder(t *testing.T) {
	a, _ := newTestEndpoint(t)
	b, _ := newTestEndpoint(t)
	in, out := connect(t, a, b)
	st, err := out.OpenStream(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	o := st.(quicStream).order
	// The test's own clock: it moves only when the test says (a loaded
	// machine's pauses between writes must not end a burst).
	var clock time.Duration = time.Second
	o.now = func() time.Duration { return clock }
	o.limit = time.Hour // the test moves the stream up itself
	var sent bytes.Buffer
	got := readOneStream(t, in)
	write := func(n int) {
		t.Helper()
		p := bytes.Repeat([]byte{byte(sent.Len())}, n)
		if _, err := st.Write(p); err != nil {
			t.Fatal(err)
		}
		sent.Write(p)
	}
	type prio struct {
		u   int8
		inc bool
	}
	state := func() prio {
		o.mu.Lock()
		defer o.mu.Unlock()
		return prio{o.urgency, o.incremental}
	}
	// during is the priority a write of n bytes goes at (the state
	// machine's steps around a write, without the write).
	during := func(n int) prio {
		o.before(n)
		p := state()
		o.after()
		return p
	}
	check := func(what string, got, want prio) {
		t.Helper()
		if got != want {
			t.Fatalf("%s: urgency %d incremental %v, want %d %v", what, got.u, got.inc, want.u, want.inc)
		}
	}
	check("a new stream", state(), prio{defaultUrgency, true})
	check("a long write", during(64<<10), prio{startUrgency, false})
	check("what it left queued", state(), prio{topUrgency, true})
	check("a short write", during(1<<10), prio{topUrgency, true})
	write(1 << 10)
	write(64 << 10)
	for sent.Len() <= burstBytes {
		write(32 << 10)
	}
	if p := during(32 << 10); !p.inc {
		t.Fatalf("a long write in a burst of %d bytes: urgency %d, non-incremental; want round-robin", o.burst, p.u)
	}

	clock += burstGap // a pause
	check("after a pause", during(64<<10), prio{startUrgency, false})
	// Waits of a long write move its burst up, then make it round-robin.
	o.before(64 << 10)
	for _, want := range []prio{{startUrgency - 1, false}, {topUrgency, false}, {topUrgency, true}} {
		o.waited()
		check("after a wait", state(), want)
	}
	o.after()
	check("the rest of a burst that waited at the top", during(64<<10), prio{topUrgency, true})
	clock += burstGap
	check("after a pause a stream that had waited", during(64<<10), prio{startUrgency, false})
	write(100 << 10)
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	if d := <-got; !bytes.Equal(d, sent.Bytes()) {
		t.Fatalf("received %d bytes, want the %d sent, in order", len(d), sent.Len())
	}
}

// TestStreamSendOrderServesEveryStream: streams that each write 200 KiB
// answers back to back, every one a new burst (quic-go would send the
// lowest stream's answers first, as long as it has one), all get
// through at about the same pace: waiting moves a stream up.
func TestStreamSendOrderServesEveryStream(t *testing.T) {
	a, _ := newTestEndpoint(t)
	b, _ := newTestEndpoint(t)
	in, out := connect(t, a, b)
	const streams, answer = 6, 200 << 10
	ctx, cancel := context.WithCancel(ctxT(t))
	defer cancel()
	var got [streams]atomic.Int64
	var wg sync.WaitGroup
	for i := range streams {
		st, err := out.OpenStream(ctx)
		if err != nil {
			t.Fatal(err)
		}
		// Each write is a burst of its own: the stream's clock jumps a
		// pause ahead at each reading.
		var clock atomic.Int64
		st.(quicStream).order.now = func() time.Duration { return time.Duration(clock.Add(int64(burstGap))) }
		if _, err := st.Write([]byte{byte(i)}); err != nil { // opens it at the peer
			t.Fatal(err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer st.Abort()
			p := make([]byte, answer)
			for ctx.Err() == nil {
				if _, err := st.Write(p); err != nil {
					return
				}
			}
		}()
	}
	for range streams {
		rs, err := in.AcceptStream(ctx)
		if err != nil {
			t.Fatal(err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer rs.Abort()
			var id [1]byte
			if _, err := io.ReadFull(rs, id[:]); err != nil || int(id[0]) >= streams {
				return
			}
			p := make([]byte, 32<<10)
			for {
				n, err := rs.Read(p)
				got[id[0]].Add(int64(n))
				if err != nil {
					return
				}
			}
		}()
	}
	// Until every stream has had two answers through, or a minute.
	deadline := time.Now().Add(time.Minute)
	for {
		least := int64(-1)
		for i := range got {
			if n := got[i].Load(); least < 0 || n < least {
				least = n
			}
		}
		if least >= 2*answer {
			break
		}
		if time.Now().After(deadline) {
			var counts []int64
			for i := range got {
				counts = append(counts, got[i].Load())
			}
			t.Fatalf("bytes received per stream after a minute: %v; a stream was held back", counts)
		}
		time.Sleep(10 * time.Millisecond) // polling the counters
	}
	// Without moving up, the lowest stream had 2,805 answers through by
	// the time the highest had 2 (its writes waited behind it); with it,
	// 5 or 6.
	var counts []int64
	most := int64(0)
	for i := range got {
		counts = append(counts, got[i].Load()/answer)
		most = max(most, counts[i])
	}
	if most > 100 {
		t.Fatalf("answers per stream when the last had two: %v; the lower streams went first", counts)
	}
	t.Logf("answers per stream: %v", counts)
	cancel()
	wg.Wait()
}
