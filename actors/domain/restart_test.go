package domain

import (
	"log/slog"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"peerdns/actors/consensus"
	"peerdns/supervisor"
)

// A crash restarts the domain actor, but the domain's history does not
// restart with it: the evaluations that resolved and failed before the
// crash, and when it last resolved, are still counted after it.
func TestRestartKeepsCountersAndLastResolution(t *testing.T) {
	sys := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return slog.New(slog.DiscardHandler) }))
	t.Cleanup(sys.Shutdown)

	at := time.UnixMilli(1_700_000_000_000)
	crash := func(next actor.ReceiverFunc) actor.ReceiverFunc {
		return func(c actor.ReceiverContext, env *actor.MessageEnvelope) {
			if ev, ok := env.Message.(*Evaluate); ok && ev.Version == 2 {
				panic("evaluation crashed")
			}
			next(c, env)
		}
	}
	// The parent spawns the domain actor as the ledger does, under the
	// backoff strategy, and hands it the evaluations.
	var child *actor.PID
	pid := sys.Root.Spawn(actor.PropsFromFunc(func(c actor.Context) {
		switch c.Message().(type) {
		case *actor.Started:
			child = c.Spawn(Props("a.p2p", func() time.Time { return at }, crash))
		case *Evaluate:
			c.Forward(child)
		}
	}, actor.WithSupervisor(supervisor.Backoff())))
	t.Cleanup(func() { _ = sys.Root.StopFuture(pid).Wait() })

	claims := []consensus.Claim{{Writer: "self", Hash: "h"}}
	votes := []consensus.Vote{{Voter: "self", Claimant: "self"}}
	eval := func(version uint64, active map[string]bool) *Evaluated {
		t.Helper()
		res, err := sys.Root.RequestFuture(pid, &Evaluate{
			Domain: "a.p2p", Version: version, Self: "self",
			Input: consensus.Input{Claims: claims, Votes: votes, Active: active},
		}, 10*time.Second).Result()
		if err != nil {
			t.Fatalf("evaluate version %d: %v", version, err)
		}
		return res.(*Evaluated)
	}

	first := eval(1, map[string]bool{"self": true})
	if first.State.Status != consensus.Resolved || first.Resolved != 1 || first.LastResolution != at.UnixMilli() {
		t.Fatalf("before the crash: %+v", first)
	}
	sys.Root.Send(pid, &Evaluate{Domain: "a.p2p", Version: 2, Self: "self"})
	// Two peers more and one vote: short of the quorum, so a failure. It
	// waits in the mailbox until the actor is restarted.
	after := eval(3, map[string]bool{"self": true, "b": true, "c": true})
	if after.State.Status != consensus.InsufficientQuorum {
		t.Fatalf("after the crash: status %q, want %q", after.State.Status, consensus.InsufficientQuorum)
	}
	if after.Resolved != 1 || after.Failed != 1 || after.LastResolution != at.UnixMilli() {
		t.Fatalf("after the crash: resolved %d failed %d lastResolution %d, want 1, 1, %d",
			after.Resolved, after.Failed, after.LastResolution, at.UnixMilli())
	}
}
