package stats

import (
	"bytes"
	"fmt"
	"log/slog"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"peerdns/internal/testutil"
	"peerdns/internal/view"
)

// tickers counts the goroutines running a sampler's ticks.
func tickers() int {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			return bytes.Count(buf[:n], []byte("(*sampler).ticks("))
		}
		buf = make([]byte, 2*len(buf))
	}
}

// A sampler restarted after a panic keeps one ticker, and none once it
// stops: the ticker of the instance that panicked ends with it.
func TestSamplerRestartKeepsOneTicker(t *testing.T) {
	quiet := slog.New(slog.DiscardHandler)
	sys := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return quiet }))
	t.Cleanup(sys.Shutdown)
	before := tickers()
	var builds atomic.Int64
	pid := sys.Root.Spawn(Props(Deps{
		Interval: 5 * time.Millisecond, Published: &view.Publisher[Snapshot]{}, Started: time.Now(),
		Admin: func() Counters {
			if builds.Add(1) == 3 {
				panic("sample failed")
			}
			return Counters{}
		},
	}))
	testutil.Eventually(t, 10*time.Second, func() error {
		if n := builds.Load(); n < 10 {
			return fmt.Errorf("%d samples built, want 10 (past the restart)", n)
		}
		if n := tickers() - before; n != 1 {
			return fmt.Errorf("%d tickers running after the restart, want 1", n)
		}
		return nil
	})
	if err := sys.Root.StopFuture(pid).Wait(); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 10*time.Second, func() error {
		if n := tickers() - before; n != 0 {
			return fmt.Errorf("%d tickers running after the stop, want 0", n)
		}
		return nil
	})
}
