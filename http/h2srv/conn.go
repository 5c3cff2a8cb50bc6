package h2srv

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

const clientPreface = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"

// maxStreamErrors bounds the frames a client may send that are a
// stream error, refused by the Framer (a WINDOW_UPDATE of zero, a
// malformed header field, ...) or by the server (a malformed request,
// DATA on a closed stream, a window overrun, ...), over a connection's
// life: each costs a reset in answer, and past the bound the client is
// not a client that erred (CVE-2019-9514). Streams refused for the
// concurrency limit, and header lists over the limit, are not counted.
const maxStreamErrors = 1000

// maxEmptyData bounds the DATA frames without payload and without
// END_STREAM a client may send in a row (CVE-2019-9518).
const maxEmptyData = 100

// conn is one HTTP/2 connection. mu guards every field below it; the
// reader (serve) and the handlers take it for each frame they handle
// or write.
type conn struct {
	srv      *Server
	nc       net.Conn
	h        http.Handler
	ctx      context.Context
	cancel   context.CancelFunc
	fr       *http2.Framer
	guard    *contGuard
	br       *bufio.Reader
	remote   string
	tlsState *tls.ConnectionState

	pool       *workerPool
	writerDone chan struct{}
	idleTimer  *time.Timer

	mu      sync.Mutex
	cond    sync.Cond // handlers wait here for windows and room
	wcond   sync.Cond // the writer waits here for output
	waiters int       // handlers waiting on cond

	pending, spare []byte
	ctrl           int  // control frames queued since the writer took the output
	closing        bool // no more frames: the writer drains, then closes nc
	closed         bool // every wait fails
	werr           error

	enc        *hpack.Encoder
	hbuf       bytes.Buffer
	encResized bool // the encoder may have a table size update to send

	sendWin      int64 // connection send window
	peerInitWin  int64 // client's SETTINGS_INITIAL_WINDOW_SIZE
	peerMaxFrame uint32

	inflow  int64 // bytes the client may still send on the connection
	unacked int64 // bytes consumed, not yet given back by WINDOW_UPDATE

	streams    map[uint32]*stream // streams open on the wire
	maxID      uint32
	running    int       // handlers running, reset streams' included
	queue      []*stream // streams waiting for a handler slot
	goAwaySent bool
	// linger: the connection ends for an error of the client's, and its
	// writer closes it lingering (lingerClose).
	linger     bool
	graceful   bool // close once no stream is left
	emptyData  int
	streamErrs int // touched by the reader only
	// resetIDs are the streams the server reset last: frames the
	// client sent on them before it saw the reset are ignored
	// (RFC 9113 §5.1, "closed"), not taken for protocol errors.
	resetIDs  [32]uint32
	resetNext uint32
	goAwayID  uint32 // the last stream id of the GOAWAY sent
	idleSince time.Time
	connErr   bool
}

func newConn(s *Server, nc net.Conn, h http.Handler, base context.Context) *conn {
	c := &conn{
		srv:          s,
		nc:           nc,
		h:            h,
		remote:       nc.RemoteAddr().String(),
		writerDone:   make(chan struct{}),
		sendWin:      initialWindow,
		peerInitWin:  initialWindow,
		peerMaxFrame: minMaxFrameSize,
		inflow:       int64(s.cfg.ConnWindow),
		streams:      make(map[uint32]*stream),
	}
	c.ctx, c.cancel = context.WithCancel(base)
	c.pool = &s.pools[int(s.nextPool.Add(1))%len(s.pools)]
	c.cond.L = &c.mu
	c.wcond.L = &c.mu
	c.enc = hpack.NewEncoder(&c.hbuf)
	if tc, ok := nc.(*tls.Conn); ok {
		st := tc.ConnectionState()
		c.tlsState = &st
	}
	c.br = bufio.NewReaderSize(nc, 16<<10)
	c.guard = &contGuard{r: c.br, limit: contLimit(s.cfg.MaxHeaderListSize)}
	c.fr = http2.NewFramer(io.Discard, c.guard)
	c.fr.ReadMetaHeaders = hpack.NewDecoder(4096, nil)
	c.fr.MaxHeaderListSize = s.cfg.MaxHeaderListSize
	c.fr.SetMaxReadFrameSize(s.cfg.MaxReadFrameSize)
	c.fr.SetReuseFrames()
	return c
}

// connError is a connection error: GOAWAY with code, then close.
type connError struct {
	code http2.ErrCode
	kind string
}

func (e connError) Error() string {
	return fmt.Sprintf("http2: connection error %v: %s", e.code, e.kind)
}

func (c *conn) serve() error {
	cfg := &c.srv.cfg
	go c.writeLoop()
	if c.tlsState != nil && !adequateTLS(c.tlsState) {
		// RFC 9113 §9.2.1: a connection error, before anything else.
		err := c.failConn(connError{http2.ErrCodeInadequateSecurity, "inadequate_security"})
		_ = c.nc.SetWriteDeadline(time.Now().Add(time.Second))
		<-c.writerDone
		return err
	}
	c.mu.Lock()
	c.writeSettingsLocked()
	if d := int64(cfg.ConnWindow) - initialWindow; d > 0 {
		c.appendFrameHeader(4, frameWindowUpdate, 0, 0)
		c.pending = appendUint32(c.pending, uint32(d))
	}
	c.mu.Unlock()

	err := c.readPreface()
	if err == nil {
		// The idle timer starts once the preface is in: before, the
		// preface timeout is the one that counts.
		c.mu.Lock()
		c.idleSince = time.Now()
		if cfg.IdleTimeout > 0 {
			// Set under mu, which onIdle takes before it looks at it.
			c.idleTimer = time.AfterFunc(cfg.IdleTimeout, c.onIdle)
		}
		c.mu.Unlock()
		err = c.readLoop()
	}
	c.mu.Lock()
	if c.idleTimer != nil {
		c.idleTimer.Stop()
	}
	c.closing = true
	c.failLocked()
	for _, s := range c.streams {
		s.resetLocked(errConnClosed)
	}
	for _, s := range c.queue {
		s.cancel(nil)
	}
	c.queue = nil
	c.mu.Unlock()
	c.cancel()
	// The writer gets a second to deliver the last frames (a GOAWAY) to
	// a client that may not read.
	_ = c.nc.SetWriteDeadline(time.Now().Add(time.Second))
	<-c.writerDone
	var ce connError
	if errors.As(err, &ce) && ce.code == http2.ErrCodeNo {
		return nil
	}
	if errors.Is(err, io.EOF) || errors.Is(err, net.ErrClosed) || c.gracefulDone() {
		return nil
	}
	return err
}

// adequateTLS reports whether st meets RFC 9113 §9.2: TLS 1.2 or later,
// and over TLS 1.2 a cipher suite with an ephemeral key exchange and an
// AEAD cipher (Appendix A prohibits every other).
func adequateTLS(st *tls.ConnectionState) bool {
	switch {
	case st.Version < tls.VersionTLS12:
		return false
	case st.Version > tls.VersionTLS12:
		return true
	}
	name := tls.CipherSuiteName(st.CipherSuite)
	ephemeral := strings.HasPrefix(name, "TLS_ECDHE_") || strings.HasPrefix(name, "TLS_DHE_")
	aead := strings.Contains(name, "_GCM_") || strings.Contains(name, "_CHACHA20_POLY1305") || strings.Contains(name, "_CCM")
	return ephemeral && aead
}

func (c *conn) gracefulDone() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.graceful && len(c.streams) == 0
}

func (c *conn) readPreface() error {
	cfg := &c.srv.cfg
	_ = c.nc.SetReadDeadline(time.Now().Add(cfg.PrefaceTimeout))
	var buf [len(clientPreface)]byte
	if n, err := io.ReadFull(c.br, buf[:]); err != nil {
		err = fmt.Errorf("http2: reading the client preface: %w", err)
		if n == 0 && closedUnused(err) {
			return err // not the protocol's error: see closedUnused
		}
		return c.prefaceError(err)
	}
	if string(buf[:]) != clientPreface {
		return c.prefaceError(errors.New("http2: bad client preface"))
	}
	f, err := c.fr.ReadFrame()
	if err != nil {
		return c.prefaceError(fmt.Errorf("http2: reading the client's first SETTINGS: %w", err))
	}
	sf, ok := f.(*http2.SettingsFrame)
	if !ok || sf.IsAck() {
		return c.prefaceError(fmt.Errorf("http2: the client's first frame is %v, not SETTINGS", f.Header().Type))
	}
	_ = c.nc.SetReadDeadline(time.Time{})
	if err := c.onSettings(sf); err != nil {
		return c.failConn(err)
	}
	return nil
}

func (c *conn) prefaceError(err error) error {
	c.mu.Lock()
	byServer := c.closing // Shutdown or Close, not the client
	c.mu.Unlock()
	if byServer {
		return nil
	}
	c.srv.countError("preface")
	if errors.Is(err, os.ErrDeadlineExceeded) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		c.reportConnErr(err)
		return err
	}
	c.mu.Lock()
	c.writeGoAwayLocked(0, http2.ErrCodeProtocol)
	c.goAwaySent = true
	c.linger = true
	c.mu.Unlock()
	c.reportConnErr(err)
	return err
}

// closedUnused reports whether a connection that sent nothing yet ended
// by its client's close (an end of stream, or a reset: a client that
// closes with our SETTINGS unread makes its kernel send one). Browsers
// do this all the time: Chromium opens spare connections beside the one
// it uses (for DNS over HTTPS, a handful at once) and closes those
// unused. Such a connection broke no rule of the protocol, so it is
// neither a protocol error nor a connection error (CountError,
// ConnError), as net/http's HTTP/2 server does not count it either; a
// client that sent part of the preface, or nothing until
// PrefaceTimeout, still is.
func closedUnused(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, syscall.ECONNRESET)
}

func (c *conn) reportConnErr(err error) {
	c.mu.Lock()
	first := !c.connErr
	c.connErr = true
	c.mu.Unlock()
	if first && c.srv.cfg.ConnError != nil {
		c.srv.cfg.ConnError(err)
	}
}

func (c *conn) readLoop() error {
	for {
		f, err := c.fr.ReadFrame()
		if err != nil {
			var se http2.StreamError
			var ce http2.ConnectionError
			switch {
			case errors.As(err, &se):
				if c.guard.lastType() == frameWindowUpdate && c.idle(se.StreamID) {
					// A WINDOW_UPDATE of zero: on an idle stream a
					// connection error, as any frame but HEADERS and
					// PRIORITY there (RFC 9113 §5.1), and no
					// RST_STREAM may name an idle stream (§6.4).
					return c.failConn(connError{http2.ErrCodeProtocol, "window_update_idle"})
				}
				c.streamFault("stream_" + se.Code.String())
				c.streamError(se.StreamID, se.Code)
				if c.streamErrs > maxStreamErrors {
					return c.failConn(connError{http2.ErrCodeEnhanceYourCalm, "stream_error_flood"})
				}
				continue
			case errors.As(err, &ce):
				kind := "frame_" + http2.ErrCode(ce).String()
				if d := c.fr.ErrorDetail(); d != nil {
					kind += ": " + d.Error()
				}
				return c.failConn(connError{http2.ErrCode(ce), kind})
			case errors.Is(err, http2.ErrFrameTooLarge):
				return c.failConn(connError{http2.ErrCodeFrameSize, "frame_too_large"})
			case errors.Is(err, errContinuationFlood):
				return c.failConn(connError{http2.ErrCodeEnhanceYourCalm, "continuation_flood"})
			}
			return err
		}
		if err := c.process(f); err != nil {
			return c.failConn(err)
		}
		if c.streamErrs > maxStreamErrors {
			return c.failConn(connError{http2.ErrCodeEnhanceYourCalm, "stream_error_flood"})
		}
		c.mu.Lock()
		flood := c.ctrl > maxControl
		c.mu.Unlock()
		if flood {
			return c.failConn(connError{http2.ErrCodeEnhanceYourCalm, "control_flood"})
		}
	}
}

// failConn ends the connection for err: a GOAWAY with its code.
func (c *conn) failConn(err error) error {
	var ce connError
	if !errors.As(err, &ce) {
		return err
	}
	if ce.code != http2.ErrCodeNo {
		c.srv.countError(ce.kind)
	}
	c.mu.Lock()
	if !c.goAwaySent {
		c.goAwaySent = true
		c.writeGoAwayLocked(c.maxID, ce.code)
	}
	c.linger = ce.code != http2.ErrCodeNo
	c.closing = true
	c.wcond.Signal()
	c.mu.Unlock()
	if ce.code != http2.ErrCodeNo {
		c.reportConnErr(err)
	}
	return err
}

// streamFault counts a stream error of the client's (kind), one the
// Framer refused or the server found (a malformed request, a frame on
// a closed stream, a window overrun, ...), toward maxStreamErrors. Only
// the reader calls it.
func (c *conn) streamFault(kind string) {
	c.srv.countError(kind)
	c.streamErrs++
}

// streamError resets a stream for a protocol error of its own.
func (c *conn) streamError(id uint32, code http2.ErrCode) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if id > c.maxID && id%2 == 1 {
		c.maxID = id
	}
	if s := c.streams[id]; s != nil {
		s.resetLocked(errStreamReset)
		c.closeStreamLocked(s)
	}
	c.writeRSTLocked(id, code)
}

func (c *conn) process(f http2.Frame) error {
	switch f := f.(type) {
	case *http2.MetaHeadersFrame:
		return c.onHeaders(f)
	case *http2.DataFrame:
		return c.onData(f)
	case *http2.SettingsFrame:
		return c.onSettings(f)
	case *http2.PingFrame:
		if !f.IsAck() {
			c.mu.Lock()
			c.writePingAckLocked(f.Data)
			c.mu.Unlock()
		}
		return nil
	case *http2.WindowUpdateFrame:
		return c.onWindowUpdate(f)
	case *http2.RSTStreamFrame:
		return c.onRST(f)
	case *http2.PriorityFrame:
		if f.StreamDep == f.StreamID {
			c.streamFault("priority_self")
			c.streamError(f.StreamID, http2.ErrCodeProtocol)
		}
		return nil
	case *http2.GoAwayFrame:
		c.mu.Lock()
		c.graceful = true
		c.maybeCloseLocked()
		c.mu.Unlock()
		return nil
	case *http2.PushPromiseFrame:
		return connError{http2.ErrCodeProtocol, "push_promise"}
	case *http2.ContinuationFrame:
		// The Framer joins CONTINUATION frames to their HEADERS; one
		// that reaches here follows no header block.
		return connError{http2.ErrCodeProtocol, "continuation"}
	}
	return nil // unknown frame types are ignored (RFC 9113 §4.1)
}

func (c *conn) onSettings(f *http2.SettingsFrame) error {
	if f.IsAck() {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	// The streams' windows move once, by the frame's last
	// INITIAL_WINDOW_SIZE: a frame full of them (2,730 in 16 KiB) would
	// otherwise walk every open stream for each.
	initWin := c.peerInitWin
	err := f.ForeachSetting(func(s http2.Setting) error {
		switch s.ID {
		case http2.SettingHeaderTableSize:
			c.enc.SetMaxDynamicTableSizeLimit(s.Val)
			c.encResized = true
		case http2.SettingEnablePush:
			if s.Val > 1 {
				return connError{http2.ErrCodeProtocol, "settings_enable_push"}
			}
		case http2.SettingInitialWindowSize:
			if s.Val > maxWindow {
				return connError{http2.ErrCodeFlowControl, "settings_window_size"}
			}
			initWin = int64(s.Val)
		case http2.SettingMaxFrameSize:
			if s.Val < minMaxFrameSize || s.Val > maxMaxFrameSize {
				return connError{http2.ErrCodeProtocol, "settings_frame_size"}
			}
			c.peerMaxFrame = s.Val
		}
		return nil
	})
	if err != nil {
		return err
	}
	if d := initWin - c.peerInitWin; d != 0 {
		c.peerInitWin = initWin
		for _, st := range c.streams {
			st.sendWin += d
			if st.sendWin > maxWindow {
				return connError{http2.ErrCodeFlowControl, "settings_window_overflow"}
			}
		}
	}
	c.writeSettingsAckLocked()
	if c.waiters > 0 {
		c.cond.Broadcast()
	}
	return nil
}

func (c *conn) onWindowUpdate(f *http2.WindowUpdateFrame) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if f.StreamID == 0 {
		c.sendWin += int64(f.Increment)
		if c.sendWin > maxWindow {
			return connError{http2.ErrCodeFlowControl, "window_overflow"}
		}
	} else {
		if c.idleLocked(f.StreamID) {
			return connError{http2.ErrCodeProtocol, "window_update_idle"}
		}
		s := c.streams[f.StreamID]
		if s == nil {
			return nil
		}
		s.sendWin += int64(f.Increment)
		if s.sendWin > maxWindow {
			c.streamFault("stream_window_overflow")
			s.resetLocked(errStreamReset)
			c.closeStreamLocked(s)
			c.writeRSTLocked(s.id, http2.ErrCodeFlowControl)
			return nil
		}
	}
	if c.waiters > 0 {
		c.cond.Broadcast()
	}
	return nil
}

func (c *conn) onRST(f *http2.RSTStreamFrame) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.idleLocked(f.StreamID) {
		return connError{http2.ErrCodeProtocol, "rst_idle"}
	}
	s := c.streams[f.StreamID]
	if s == nil {
		return nil
	}
	s.resetLocked(errClientReset)
	c.closeStreamLocked(s)
	return nil
}

func (c *conn) onData(f *http2.DataFrame) error {
	n := int64(f.Length)
	c.mu.Lock()
	defer c.mu.Unlock()
	if n > c.inflow {
		return connError{http2.ErrCodeFlowControl, "conn_flow"}
	}
	c.inflow -= n
	s := c.streams[f.StreamID]
	if s == nil || s.recvDone {
		c.giveBackLocked(n)
		if c.idleLocked(f.StreamID) {
			return connError{http2.ErrCodeProtocol, "data_idle"}
		}
		if s == nil && c.ignoredLocked(f.StreamID) {
			return nil
		}
		c.streamFault("data_closed")
		if s != nil {
			s.resetLocked(errStreamReset)
			c.closeStreamLocked(s)
		}
		c.writeRSTLocked(f.StreamID, http2.ErrCodeStreamClosed)
		return nil
	}
	if n > s.inflow {
		c.giveBackLocked(n)
		c.streamFault("stream_flow")
		s.resetLocked(errStreamReset)
		c.closeStreamLocked(s)
		c.writeRSTLocked(s.id, http2.ErrCodeFlowControl)
		return nil
	}
	s.inflow -= n
	data := f.Data()
	if pad := n - int64(len(data)); pad > 0 {
		// Padding is given back at once.
		c.giveBackLocked(pad)
		s.giveBackLocked(pad)
	}
	if len(data) == 0 && !f.StreamEnded() {
		c.emptyData++
		if c.emptyData > maxEmptyData {
			return connError{http2.ErrCodeEnhanceYourCalm, "empty_data_flood"}
		}
	} else if len(data) > 0 {
		c.emptyData = 0
	}
	s.recvd += int64(len(data))
	if s.declLen >= 0 && (s.recvd > s.declLen || f.StreamEnded() && s.recvd != s.declLen) {
		c.giveBackLocked(int64(len(data)))
		c.streamFault("content_length")
		// The one reset whose cause the handler sees (context.Cause):
		// net/http's Transport returns a cancelled request's cause as
		// its error, and a handler that proxies tells a client that
		// left by context.Canceled, so other resets give none.
		s.cancel(ErrBadLength)
		s.resetLocked(ErrBadLength)
		c.closeStreamLocked(s)
		c.writeRSTLocked(s.id, http2.ErrCodeProtocol)
		return nil
	}
	if s.bodyClosed {
		c.giveBackLocked(int64(len(data)))
	} else if len(data) > 0 {
		if s.roff > 0 && len(s.rbuf)+len(data) > cap(s.rbuf) {
			// What was read is dropped before the buffer grows, so it
			// stays within the stream window.
			s.rbuf = s.rbuf[:copy(s.rbuf, s.rbuf[s.roff:])]
			s.roff = 0
		}
		s.rbuf = append(s.rbuf, data...)
	}
	if f.StreamEnded() {
		s.recvDone = true
		if s.localDone {
			c.closeStreamLocked(s)
		}
	}
	s.cond.Broadcast()
	return nil
}

// idle is idleLocked for a caller without mu.
func (c *conn) idle(id uint32) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.idleLocked(id)
}

// idleLocked reports whether stream id is idle (RFC 9113 §5.1): past
// the client's last, or even-numbered, as the server opens none.
func (c *conn) idleLocked(id uint32) bool {
	return id > c.maxID || id%2 == 0
}

// ignoredLocked reports whether frames on id, a stream no longer open,
// are ignored rather than taken for an error: the client sent them
// before it saw our reset (resetByUs), or on a stream past the last
// one our GOAWAY announced, which was never served (RFC 9113 §6.8).
func (c *conn) ignoredLocked(id uint32) bool {
	return c.resetByUs(id) || c.goAwaySent && id > c.goAwayID
}

// resetByUs reports whether id is among the streams the server reset last.
func (c *conn) resetByUs(id uint32) bool {
	for _, r := range c.resetIDs {
		if r == id {
			return true
		}
	}
	return false
}

// giveBackLocked returns n bytes to the connection's receive window,
// in WINDOW_UPDATEs of at least half the window.
func (c *conn) giveBackLocked(n int64) {
	c.unacked += n
	if c.unacked >= int64(c.srv.cfg.ConnWindow)/2 && !c.closing {
		c.writeWindowUpdateLocked(0, uint32(c.unacked))
		c.inflow += c.unacked
		c.unacked = 0
	}
}

// closeStreamLocked takes s off the wire: it no longer counts against
// the concurrent streams the client may open. A stream still waiting
// for a handler slot (reset by the client or the server) leaves the
// queue too: no handler runs for it, and the queue holds only streams
// open on the wire.
func (c *conn) closeStreamLocked(s *stream) {
	if c.streams[s.id] != s {
		return
	}
	delete(c.streams, s.id)
	if s.queued {
		s.queued = false
		if i := slices.Index(c.queue, s); i >= 0 {
			c.queue = slices.Delete(c.queue, i, i+1)
		}
		s.cancel(nil)
	}
	if len(c.streams) == 0 {
		c.idleSince = time.Now()
	}
	c.maybeCloseLocked()
}

// maybeCloseLocked ends a connection going away once its streams are done.
func (c *conn) maybeCloseLocked() {
	if c.graceful && len(c.streams) == 0 && c.running == 0 && len(c.queue) == 0 {
		c.closing = true
		c.wcond.Signal()
	}
}

func (c *conn) onIdle() {
	idle := c.srv.cfg.IdleTimeout
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closing {
		return
	}
	if len(c.streams) > 0 || c.running > 0 || len(c.queue) > 0 {
		c.idleTimer.Reset(idle)
		return
	}
	if left := idle - time.Since(c.idleSince); left > 0 {
		c.idleTimer.Reset(left)
		return
	}
	if !c.goAwaySent {
		c.goAwaySent = true
		c.writeGoAwayLocked(c.maxID, http2.ErrCodeNo)
	}
	c.graceful = true
	c.maybeCloseLocked()
	// Output still unwritten after IdleTimeout with no stream is a
	// client's that reads nothing: the writer may be blocked in its
	// Write for good, and the reader with it. The last of it (the
	// GOAWAY) gets a second, as at the end of serve.
	_ = c.nc.SetWriteDeadline(time.Now().Add(time.Second))
}

// shutdown sends GOAWAY NO_ERROR and closes the connection once its
// streams are done.
func (c *conn) shutdown() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.goAwaySent {
		c.goAwaySent = true
		c.writeGoAwayLocked(c.maxID, http2.ErrCodeNo)
	}
	c.graceful = true
	c.maybeCloseLocked()
}

// closeNow closes the connection at once; a write blocked on a client
// that does not read is cut by the deadline.
func (c *conn) closeNow() {
	c.mu.Lock()
	c.closing = true
	c.wcond.Signal()
	c.mu.Unlock()
	_ = c.nc.SetWriteDeadline(time.Now())
	closeConn(c.nc)
}
