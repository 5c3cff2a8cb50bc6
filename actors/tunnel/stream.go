package tunnel

import (
	"errors"
	"net"
	"time"

	"github.com/quic-go/quic-go"

	"peerdns/transport"
)

// transport.Stream is io.ReadWriteCloser + SetDeadline, and its Close
// means different things underneath: quic-go's Stream.Close ends the send
// side only (a FIN; reads go on), while the in-memory twin's net.Pipe
// Close ends both. A tunnel needs both operations by name — "no more
// bytes from me" (half-close) and "tear it down now" (reset) — so this
// file asks the concrete stream for them. It goes away once
// transport.Stream has CloseWrite and an abort of its own.

// errNoHalfClose: the stream cannot end its send side alone (net.Pipe).
var errNoHalfClose = errors.New("stream cannot half-close")

// codeTunnelAborted is the QUIC stream error code of a tunnel connection
// torn down because its other side failed.
const codeTunnelAborted quic.StreamErrorCode = 0x20

// streamCloseWrite sends the end of the stream (FIN) and keeps reading.
func streamCloseWrite(s transport.Stream) error {
	switch s := s.(type) {
	case interface{ CloseWrite() error }:
		return s.CloseWrite()
	case *quic.Stream:
		return s.Close() // quic-go: Close ends the send direction only
	}
	return errNoHalfClose
}

// streamAbort ends both directions at once: a QUIC stream is reset both
// ways (the peer's reads and writes fail, so it tears down its side too);
// other streams are unblocked by an expired deadline and closed.
func streamAbort(s transport.Stream) {
	if q, ok := s.(*quic.Stream); ok {
		q.CancelWrite(codeTunnelAborted)
		q.CancelRead(codeTunnelAborted)
		return
	}
	_ = s.SetDeadline(time.Unix(1, 0))
	_ = s.Close()
}

// streamClose closes a stream whose two directions ended normally.
func streamClose(s transport.Stream) {
	if q, ok := s.(*quic.Stream); ok {
		_ = q.Close()
		// A no-op when the peer's FIN was read already; otherwise tells
		// the peer we stopped reading, so the stream is freed now.
		q.CancelRead(codeTunnelAborted)
		return
	}
	_ = s.Close()
}

// tcpAbort resets a TCP connection (RST instead of FIN), so the local
// program sees the tunnel fail instead of a clean end of data.
func tcpAbort(c net.Conn) {
	if t, ok := c.(*net.TCPConn); ok {
		_ = t.SetLinger(0)
	}
	_ = c.Close()
}
