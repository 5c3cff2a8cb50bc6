package peer

import (
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"peerdns/messages"
)

// A neighbour whose hello says it has no neighbours is greeted with a
// liveness frame (a heartbeat per writer we hold, ~150 KB at 1,000), but
// at most greetsPerInterval times a heartbeat interval: a writer that
// reconnected over and over, saying so each time, drew the whole frame
// each time.
func TestGreetingsBoundedPerHeartbeatInterval(t *testing.T) {
	ids := newIdentities(t, 2)
	self, w := ids[0], ids[1]
	const network = "net"
	r := newLivenessRig(t, self, network)
	sent := r.neighbour(w, messages.KindLiveness)
	clock := time.Now()
	r.run(func(actor.Context) { r.a.d.Now = func() time.Time { return clock } })
	// greet sessions up with w again (a reconnect) and counts the
	// liveness frames w was sent; our own heartbeat, signed at clock,
	// is always there to send.
	greet := func() int {
		r.run(func(c actor.Context) {
			r.a.beat(c, clock)
			r.a.greetLiveness(c, w.ID())
			// A frame without an overlay after them marks the end.
			c.Send(r.a.sessions[w.ID()].pid, &sendFrame{env: &messages.Envelope{Kind: messages.KindLiveness}})
		})
		n := 0
		deadline := time.After(5 * time.Second)
		for {
			select {
			case o := <-sent:
				if o == nil {
					return n
				}
				n++
			case <-deadline:
				t.Fatal("the end mark did not arrive")
			}
		}
	}
	for i := range greetsPerInterval {
		if n := greet(); n != 1 {
			t.Fatalf("greeting %d: %d liveness frames, want 1", i+1, n)
		}
	}
	for i := range 5 {
		if n := greet(); n != 0 {
			t.Fatalf("greeting %d within a heartbeat interval: %d liveness frames, want none", greetsPerInterval+i+1, n)
		}
	}
	r.run(func(actor.Context) { clock = clock.Add(r.a.hbInterval()) })
	if n := greet(); n != 1 {
		t.Fatalf("greeting a heartbeat interval later: %d liveness frames, want 1", n)
	}
}
