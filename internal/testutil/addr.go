package testutil

import (
	"net"
	"testing"
)

// FreeTCPAddr is a loopback TCP address ("127.0.0.1:port") nothing
// listened on a moment ago: for a server a test starts later, or for an
// upstream that is down.
func FreeTCPAddr(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}
