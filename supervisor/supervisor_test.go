package supervisor

import (
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"peerdns/internal/testutil"
)

// recorder notes the lifecycle messages its actors see, in order.
type recorder struct {
	mu     sync.Mutex
	events []string
}

func (r *recorder) add(s string) {
	r.mu.Lock()
	r.events = append(r.events, s)
	r.mu.Unlock()
}

func (r *recorder) list() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.events...)
}

// props is an actor that records Stopping/Stopped, spawns one child when
// asked to, and panics on "crash".
func props(name string, rec *recorder, withChild bool) *actor.Props {
	return actor.PropsFromFunc(func(c actor.Context) {
		switch m := c.Message().(type) {
		case *actor.Started:
			if withChild {
				c.Spawn(props(name+"/child", rec, false))
			}
		case *actor.Stopping:
			rec.add(name + " stopping")
		case *actor.Stopped:
			rec.add(name + " stopped")
		case string:
			if m == "crash" {
				panic("crash requested")
			}
			c.Respond(m)
		}
	})
}

func TestShutdownStopsLeavesFirstInReverseSpawnOrder(t *testing.T) {
	testutil.NoLeaks(t)
	rec := &recorder{}
	r := NewRoot(slog.New(slog.NewTextHandler(&testutil.LogBuffer{}, nil)))
	for _, name := range []string{"logs", "ledger", "peers"} {
		if _, err := r.Spawn(name, props(name, rec, name == "peers")); err != nil {
			t.Fatal(err)
		}
	}
	r.Shutdown()
	want := []string{
		"peers stopping", "peers/child stopping", "peers/child stopped", "peers stopped",
		"ledger stopping", "ledger stopped",
		"logs stopping", "logs stopped",
	}
	if got := rec.list(); strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("stop order:\n got %v\nwant %v", got, want)
	}
	if !r.System.IsStopped() {
		t.Fatal("actor system not stopped")
	}
	r.Shutdown() // a second call is harmless
}

func TestCrashIsRestartedAndLogged(t *testing.T) {
	var log testutil.LogBuffer
	r := NewRoot(slog.New(slog.NewTextHandler(&log, nil)))
	defer r.Shutdown()
	rec := &recorder{}
	pid, err := r.Spawn("worker", props("worker", rec, false))
	if err != nil {
		t.Fatal(err)
	}
	r.System.Root.Send(pid, "crash")
	// The restarted actor answers again; the failure is on the log.
	testutil.Eventually(t, 5*time.Second, func() error {
		res, err := r.System.Root.RequestFuture(pid, "ping", time.Second).Result()
		if err != nil {
			return err
		}
		if res != "ping" {
			return errors.New("unexpected reply")
		}
		if !strings.Contains(log.String(), "actor failed") {
			return errors.New("failure not logged yet")
		}
		return nil
	})
	if !strings.Contains(log.String(), "crash requested") {
		t.Fatalf("log does not name the reason: %s", log.String())
	}
}
