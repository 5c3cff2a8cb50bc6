//go:build !linux

package procs

import (
	"time"

	"github.com/shirou/gopsutil/v3/cpu"
)

// machineIdle is the idle (and iowait) time of all the machine's CPUs so
// far; ok false where the platform does not give it.
func machineIdle() (idle time.Duration, ok bool) {
	ts, err := cpu.Times(false)
	if err != nil || len(ts) == 0 {
		return 0, false
	}
	return time.Duration((ts[0].Idle + ts[0].Iowait) * float64(time.Second)), true
}
