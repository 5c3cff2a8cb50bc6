package tunneltest

import (
	"net"
	"testing"
)

// UDPEcho is a UDP service on 127.0.0.1 that answers each datagram with
// the datagram followed by "|" and the address it came from, so a test
// sees which flow (socket on the tunnel server's side) carried it. It
// stops at the end of the test and returns its address.
func UDPEcho(t testing.TB) *net.UDPAddr {
	t.Helper()
	pc, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	t.Cleanup(func() { pc.Close(); <-done })
	go func() {
		defer close(done)
		buf := make([]byte, 64<<10)
		for {
			n, from, err := pc.ReadFromUDP(buf)
			if err != nil {
				return
			}
			_, _ = pc.WriteToUDP(append(buf[:n:n], "|"+from.String()...), from)
		}
	}()
	return pc.LocalAddr().(*net.UDPAddr)
}

// UDPSocket is a client socket connected to addr, closed at the test's
// end.
func UDPSocket(t testing.TB, addr string) *net.UDPConn {
	t.Helper()
	ra, err := net.ResolveUDPAddr("udp", addr)
	if err != nil {
		t.Fatal(err)
	}
	c, err := net.DialUDP("udp", nil, ra)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}
