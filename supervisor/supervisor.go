// Package supervisor is the root of the node's actor tree: the strategy
// every parent uses for its children (restart with exponential backoff),
// and the logging of each restart to the core log channel.
package supervisor

import (
	"log/slog"
	"sync"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	cmap "github.com/orcaman/concurrent-map"
)

// RegistryShards is how many shards each of protoactor's 1,024 process
// registry buckets has (the concurrent-map package's SHARD_COUNT, 32 by
// default; read when an actor system is made, so it is set here, once,
// before any is). Every future (each Ask) and actor is a key in one of
// those Go maps, and a Go map keeps the memory of its first entry after
// the entry goes: with 1,024 x 32 maps, a node that answers requests
// slowly touches more and more of the 32,768 maps over hours, its heap
// growing by up to 9 MiB (288 B each) before it levels off, on top of
// 2.7 MiB for the empty maps at start. The one-hour soak (bench/soak)
// showed that growth as a steady rise of RSS; with one shard per bucket
// the 1,024 maps are all touched within the first seconds and the heap
// stays flat. 1,024 locks are still far more than the node's actors
// contend for.
const RegistryShards = 1

func init() { cmap.SHARD_COUNT = RegistryShards }

// Backoff window and first delay: a child that keeps crashing within the
// window waits one more InitialBackoff per failure before its restart, so a
// crash loop cannot spin the CPU while the rest of the node keeps serving.
const (
	BackoffWindow  = 30 * time.Second
	InitialBackoff = 100 * time.Millisecond
)

// Backoff is the restart-with-backoff strategy for a parent's children.
func Backoff() actor.SupervisorStrategy {
	return actor.NewExponentialBackoffStrategy(BackoffWindow, InitialBackoff)
}

// LogFailures writes every supervision event (a child failed and what was
// done about it) to log. It returns a function that stops the logging.
func LogFailures(sys *actor.ActorSystem, log *slog.Logger) func() {
	sub := sys.EventStream.Subscribe(func(evt any) {
		if e, ok := evt.(*actor.SupervisorEvent); ok {
			log.Error("actor failed", "actor", e.Child.String(), "reason", e.Reason, "directive", e.Directive.String())
		}
	})
	return func() { sys.EventStream.Unsubscribe(sub) }
}

// Root spawns the node's top-level actors under the backoff strategy and
// stops them again, last spawned first.
type Root struct {
	System *actor.ActorSystem
	stop   func()

	mu       sync.Mutex // guards children and down
	children []*actor.PID
	down     bool
}

// LogTo sends every supervision event to log (the core channel, which is
// itself an actor of this system, so it is set once the channels run).
func (r *Root) LogTo(log *slog.Logger) {
	if r.stop != nil {
		r.stop()
	}
	r.stop = LogFailures(r.System, log)
}

// NewRoot makes an actor system whose failures are logged to log until
// LogTo picks another logger.
func NewRoot(log *slog.Logger) *Root {
	sys := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger {
		// protoactor's own chatter (spawns, dead letters) is debug noise for
		// operators; failures reach the core channel through LogFailures.
		return slog.New(slog.NewTextHandler(discard{}, nil))
	}))
	return &Root{System: sys, stop: LogFailures(sys, log)}
}

// Spawn starts a top-level actor with a name. Its guardian restarts it
// with backoff when it crashes.
//
// Spawn order is dependency order: an actor spawned later may use the ones
// spawned before it (log channels first, the peers last), so Shutdown stops
// them in reverse.
func (r *Root) Spawn(name string, props *actor.Props) (*actor.PID, error) {
	pid, err := r.System.Root.SpawnNamed(props.Configure(actor.WithGuardian(Backoff())), name)
	if err == nil {
		r.mu.Lock()
		r.children = append(r.children, pid)
		r.mu.Unlock()
	}
	return pid, err
}

// Shutdown stops the actor tree from the leaves up and then the system.
// Top-level actors stop in reverse spawn order; each is poisoned (it
// handles the mail already queued, then gets Stopping, stops its children
// and waits for them, then Stopped) and waited for before the next, so an
// actor never outlives one it depends on. An actor that does not stop
// within protoactor's future timeout (10 s) is stopped without draining
// its mailbox. Stores that
// actors write to must be closed only after Shutdown returns.
func (r *Root) Shutdown() {
	r.mu.Lock()
	if r.down {
		r.mu.Unlock()
		return
	}
	r.down = true
	children := r.children
	r.children = nil
	r.mu.Unlock()
	root := r.System.Root
	for i := len(children) - 1; i >= 0; i-- {
		pid := children[i]
		if root.PoisonFuture(pid).Wait() != nil {
			_ = root.StopFuture(pid).Wait()
		}
	}
	if r.stop != nil {
		r.stop()
		r.stop = nil
	}
	r.System.Shutdown()
}

type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }
