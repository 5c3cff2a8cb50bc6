//go:build !linux

package plugin

import (
	"sync/atomic"
	"syscall"
)

// handlerAttr starts a handler in a process group of its own; only
// Linux contains its children further (contain_linux.go).
func handlerAttr() (*syscall.SysProcAttr, bool) {
	return &syscall.SysProcAttr{Setpgid: true}, false
}

func mayBeRefusedNamespaces(error) bool { return false }

// uncontained is never read here: handlers are never contained.
var uncontained atomic.Bool
