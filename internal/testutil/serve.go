package testutil

import (
	"net"
	"testing"
)

// ServeTCP listens on 127.0.0.1:0 until the test ends and hands each
// accepted connection to handle in its own goroutine, closing it when
// handle returns; it returns the listening address.
func ServeTCP(t testing.TB, handle func(net.Conn)) *net.TCPAddr {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				handle(c)
			}()
		}
	}()
	return ln.Addr().(*net.TCPAddr)
}
