package testutil

import (
	"testing"

	"go.uber.org/goleak"
)

// NoLeaks fails t at cleanup when goroutines started during the test are
// still running after a grace period (goleak retries for up to a second,
// so goroutines that are on their way out do not count). Goroutines that
// existed before the call are ignored, so parallel tests and package-level
// pools do not make it flaky. Call it first in a test, before anything
// that starts goroutines registers its own cleanup.
func NoLeaks(t testing.TB, opts ...goleak.Option) {
	t.Helper()
	opts = append([]goleak.Option{goleak.IgnoreCurrent()}, opts...)
	t.Cleanup(func() {
		if err := goleak.Find(opts...); err != nil {
			t.Errorf("goroutines left behind: %v", err)
		}
	})
}
