package transport

import (
	"context"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"peerdns/transport/identity"
)

// TestDialerBackoffTiming runs the dialer against an address nobody
// listens on, with the in-memory network and a fake clock, and checks the
// wait before each retry: within [d/2, d] where d doubles from Min to Max.
func TestDialerBackoffTiming(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := NewMemNetwork()
		id, _ := identity.Generate()
		ep := n.Listen(id, nil)
		defer ep.Close()
		var at []time.Time
		ctx, cancel := context.WithCancel(context.Background())
		d := &Dialer{Endpoint: ep, Addr: "127.0.0.1:1",
			Backoff: Backoff{Min: 100 * time.Millisecond, Max: time.Second},
			OnFail:  func(error) { at = append(at, time.Now()) }}
		done := make(chan struct{})
		go func() { d.Run(ctx); close(done) }()
		time.Sleep(10 * time.Second) // fake clock: returns once 10s of retries have run
		cancel()
		<-done
		if len(at) < 10 {
			t.Fatalf("only %d attempts in 10s", len(at))
		}
		ceiling := 100 * time.Millisecond
		for i := 1; i < len(at); i++ {
			gap := at[i].Sub(at[i-1])
			if gap < ceiling/2 || gap > ceiling {
				t.Fatalf("wait before attempt %d = %v, want in [%v, %v]", i+1, gap, ceiling/2, ceiling)
			}
			ceiling = min(2*ceiling, time.Second)
		}
	})
}

// TestDialerRetiresOnlyWhenSkipped: a dialer with RetireAfter ends once
// Skip has said no for that long without a break (and says so through
// OnRetire), keeps going while Skip lets dials through even if they
// fail, and starts counting again after a let-through.
func TestDialerRetiresOnlyWhenSkipped(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := NewMemNetwork()
		id, _ := identity.Generate()
		ep := n.Listen(id, nil)
		defer ep.Close()
		var skip atomic.Bool
		var fails atomic.Int64
		retired := make(chan time.Time, 1)
		d := &Dialer{Endpoint: ep, Addr: "127.0.0.1:1",
			Backoff:     Backoff{Min: 100 * time.Millisecond, Max: 200 * time.Millisecond},
			Skip:        func(string) bool { return skip.Load() },
			OnFail:      func(error) { fails.Add(1) },
			RetireAfter: 5 * time.Second,
			OnRetire:    func() { retired <- time.Now() }}
		done := make(chan struct{})
		start := time.Now()
		go func() { d.Run(context.Background()); close(done) }()
		time.Sleep(20 * time.Second) // failing, never skipped: still running
		select {
		case <-done:
			t.Fatal("a dialer that was never skipped retired")
		default:
		}
		if f := fails.Load(); f < 50 {
			t.Fatalf("%d failed attempts in 20 s with a 200 ms backoff cap", f)
		}
		skip.Store(true)
		skippedFrom := time.Now()
		select {
		case <-done:
		case <-time.After(time.Minute):
			t.Fatal("still running after a minute of skips")
		}
		at := <-retired
		if held := at.Sub(skippedFrom); held < 5*time.Second || held > 7*time.Second {
			t.Fatalf("retired %v after the first skip (%v after start), want 5-7 s", held, at.Sub(start))
		}
	})
}
