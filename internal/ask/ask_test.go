package ask

import (
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
)

// A real actor answers, answers with the wrong type, or stays silent.
func TestReply(t *testing.T) {
	sys := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return slog.New(slog.DiscardHandler) }))
	t.Cleanup(sys.Shutdown)
	type ping struct{}
	type silent struct{}
	pid := sys.Root.Spawn(actor.PropsFromFunc(func(c actor.Context) {
		switch c.Message().(type) {
		case *ping:
			c.Respond("pong")
		case *silent:
			// never answers
		}
	}))
	t.Cleanup(func() { _ = sys.Root.StopFuture(pid).Wait() })

	if got, err := Reply[string](sys.Root, pid, &ping{}, 30*time.Second); err != nil || got != "pong" {
		t.Fatalf("Reply(ping) = %q, %v, want pong", got, err)
	}
	if _, err := Reply[int](sys.Root, pid, &ping{}, 30*time.Second); err == nil || !strings.Contains(err.Error(), "unexpected reply string") {
		t.Fatalf("Reply[int](ping) = %v, want an error naming the reply type", err)
	}
	start := time.Now()
	if _, err := Reply[string](sys.Root, pid, &silent{}, 50*time.Millisecond); !errors.Is(err, ErrBusy) {
		t.Fatalf("Reply(silent) = %v, want ErrBusy", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("Reply(silent) took %v with a 50ms deadline", d)
	}
}
