package testutil

import (
	"testing"
	"time"

	"go.uber.org/goleak"
)

// leakWait is how long NoLeaks waits for goroutines that are on their way
// out (buntdb's background manager and protoactor's dead-letter throttle
// look once a second) before it calls them leaked: long enough for a
// loaded machine under -race, where those seconds stretch; a goroutine
// really left behind is still there after it.
const leakWait = 20 * time.Second

// NoLeaks fails t at cleanup when goroutines started during the test are
// still running leakWait after it ended. Goroutines that existed before
// the call are ignored, so parallel tests and package-level pools do not
// make it flaky. Call it first in a test, so its cleanup runs after every
// cleanup that stops what the test started.
//
// Three library goroutines are ignored everywhere because they are not
// ours to stop:
//   - fasthttp's worker-pool cleaner sleeps MaxIdleWorkerDuration (10 s)
//     between rounds and only then sees that its server stopped; it ends by
//     itself.
//   - lumberjack v2.2.1 starts one mill goroutine per Logger that Close
//     never stops (natefinch/lumberjack#56, #205; unfixed upstream).
//     actors/logchan keeps one Logger per file for the whole process so
//     their number stays bounded by the number of log files.
//   - protoactor's dead-letter throttle starts a goroutine per throttle
//     period (1 s) once a message reaches dead letters (a send to an
//     actor that just stopped, normal at shutdown); it ends by itself
//     after the period.
func NoLeaks(t testing.TB, opts ...goleak.Option) {
	t.Helper()
	opts = append([]goleak.Option{
		goleak.IgnoreCurrent(),
		goleak.IgnoreAnyFunction("github.com/valyala/fasthttp.(*workerPool).Start.func2"),
		goleak.IgnoreTopFunction("gopkg.in/natefinch/lumberjack%2ev2.(*Logger).millRun"),
		goleak.IgnoreAnyFunction("github.com/asynkron/protoactor-go/actor.NewDeadLetter.NewThrottle.func4.1"),
	}, opts...)
	t.Cleanup(func() {
		deadline := time.Now().Add(leakWait)
		for {
			err := goleak.Find(opts...) // retries for a short while itself
			if err == nil {
				return
			}
			if time.Now().After(deadline) {
				t.Errorf("goroutines left behind: %v", err)
				return
			}
		}
	})
}
