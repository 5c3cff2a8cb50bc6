// Package testutil holds helpers shared by tests: polling with a deadline
// instead of sleeping.
package testutil

import (
	"fmt"
	"testing"
	"time"
)

// Eventually polls cond every 5 ms until it returns nil, failing the test
// with the last error after within.
func Eventually(t testing.TB, within time.Duration, cond func() error) {
	t.Helper()
	deadline := time.Now().Add(within)
	for err := cond(); err != nil; err = cond() {
		if time.Now().After(deadline) {
			t.Fatalf("not true after %v: %v", within, err)
		}
		// The pause between two looks. Not a time.Ticker: Go 1.26's
		// runtime crashed (SIGSEGV in timer.maybeRunChan) receiving from
		// a ticker's channel inside a testing/synctest bubble under the
		// race detector, in bench/scale's virtual-time tests, which poll
		// here thousands of times; a sleep parks on the goroutine's own
		// timer, with no channel.
		time.Sleep(pollEvery)
	}
}

// pollEvery is how often Eventually looks.
const pollEvery = 5 * time.Millisecond

// Zero is a condition for Eventually: nil once count reads 0, else an
// error giving the count and what it counts ("handlers running", ...).
func Zero[N ~int32 | ~int64 | ~int](count func() N, what string) func() error {
	return func() error {
		if n := count(); n != 0 {
			return fmt.Errorf("%d %s", n, what)
		}
		return nil
	}
}
