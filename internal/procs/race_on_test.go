//go:build race

package procs

// raceBuild: the race detector makes buffers passed to system calls
// escape to the heap, so allocation counts do not hold there.
const raceBuild = true
