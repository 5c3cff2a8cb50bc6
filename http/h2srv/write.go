package h2srv

import (
	"crypto/tls"
	"io"
	"net"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// Frame types and flags as written (RFC 9113 §6).
const (
	frameData         = 0x0
	frameHeaders      = 0x1
	frameRSTStream    = 0x3
	frameSettings     = 0x4
	framePing         = 0x6
	frameGoAway       = 0x7
	frameWindowUpdate = 0x8
	frameContinuation = 0x9

	flagEndStream  = 0x1
	flagAck        = 0x1
	flagEndHeaders = 0x4
)

const (
	initialWindow   = 65535
	maxWindow       = 1<<31 - 1
	minMaxFrameSize = 1 << 14
	maxMaxFrameSize = 1<<24 - 1

	// maxPending bounds the output waiting for the writer that a
	// stream may add to: past it, writing streams wait for room.
	maxPending = 256 << 10
	// maxDataFrame bounds a DATA frame's payload whatever frame size
	// the client allows: a stream appends a frame whole once the
	// pending output is under maxPending, and with frames of up to
	// 2^24-1 bytes one large Write would sit in the pending output all
	// at once, past the pools' buffers (bigOutput), while the client
	// does not read. 16 KiB is the frame size every client takes.
	maxDataFrame = minMaxFrameSize
	// maxControl bounds the control frames (PING and SETTINGS ACKs,
	// RST_STREAM, WINDOW_UPDATE; and 431 answers) the reader queues while the writer
	// cannot write them: past it the client reads too little of what it
	// asks for, and the connection is closed (ENHANCE_YOUR_CALM).
	maxControl = 10000
)

// writeLoop is the connection's one writer: it takes everything the
// reader and the handlers appended to pending since its last wake-up and
// writes it in one Write (one TLS record run, one system call). It
// closes the connection once closing is set and the output is drained.
func (c *conn) writeLoop() {
	defer close(c.writerDone)
	c.mu.Lock()
	for {
		for len(c.pending) == 0 && !c.closing {
			c.wcond.Wait()
		}
		if len(c.pending) == 0 {
			break
		}
		if c.running > 1 && len(c.pending) < 16<<10 && !c.closing {
			// Other handlers are running: let them add their frames,
			// so that one Write carries several streams' answers. Under
			// load this turns about one system call per response into
			// one per several.
			c.mu.Unlock()
			runtime.Gosched()
			c.mu.Lock()
		}
		buf := c.pending
		c.pending = c.spare[:0]
		c.spare = nil
		c.ctrl = 0
		c.mu.Unlock()
		c.srv.writes.Add(1)
		_, err := c.nc.Write(buf)
		c.mu.Lock()
		if len(c.streams) > 0 && c.spare == nil && cap(buf) == smallOutput {
			c.spare = buf[:0]
		} else {
			// Back to the shared pools: an idle connection holds no
			// output buffer.
			putOutput(buf)
		}
		if c.waiters > 0 {
			c.cond.Broadcast()
		}
		if err != nil {
			c.werr = err
			c.closing = true
			c.failLocked()
			c.pending = c.pending[:0]
			break
		}
	}
	linger := c.linger && c.werr == nil
	c.mu.Unlock()
	if linger {
		lingerClose(c.nc)
		return
	}
	closeConn(c.nc)
}

// lingerTime is how long a connection ended by an error of the client's
// is read and dropped after its GOAWAY went (x/net's server waits as
// long before it closes).
const lingerTime = time.Second

// maxLingering bounds the connections lingering at once (lingerClose),
// over all servers: past it a connection ended for an error closes at
// once, its client reading a reset perhaps, as a flood of failing
// clients would otherwise each hold a connection and a goroutine for
// lingerTime. An atomic so a test can lower it.
var maxLingering atomic.Int64

func init() { maxLingering.Store(1024) }

// lingering counts the connections lingering now.
var lingering atomic.Int64

// lingerClose closes nc after an error GOAWAY. The client may have
// sent more before it read the GOAWAY; closed with that unread, the
// connection would be reset by the kernel, which throws away what still
// waits in the send buffer (behind a client that reads slowly: the
// GOAWAY itself), so the client would read a reset instead of why. So
// what comes is read and dropped (below TLS) until the client closes
// too or lingerTime passes, the sending side ended first where the
// connection can (a FIN after what is queued). It runs on the writer,
// once the reader has stopped: a connection ended so costs at most
// lingerTime more of its goroutines, and at most maxLingering linger at
// once.
func lingerClose(nc net.Conn) {
	if lingering.Add(1) > maxLingering.Load() {
		lingering.Add(-1)
		closeConn(nc)
		return
	}
	defer lingering.Add(-1)
	raw := nc
	if tc, ok := nc.(*tls.Conn); ok {
		raw = tc.NetConn()
	}
	if cw, ok := raw.(interface{ CloseWrite() error }); ok {
		_ = cw.CloseWrite()
	}
	_ = raw.SetReadDeadline(time.Now().Add(lingerTime))
	_, _ = io.Copy(io.Discard, raw)
	closeConn(nc)
}

// closeConn closes nc within a second. A *tls.Conn's Close first writes
// its close_notify alert under a write deadline of its own (five
// seconds, replacing the connection's): to a client that reads nothing
// that would hold the connection's end, and Server.Close's loop over
// its connections, five seconds each. The connection under TLS is closed
// after a second whatever became of the alert.
func closeConn(nc net.Conn) {
	if tc, ok := nc.(*tls.Conn); ok {
		t := time.AfterFunc(time.Second, func() { _ = tc.NetConn().Close() })
		defer t.Stop()
	}
	_ = nc.Close()
}

// failLocked makes every wait on the connection end: handlers blocked
// on windows, room or request bodies see the connection gone.
func (c *conn) failLocked() {
	if c.closed {
		return
	}
	c.closed = true
	for _, s := range c.streams {
		s.cond.Broadcast()
	}
	c.cond.Broadcast()
	c.wcond.Signal()
}

func (c *conn) appendFrameHeader(n int, typ, flags byte, id uint32) {
	if len(c.pending) == 0 {
		c.wcond.Signal()
	}
	c.pending = append(c.pending, byte(n>>16), byte(n>>8), byte(n), typ, flags,
		byte(id>>24)&0x7f, byte(id>>16), byte(id>>8), byte(id))
}

func appendUint32(b []byte, v uint32) []byte {
	return append(b, byte(v>>24), byte(v>>16), byte(v>>8), byte(v))
}

func (c *conn) controlLocked() { c.ctrl++ }

func (c *conn) writeSettingsLocked() {
	cfg := &c.srv.cfg
	settings := [...]struct {
		id http2.SettingID
		v  uint32
	}{
		{http2.SettingMaxConcurrentStreams, cfg.MaxConcurrentStreams},
		{http2.SettingInitialWindowSize, cfg.StreamWindow},
		{http2.SettingMaxFrameSize, cfg.MaxReadFrameSize},
		{http2.SettingMaxHeaderListSize, cfg.MaxHeaderListSize},
		{http2.SettingEnablePush, 0},
	}
	c.appendFrameHeader(6*len(settings), frameSettings, 0, 0)
	for _, s := range settings {
		c.pending = append(c.pending, byte(s.id>>8), byte(s.id))
		c.pending = appendUint32(c.pending, s.v)
	}
}

func (c *conn) writeSettingsAckLocked() {
	c.controlLocked()
	c.appendFrameHeader(0, frameSettings, flagAck, 0)
}

func (c *conn) writePingAckLocked(data [8]byte) {
	c.controlLocked()
	c.appendFrameHeader(8, framePing, flagAck, 0)
	c.pending = append(c.pending, data[:]...)
}

func (c *conn) writeWindowUpdateLocked(id uint32, n uint32) {
	c.controlLocked()
	c.appendFrameHeader(4, frameWindowUpdate, 0, id)
	c.pending = appendUint32(c.pending, n)
}

func (c *conn) writeRSTLocked(id uint32, code http2.ErrCode) {
	c.controlLocked()
	c.resetIDs[c.resetNext%uint32(len(c.resetIDs))] = id
	c.resetNext++
	c.appendFrameHeader(4, frameRSTStream, 0, id)
	c.pending = appendUint32(c.pending, uint32(code))
}

func (c *conn) writeGoAwayLocked(last uint32, code http2.ErrCode) {
	c.goAwayID = last
	c.appendFrameHeader(8, frameGoAway, 0, 0)
	c.pending = appendUint32(c.pending, last)
	c.pending = appendUint32(c.pending, uint32(code))
}

func (c *conn) writeDataLocked(id uint32, p []byte, end bool) {
	var flags byte
	if end {
		flags = flagEndStream
	}
	if need := len(c.pending) + 9 + len(p); need > cap(c.pending) {
		// Output grows in two steps, not by doubling: a buffer of
		// smallOutput (kept between writes), then for a burst one of
		// bigOutput from the shared pool.
		old := c.pending
		if need <= smallOutput {
			c.pending = append(getOutput(&smallPool), old...)
		} else {
			c.pending = append(getOutput(&bigPool), old...)
		}
		putOutput(old)
	}
	c.appendFrameHeader(len(p), frameData, flags, id)
	c.pending = append(c.pending, p...)
}

// staticStatus is code's entry in the HPACK static table (RFC 7541
// Appendix A) as the one byte that sends it, if it has one.
func staticStatus(code int) (byte, bool) {
	switch code {
	case 200:
		return 0x88, true
	case 204:
		return 0x89, true
	case 206:
		return 0x8a, true
	case 304:
		return 0x8b, true
	case 400:
		return 0x8c, true
	case 404:
		return 0x8d, true
	case 500:
		return 0x8e, true
	}
	return 0, false
}

// writeStatus starts a header block with :status code.
func (c *conn) writeStatus(code int) {
	if b, ok := staticStatus(code); ok && !c.encResized {
		// The encoder is bypassed only when it has no dynamic table
		// size update to put first in the block.
		c.hbuf.WriteByte(b)
		return
	}
	c.encResized = false
	c.writeField(":status", statusString(code))
}

// writeField adds one field to the header block being encoded in hbuf.
func (c *conn) writeField(name, value string) {
	_ = c.enc.WriteField(hpack.HeaderField{Name: name, Value: value})
}

// writeHeaderBlockLocked frames the header block encoded in hbuf as
// HEADERS and, past the client's frame size, CONTINUATION frames.
func (c *conn) writeHeaderBlockLocked(id uint32, end bool) {
	block := c.hbuf.Bytes()
	max := int(c.peerMaxFrame)
	typ := byte(frameHeaders)
	for {
		n := min(len(block), max)
		var flags byte
		if n == len(block) {
			flags |= flagEndHeaders
		}
		if end && typ == frameHeaders {
			flags |= flagEndStream
		}
		c.appendFrameHeader(n, typ, flags, id)
		c.pending = append(c.pending, block[:n]...)
		block = block[n:]
		if flags&flagEndHeaders != 0 {
			break
		}
		typ = frameContinuation
	}
	c.hbuf.Reset()
}

// Output buffers come from two shared pools: smallOutput for the
// answers of a wake-up, bigOutput for a burst (a large body). A busy
// connection keeps one small buffer between writes; an idle one holds
// none.
const (
	smallOutput = 64 << 10
	bigOutput   = maxPending + 64<<10
)

var (
	smallPool = sync.Pool{New: func() any { b := make([]byte, 0, smallOutput); return &b }}
	bigPool   = sync.Pool{New: func() any { b := make([]byte, 0, bigOutput); return &b }}
)

func getOutput(p *sync.Pool) []byte { return (*p.Get().(*[]byte))[:0] }

// putOutput gives b back to its pool, unless it is of neither size.
func putOutput(b []byte) {
	switch cap(b) {
	case smallOutput:
		b = b[:0]
		smallPool.Put(&b)
	case bigOutput:
		b = b[:0]
		bigPool.Put(&b)
	}
}
