//go:build unix

package procs

import "syscall"

// OpenFileLimit is the process's soft limit on descriptors (0: unknown).
// Go raises the soft limit to the hard one as a program starts, so this
// is what the process can open. The servers that accept connections
// (DNS over TCP and TLS, the edge proxy) size their caps from it.
func OpenFileLimit() uint64 {
	var r syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &r); err != nil {
		return 0
	}
	return uint64(r.Cur)
}
