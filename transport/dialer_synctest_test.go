package transport

import (
	"context"
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
