//go:build !unix

package procs

// OpenFileLimit is 0 (unknown) where there is no getrlimit.
func OpenFileLimit() uint64 { return 0 }
