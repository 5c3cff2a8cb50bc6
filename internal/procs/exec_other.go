//go:build !unix

package procs

// execve is nil where a process cannot replace itself: the node runs
// with the runtime's default sysmon.
var execve func(path string, argv, env []string) error
