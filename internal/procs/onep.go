package procs

import (
	"runtime"
	"sync/atomic"
)

// OneP reports whether the process runs on one P: the governor's choice
// while it uses less than a core, or GOMAXPROCS=1 from the start. Code
// that orders goroutines on the one P (transport's stream writes) asks
// it at every call, so it is an atomic load, not runtime.GOMAXPROCS(0),
// which takes the scheduler's lock.
func OneP() bool { return oneP.Load() }

var oneP atomic.Bool

func init() { oneP.Store(runtime.GOMAXPROCS(0) == 1) }

// Set sets GOMAXPROCS to p and OneP with it: what the governor does at
// each change (tests set one P this way).
func Set(p int) {
	runtime.GOMAXPROCS(p)
	oneP.Store(p == 1)
}
