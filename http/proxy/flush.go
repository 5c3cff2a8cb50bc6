package proxy

import (
	"crypto/tls"
	"io"
	"net"

	"github.com/valyala/fasthttp"
)

// What an upstream has sent of a response reaches the client while the
// upstream pauses (a progress line, a log tail, the head of a slow
// download), not once a buffer's worth has come:
//
//   - A chunked body already goes chunk by chunk (fasthttp flushes each).
//   - A fixed-length body longer than the server's write buffer gets its
//     head written at once (ImmediateHeaderFlush; on plain HTTP in one
//     system call with the body's first piece when that is already here,
//     headhold.go); fasthttp's writer,
//     empty then, hands the body to the client connection's ReadFrom,
//     which writes each piece as it is read. Without the early head the
//     writer fills its buffer (4 KiB) with the body's first reads and
//     keeps them, head included, until the buffer is full. A body that
//     fits in the buffer goes out with its head in one write:
//     the early head would cost a system call per small response (the
//     edge's hot path), and a body that short is held for at most its own
//     length.
//   - HTTPS connections are io.ReaderFrom too (tlsConn), as the plain ones
//     are (movingDeadlines): without it the writer would pass a body
//     through its 4 KiB buffer, holding up to 4 KiB of it and cutting the
//     rest into 4 KiB TLS records.
//
// TestEdgePassesPiecesAsTheyCome checks all four cases.
const writeBuffer = 4096 // fasthttp.Server's WriteBufferSize default

// flushHeadEarly sets ImmediateHeaderFlush for a streamed response whose
// declared body is longer than the write buffer; on a plain HTTP
// connection the head then waits for the body's first piece if that
// comes at once (headhold.go).
func flushHeadEarly(ctx *fasthttp.RequestCtx, resp *fasthttp.Response) {
	resp.ImmediateHeaderFlush = resp.IsBodyStream() && resp.Header.ContentLength() > writeBuffer
	if resp.ImmediateHeaderFlush {
		if mc, ok := ctx.Conn().(*movingDeadlines); ok {
			mc.holdHead()
		}
	}
}

// tlsConn is a client's TLS connection with ReadFrom (above), and a
// watch on the heads it reads (lfrequest.go).
type tlsConn struct {
	*tls.Conn
	watch headWatch
}

func (c *tlsConn) Read(b []byte) (int, error) {
	if c.watch.open && c.watch.stuck() {
		return 0, errLoneLF
	}
	n, err := c.Conn.Read(b)
	if c.watch.open {
		c.watch.saw(b[:n])
	}
	return n, err
}

func (c *tlsConn) ReadFrom(r io.Reader) (int64, error) {
	bp := copyBufs.Get().(*[]byte)
	defer copyBufs.Put(bp)
	return io.CopyBuffer(writeOnly{c.Conn}, r, *bp)
}

// tlsListener hands out tlsConns.
type tlsListener struct{ net.Listener }

func (l tlsListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &tlsConn{Conn: c.(*tls.Conn)}, nil
}
