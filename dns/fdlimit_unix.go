//go:build unix

package dns

import "syscall"

// openFileLimit is the process's soft limit on descriptors (0: unknown).
func openFileLimit() uint64 {
	var r syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &r); err != nil {
		return 0
	}
	return uint64(r.Cur)
}
