package transport

import (
	"bytes"
	"crypto/rand"
	"errors"
	"io"
	"testing"
	"time"
)

// A batchConn delivers every byte in order, drain waits for them, and a
// failed stream fails the later writes.
func TestBatchConnOrderDrainAndStickyError(t *testing.T) {
	a, b := newMemStreamPair()
	bc := newBatchConnMax(&streamNetConn{Stream: a}, 4<<10)
	want := make([]byte, 1<<20)
	_, _ = rand.Read(want)
	got := make(chan []byte, 1)
	go func() {
		var buf bytes.Buffer
		_, _ = io.CopyN(&buf, b, int64(len(want)))
		got <- buf.Bytes()
	}()
	for p := want; len(p) > 0; {
		k := min(len(p), 3000) // not a multiple of the buffer's size
		n, err := bc.Write(p[:k])
		if err != nil || n != k {
			t.Fatalf("write: %d %v", n, err)
		}
		p = p[k:]
	}
	if err := bc.drain(); err != nil {
		t.Fatalf("drain: %v", err)
	}
	select {
	case g := <-got:
		if !bytes.Equal(g, want) {
			t.Fatal("bytes through a batchConn differ from those written")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("bytes through a batchConn did not arrive")
	}
	// The peer goes away: a write (or the next) fails, and keeps failing.
	b.Abort()
	var err error
	deadline := time.Now().Add(5 * time.Second)
	for err == nil && time.Now().Before(deadline) {
		_, err = bc.Write([]byte("x"))
		if err == nil {
			err = bc.drain()
		}
	}
	if err == nil {
		t.Fatal("writes to a stream whose peer aborted kept succeeding")
	}
	if _, err2 := bc.Write([]byte("y")); err2 == nil {
		t.Fatal("the write error is not sticky")
	}
	// stop leaves the stream open; Close closes it.
	bc.stop()
	if _, err := bc.Write([]byte("z")); err == nil {
		t.Fatal("a write after stop succeeded")
	}
	if err := bc.Close(); err != nil && !errors.Is(err, io.EOF) {
		t.Fatalf("close: %v", err)
	}
}
