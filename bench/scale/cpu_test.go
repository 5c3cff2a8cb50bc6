package scale

import (
	"syscall"
	"time"
)

// cpuTime is the CPU time (user + system) this process used so far: the
// work the simulated nodes did, whatever share of the machine they got.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// loadAvg is the 1-minute load average (0 when unreadable): the runs
// share two cores with other work, so wall times are reported with it.
func loadAvg() float64 {
	var si syscall.Sysinfo_t
	if syscall.Sysinfo(&si) != nil {
		return 0
	}
	return float64(si.Loads[0]) / 65536
}
