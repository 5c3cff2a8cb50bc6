//go:build !linux

package plugin

import "syscall"

// handlerAttr starts a handler in a process group of its own; only
// Linux contains its children further (contain_linux.go).
func handlerAttr() (*syscall.SysProcAttr, bool) { return groupAttr(), false }

func mayBeRefusedNamespaces(error) bool { return false }

// noteUncontained is never reached here: no handler is contained.
func noteUncontained() {}

// termDropped: no handler is a namespace's first process here.
func termDropped(int) bool { return false }
