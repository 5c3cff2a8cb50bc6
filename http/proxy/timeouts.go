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
// timeout however steadily it flows. movingDeadlines moves a deadline
// past now at each operation, so a peer that makes no progress for the
// timeout is still cut, and one that keeps going never is.
//
// Upstream connections move their read deadline (UpstreamTimeout: an
// upstream silent that long before its response head is a 504, in the
// middle of a body the body is cut); client connections move their write
// deadline (WriteTimeout: a client that reads nothing for that long is
// cut, a slow one that keeps reading is not). A client's read side keeps
// fasthttp's per-request ReadTimeout: a request head must arrive whole
// within it, whatever its pace.
type movingDeadlines struct {
	net.Conn
	read, write time.Duration // 0: that side keeps fasthttp's deadline
}

func (c *movingDeadlines) Read(b []byte) (int, error) {
	if c.read > 0 {
		if err := c.Conn.SetReadDeadline(time.Now().Add(c.read)); err != nil {
			return 0, err
		}
	}
	return c.Conn.Read(b)
}

func (c *movingDeadlines) Write(b []byte) (int, error) {
	if c.write > 0 {
		if err := c.Conn.SetWriteDeadline(time.Now().Add(c.write)); err != nil {
			return 0, err
		}
	}
	return c.Conn.Write(b)
}

// ReadFrom keeps the connection an io.ReaderFrom, as the *net.TCPConn it
// wraps is: fasthttp's bufio writer hands a streamed body to ReadFrom,
// which writes each piece as it is read. Without it the writer would
// hold up to a buffer's worth of what the upstream sent until more came
// (the tail of a body whose upstream pauses would wait for the pause to
// end). Each piece goes through Write, so the deadline moves with it.
func (c *movingDeadlines) ReadFrom(r io.Reader) (int64, error) {
	bp := copyBufs.Get().(*[]byte)
	defer copyBufs.Put(bp)
	return io.CopyBuffer(writeOnly{c}, r, *bp)
}

// writeOnly hides ReadFrom from io.CopyBuffer (which would call it back).
type writeOnly struct{ io.Writer }

var copyBufs = sync.Pool{New: func() any { b := make([]byte, 32<<10); return &b }}

// betweenWrites is a listener whose connections move their write
// deadline (above).
type betweenWrites struct {
	net.Listener
	timeout time.Duration
}

func (l betweenWrites) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &movingDeadlines{Conn: c, write: l.timeout}, nil
}
