package tunnel

import (
	"errors"
	"net"

	"peerdns/transport"
)

// The three ways a tunnel ends a stream are transport.Stream's own:
// CloseWrite ("no more bytes from me", a FIN), Close (both directions
// ended normally) and Abort (tear it down now; the peer sees an error).
// The helpers below keep the data path's names for them.

// errNoHalfClose: a local side cannot end its send direction alone (a
// net.Conn that is not TCP); pipe closes it whole instead.
var errNoHalfClose = errors.New("stream cannot half-close")

// streamCloseWrite sends the end of the stream (FIN) and keeps reading.
func streamCloseWrite(s transport.Stream) error { return s.CloseWrite() }

// streamAbort ends both directions at once: the peer's reads and writes
// fail, so it tears down its side too.
func streamAbort(s transport.Stream) { s.Abort() }

// streamClose closes a stream whose two directions ended normally.
func streamClose(s transport.Stream) { _ = s.Close() }

// tcpAbort resets a TCP connection (RST instead of FIN), so the local
// program sees the tunnel fail instead of a clean end of data.
func tcpAbort(c net.Conn) {
	if t, ok := c.(*net.TCPConn); ok {
		_ = t.SetLinger(0)
	}
	_ = c.Close()
}
