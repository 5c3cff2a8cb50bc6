package proxy

import (
	"io"
	"net"
	"sync"
	"time"
)

// Timeouts between operations, not over a whole exchange (as nginx's
// proxy_read_timeout and send_timeout): fasthttp sets one deadline per
// exchange, which would cut a download that takes longer than the
// timeout however steadily it flows. These wrappers move the deadline
// past now at each operation, so a peer that makes no progress for the
// timeout is still cut, and one that keeps going never is.

// betweenReads is an upstream connection whose read deadline is
// UpstreamTimeout past its last read: an upstream silent that long
// before its response head is a 504, in the middle of a body the body is
// cut.
type betweenReads struct {
	net.Conn
	timeout time.Duration
}

func (c *betweenReads) Read(b []byte) (int, error) {
	if err := c.Conn.SetReadDeadline(time.Now().Add(c.timeout)); err != nil {
		return 0, err
	}
	return c.Conn.Read(b)
}

// betweenWrites is a listener whose client connections have their write
// deadline WriteTimeout past their last write: a client that reads
// nothing for that long is cut, a slow one that keeps reading is not.
// (The read side keeps fasthttp's per-request ReadTimeout: a request head
// must arrive whole within it, whatever its pace.)
type betweenWrites struct {
	net.Listener
	timeout time.Duration
}

func (l betweenWrites) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &writeDeadlineConn{Conn: c, timeout: l.timeout}, nil
}

type writeDeadlineConn struct {
	net.Conn
	timeout time.Duration
}

func (c *writeDeadlineConn) Write(b []byte) (int, error) {
	if err := c.Conn.SetWriteDeadline(time.Now().Add(c.timeout)); err != nil {
		return 0, err
	}
	return c.Conn.Write(b)
}

// ReadFrom keeps the connection an io.ReaderFrom, as the *net.TCPConn it
// wraps is: fasthttp's bufio writer hands a streamed body to ReadFrom,
// which writes each piece as it is read. Without it the writer would
// hold up to a buffer's worth of what the upstream sent until more came
// (the tail of a body whose upstream pauses would wait for the pause to
// end). Each piece goes through Write, so the deadline moves with it.
func (c *writeDeadlineConn) ReadFrom(r io.Reader) (int64, error) {
	bp := copyBufs.Get().(*[]byte)
	defer copyBufs.Put(bp)
	return io.CopyBuffer(writeOnly{c}, r, *bp)
}

// writeOnly hides ReadFrom from io.CopyBuffer (which would call it back).
type writeOnly struct{ io.Writer }

var copyBufs = sync.Pool{New: func() any { b := make([]byte, 32<<10); return &b }}
