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

// ListenPair binds UDP and TCP on one free loopback port (the UDP port
// may be taken for TCP by another test's socket, so it tries a few).
func ListenPair(t testing.TB) (net.PacketConn, net.Listener) {
	t.Helper()
	for i := 0; ; i++ {
		pc, err := net.ListenPacket("udp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		ln, err := net.Listen("tcp", pc.LocalAddr().String())
		if err == nil {
			return pc, ln
		}
		pc.Close()
		if i == 20 {
			t.Fatal(err)
		}
	}
}
