// Package procstat reads a process's CPU time and RSS from /proc, for
// benchmarks that measure the real binary (Linux only).
package procstat

import (
	"fmt"
	"os"
	"strconv"
	"strings"
)

// RSSKB is the process's resident set in KiB (0 when unreadable).
func RSSKB(pid int) int {
	raw, _ := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	for _, l := range strings.Split(string(raw), "\n") {
		if strings.HasPrefix(l, "VmRSS:") {
			v, _ := strconv.Atoi(strings.Fields(l)[1])
			return v
		}
	}
	return 0
}

// CPUSeconds is the process's user+system CPU time.
func CPUSeconds(pid int) (float64, error) {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	f := strings.Fields(string(raw[strings.LastIndexByte(string(raw), ')')+2:]))
	ut, _ := strconv.ParseFloat(f[11], 64)
	st, _ := strconv.ParseFloat(f[12], 64)
	return (ut + st) / 100, nil // USER_HZ
}
