//go:build race

package proxy

// raceBuild: the race detector makes buffers passed to system calls
// escape to the heap, so allocation counts do not hold there.
const raceBuild = true
