//go:build unix

package procs

import (
	"syscall"
	"time"
)

// processCPU is the user and system CPU time the process has used.
var processCPU = func() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
