//go:build !linux

package dns

import "syscall"

// reusePort is a no-op where we have not wired SO_REUSEPORT; the server
// then opens a single UDP socket.
func reusePort(network, address string, c syscall.RawConn) error { return nil }

const haveReusePort = false
