package transport

import (
	"context"
	"errors"
	"testing"
	"time"
)

// A stream path opens at most yamux's backlog of streams the peer has
// not accepted yet; past that, OpenStream waits as QUIC's does at its
// stream cap, and ends when its ctx does.
func TestStreamPathOpenStreamEndsWithCtx(t *testing.T) {
	a, b := newMulti(t, Options{}), newMulti(t, Options{})
	out, in := tcpPair(t, a, b)
	defer out.Close("done")
	defer in.Close("done")
	// in never accepts: none of out's streams is acknowledged.
	var opened []Stream
	defer func() {
		for _, s := range opened {
			s.Abort()
		}
	}()
	for range yamuxConfig(&Config{}).AcceptBacklog {
		s, err := out.OpenStream(ctxT(t))
		if err != nil {
			t.Fatalf("OpenStream within the backlog: %v", err)
		}
		opened = append(opened, s)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	done := make(chan error, 1)
	go func() {
		s, err := out.OpenStream(ctx)
		if err == nil {
			s.Abort()
		}
		done <- err
	}()
	select {
	case err := <-done:
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("OpenStream past the backlog = %v; want it to wait until its deadline", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("OpenStream past the backlog still waits 10 s after its ctx ended")
	}
}
