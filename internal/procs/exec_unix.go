//go:build unix

package procs

import "syscall"

var execve = syscall.Exec
