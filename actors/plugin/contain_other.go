//go:build !linux

package plugin

import "syscall"

// handlerAttr starts a handler in a process group of its own; only
// Linux contains its children further (contain_linux.go).
func handlerAttr() (*syscall.SysProcAttr, bool) { return groupAttr(), false }

func mayBeRefusedNamespaces(error) bool { return false }

// noteUncontained is never reached here: no handler is contained.
func noteUncontained() {}

// groupAttr starts a handler in a process group of its own: a kill of
// the group reaches its children too.
func groupAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{Setpgid: true} }

// termDropped: no handler is a namespace's first process here.
func termDropped(int) bool { return false }
