package testutil

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"testing"
)

// ServeTCP listens on 127.0.0.1:0 until the test ends and hands each
// accepted connection to handle (Accept); it returns the listening
// address.
func ServeTCP(t testing.TB, handle func(net.Conn)) *net.TCPAddr {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go Accept(ln, handle)
	return ln.Addr().(*net.TCPAddr)
}

// Accept hands each connection ln accepts to handle in its own
// goroutine, closing it when handle returns, until ln is closed.
func Accept(ln net.Listener, handle func(net.Conn)) {
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
}

// Echo writes back every byte c reads until the peer half-closes (a
// handler for Accept and ServeTCP).
func Echo(c net.Conn) { _, _ = io.Copy(c, c) }

// ReadRequests reads HTTP/1.1 requests off c one after another and hands
// each to answer, which writes its answer to c as raw bytes (an upstream
// written by hand, in a handler for Accept and ServeTCP); it returns
// when a read fails or answer returns false.
func ReadRequests(c net.Conn, answer func(*http.Request) bool) {
	br := bufio.NewReader(c)
	for {
		req, err := http.ReadRequest(br)
		if err != nil || !answer(req) {
			return
		}
	}
}
