package procs

import (
	"sync"
	"syscall"
	"time"
)

// machineIdle is the idle (and iowait) time of all the machine's CPUs so
// far, from the first line of /proc/stat; ok false if that cannot be read.
//
// gopsutil's cpu.Times reads the same line, but allocates a 4 KB reader,
// the file and the line's strings on every call: at the governor's ten
// ticks a second that was over a quarter of everything an otherwise idle
// node allocated. This keeps the file open (one descriptor for the
// process's life), reads it again from its start with pread (the kernel
// makes the text anew for a read at offset 0) into a buffer on the
// stack, and allocates nothing.
func machineIdle() (idle time.Duration, ok bool) {
	statOnce.Do(func() {
		statFD, statErr = syscall.Open("/proc/stat", syscall.O_RDONLY|syscall.O_CLOEXEC, 0)
	})
	if statErr != nil {
		return 0, false
	}
	var buf [512]byte
	n, err := syscall.Pread(statFD, buf[:], 0)
	if err != nil || n <= 0 {
		return 0, false
	}
	return parseStatIdle(buf[:n])
}

var (
	statOnce sync.Once
	statFD   int
	statErr  error
)

// userHz is the unit of /proc/stat's times: USER_HZ, which Linux fixes at
// 100 for what it shows user space whatever the kernel's own tick rate.
const userHz = 100

// parseStatIdle reads the idle and iowait columns (the 4th and 5th
// numbers) of the aggregate "cpu " line that starts /proc/stat. The sum
// wraps (a Duration holds 292 years: summed over hundreds of CPUs that
// is months); the governor only takes differences, which wrapping keeps
// right.
func parseStatIdle(b []byte) (time.Duration, bool) {
	if len(b) < 4 || string(b[:4]) != "cpu " {
		return 0, false
	}
	var sum uint64
	col := 0
	for i := 4; i < len(b) && b[i] != '\n'; {
		if b[i] == ' ' {
			i++
			continue
		}
		var v uint64
		start := i
		for ; i < len(b) && b[i] >= '0' && b[i] <= '9'; i++ {
			v = v*10 + uint64(b[i]-'0')
		}
		if i == start || i-start > 19 || (i < len(b) && b[i] != ' ' && b[i] != '\n') {
			return 0, false
		}
		col++
		if col == 4 || col == 5 {
			sum += v
		}
		if col == 5 {
			return time.Duration(sum * uint64(time.Second/userHz)), true
		}
	}
	return 0, false
}
