package node

import (
	"os"
	"time"
)

// PEERDNS_TEST_CLOCK_OFFSET (a Go duration, e.g. "-4m") shifts the
// ledger's wall clock, the one its hybrid logical clock and claim times
// read, by that much. It is for fault tests only (bench/chaos jumps one
// node's clock with it): the system clock of a shared machine is not
// ours to move, and a tool that fakes it for a process would have to be
// installed. Unset, empty or unparsable: the true clock.
func ledgerClock() func() time.Time {
	off, err := time.ParseDuration(os.Getenv("PEERDNS_TEST_CLOCK_OFFSET"))
	if err != nil || off == 0 {
		return nil // the ledger's default, time.Now
	}
	return func() time.Time { return time.Now().Add(off) }
}
