package fleet_test

import (
	"context"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"peerdns/agent/fleet"
	"peerdns/internal/testutil"
	"peerdns/messages"
	"peerdns/transport"
)

// ackFlood is a parent that acks batches the child never sent.
type ackFlood struct{}

func (f ackFlood) ServeStream(ctx context.Context, peer string, h *messages.StreamHello, st transport.Stream) {
	defer st.Close()
	if err := messages.WriteFrame(st, &messages.AgentReply{Status: 200}, messages.AgentMaxFrame); err != nil {
		return
	}
	for i := 1; i <= 64; i++ {
		if err := messages.WriteFrame(st, &messages.StreamAck{Seq: uint64(i), Dropped: 1}, messages.AgentMaxFrame); err != nil {
			return
		}
	}
	<-ctx.Done()
}

// A parent that acks more batches than the child has in flight costs
// the child nothing that outlives the stream: once Run has returned, none
// of its sessions' goroutines is left.
func TestChildSurvivesUnsolicitedAcks(t *testing.T) {
	dir, _, _, rs := listenRPC(t, ackFlood{}, func(*fasthttp.RequestCtx) {})
	c := newChild(t, &parentEnv{dir: dir, rpc: rs}, "alpha", 1)
	ch := fleet.NewChild(fleet.ChildConfig{
		DB: c.db, Endpoint: c.ep.Endpoint(), ParentKey: rs.ID(), ParentAddr: rs.Addr().String(),
		Hello: messages.StreamHello{Hostname: "alpha", GUID: "g", NodeID: "n"}, Interval: 50 * time.Millisecond,
	})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); ch.Run(ctx) }()
	// The child counts each ack's drops as it reads it: two read means
	// it has one ack more than batches in flight.
	testutil.Eventually(t, 10*time.Second, func() error {
		if n := ch.Dropped.Load(); n < 2 {
			return fmt.Errorf("the child read %d acks, want 2", n)
		}
		return nil
	})
	cancel()
	<-done
	testutil.Eventually(t, 5*time.Second, func() error {
		buf := make([]byte, 1<<20)
		stacks := string(buf[:runtime.Stack(buf, true)])
		for _, g := range strings.Split(stacks, "\n\n") {
			if strings.Contains(g, "fleet.(*Child).session") {
				return fmt.Errorf("a session goroutine outlived Run:\n%s", g)
			}
		}
		return nil
	})
}
