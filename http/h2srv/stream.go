package h2srv

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/net/http/httpguts"
	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// ErrBadLength is what a read of a request body whose DATA frames do not
// add up to its content-length returns, and the cause its request's
// context is cancelled with (context.Cause): the stream was reset for
// it (PROTOCOL_ERROR, RFC 9113 §8.1.1), the client's doing.
var ErrBadLength = errors.New("h2srv: request body length differs from its content-length")

var (
	errClientReset  = errors.New("h2srv: stream reset by the client")
	errStreamReset  = errors.New("h2srv: stream reset")
	errConnClosed   = errors.New("h2srv: connection closed")
	errHandlerDone  = errors.New("h2srv: write after the handler returned")
	errWriteTimeout = fmt.Errorf("h2srv: write: %w", os.ErrDeadlineExceeded)
	errReadTimeout  = fmt.Errorf("h2srv: request body: %w", os.ErrDeadlineExceeded)
)

// stream is one request and its response; it is the handler's
// http.ResponseWriter.
type stream struct {
	c      *conn
	id     uint32
	ctx    context.Context
	cancel context.CancelCauseFunc
	req    *http.Request
	body   requestBody
	cond   sync.Cond // request body reads wait here (L is c.mu)

	// Guarded by c.mu.
	rbuf         []byte // request body received, not yet read (from roff)
	roff         int
	recvDone     bool // END_STREAM received
	localDone    bool // END_STREAM or RST_STREAM sent
	reset        bool // no more frames either way; err says why
	err          error
	bodyClosed   bool
	needContinue bool
	queued       bool
	headSent     bool
	declLen      int64 // request content-length, -1 if none
	recvd        int64
	inflow       int64 // bytes the client may still send on the stream
	unacked      int64
	sendWin      int64
	rdeadline    time.Time
	wdeadline    time.Time
	rtimer       *time.Timer
	wtimer       *time.Timer
	rtimerAt     time.Time // when rtimer fires
	wtimerAt     time.Time
	wwaiting     bool // a Write or Flush waits in waitLocked
	rwaiting     bool // the body's Read waits for DATA

	// The handler's goroutine only.
	hdr          http.Header
	status       int
	wroteHeader  bool
	flushed      bool
	isHead       bool
	done         bool
	hold         *[]byte
	written      int64
	wlen         int64 // declared response Content-Length, -1 if none
	trailerNames []string
}

var (
	_ http.ResponseWriter = (*stream)(nil)
	_ http.Flusher        = (*stream)(nil)
	_ io.StringWriter     = (*stream)(nil)
)

// resetLocked ends s: no more frames either way, reads and writes fail
// with err, the request's context is cancelled.
func (s *stream) resetLocked(err error) {
	if s.reset {
		return
	}
	s.reset = true
	s.localDone = true
	s.err = err
	if n := len(s.rbuf) - s.roff; n > 0 {
		s.c.giveBackLocked(int64(n))
	}
	s.rbuf, s.roff = nil, 0
	s.cancel(nil) // no cause: see onData for the one reset that gives one
	s.cond.Broadcast()
	if s.c.waiters > 0 {
		s.c.cond.Broadcast()
	}
}

// giveBackLocked returns n bytes to the stream's receive window, in
// WINDOW_UPDATEs of at least half the window, while the client sends.
func (s *stream) giveBackLocked(n int64) {
	s.unacked += n
	if !s.recvDone && !s.reset && s.unacked >= int64(s.c.srv.cfg.StreamWindow)/2 {
		s.c.writeWindowUpdateLocked(s.id, uint32(s.unacked))
		s.inflow += s.unacked
		s.unacked = 0
	}
}

func (c *conn) serveStream(s *stream) {
	defer func() {
		if p := recover(); p != nil {
			if p != http.ErrAbortHandler {
				buf := make([]byte, 16<<10)
				buf = buf[:runtime.Stack(buf, false)]
				log := c.srv.cfg.Log
				if log == nil {
					log = slog.Default()
				}
				log.Error("h2srv: handler panic", "remote", c.remote, "stream", s.id, "panic", fmt.Sprint(p), "stack", string(buf))
			}
			s.abort(http2.ErrCodeInternal)
		}
		s.end()
	}()
	c.h.ServeHTTP(s, s.req)
	s.finish()
}

// abort resets the stream with code, unless it is over already.
func (s *stream) abort(code http2.ErrCode) {
	c := s.c
	c.mu.Lock()
	defer c.mu.Unlock()
	if !s.localDone && !c.closed {
		c.writeRSTLocked(s.id, code)
	}
	s.resetLocked(errStreamReset)
	c.closeStreamLocked(s)
}

// end releases what the handler held: its context, timers and buffer.
func (s *stream) end() {
	c := s.c
	c.mu.Lock()
	s.done = true
	if s.rtimer != nil {
		s.rtimer.Stop()
	}
	if s.wtimer != nil {
		s.wtimer.Stop()
	}
	c.mu.Unlock()
	s.cancel(nil)
	if s.hold != nil {
		*s.hold = (*s.hold)[:0]
		holdPool.Put(s.hold)
		s.hold = nil
	}
}

// finish ends the response of a handler that returned.
func (s *stream) finish() {
	if !s.wroteHeader {
		s.WriteHeader(http.StatusOK)
	}
	allowed := bodyAllowed(s.status)
	if s.wlen >= 0 && s.written < s.wlen && allowed && !s.isHead {
		// Less than the declared length: the client must not take it
		// for the whole body.
		s.abort(http2.ErrCodeInternal)
		return
	}
	trailers := s.trailers()
	var clen string
	if !s.flushed && s.wlen < 0 && allowed && (s.written > 0 || !s.isHead) {
		clen = strconv.FormatInt(s.written, 10)
	}
	c := s.c
	c.mu.Lock()
	defer c.mu.Unlock()
	err := s.writeLocked(s.held(), true, trailers, clen)
	if err != nil {
		return
	}
	if !s.recvDone {
		// The client still sends a body nobody will read (RFC 9113 §8.1).
		c.writeRSTLocked(s.id, http2.ErrCodeNo)
		s.resetLocked(errHandlerDone)
	}
	// A body that came whole and was left unread goes back to the
	// connection's window, as resetLocked gives back one that had not:
	// kept, such bodies would add up to the window and stall every
	// stream's upload on the connection.
	if n := len(s.rbuf) - s.roff; n > 0 {
		c.giveBackLocked(int64(n))
	}
	s.rbuf, s.roff = nil, 0
	c.closeStreamLocked(s)
}

func (s *stream) held() []byte {
	if s.hold == nil {
		return nil
	}
	return *s.hold
}

// trailers are the response trailers: the names declared in the
// Trailer field, and keys with http.TrailerPrefix.
func (s *stream) trailers() []hpack.HeaderField {
	var t []hpack.HeaderField
	add := func(k string, vv []string) {
		w, ok := fieldName(k)
		if !ok || w == "content-length" {
			return
		}
		for _, v := range vv {
			if httpguts.ValidHeaderFieldValue(v) {
				t = append(t, hpack.HeaderField{Name: w, Value: v})
			}
		}
	}
	for _, k := range s.trailerNames {
		add(k, s.hdr[k])
	}
	for k, vv := range s.hdr {
		if strings.HasPrefix(k, http.TrailerPrefix) {
			add(http.CanonicalHeaderKey(k[len(http.TrailerPrefix):]), vv)
		}
	}
	return t
}

// fieldName is the wire name a response field keyed k is sent under,
// and false for one HTTP/2 does not carry: a name that is not a token,
// a connection-specific field, TE (RFC 9113 §8.2.2).
func fieldName(k string) (string, bool) {
	w := wireName(k)
	return w, httpguts.ValidHeaderFieldName(k) && !connectionSpecific(w) && w != "te"
}

func (s *stream) isTrailer(k string) bool {
	for _, n := range s.trailerNames {
		if n == k {
			return true
		}
	}
	return strings.HasPrefix(k, http.TrailerPrefix)
}

// waitLocked waits until s may write: room in the connection's output
// and, with window, send window on the stream and the connection. Past
// the write deadline the stream is reset.
func (s *stream) waitLocked(window bool) error {
	c := s.c
	for {
		if s.reset {
			if s.err == errWriteTimeout {
				return s.err
			}
			return fmt.Errorf("h2srv: write: %w", s.err)
		}
		if c.closed {
			return errConnClosed
		}
		if len(c.pending) < maxPending && (!window || s.sendWin > 0 && c.sendWin > 0) {
			return nil
		}
		if !s.wdeadline.IsZero() && !time.Now().Before(s.wdeadline) {
			c.writeRSTLocked(s.id, http2.ErrCodeCancel)
			s.resetLocked(errWriteTimeout)
			c.closeStreamLocked(s)
			return errWriteTimeout
		}
		if !s.wdeadline.IsZero() {
			s.wtimer = armTimer(s.wtimer, &s.wtimerAt, s.wdeadline, func() {
				c.mu.Lock()
				c.cond.Broadcast()
				c.mu.Unlock()
			})
		}
		c.waiters++
		s.wwaiting = true
		c.cond.Wait()
		s.wwaiting = false
		c.waiters--
	}
}

// writeLocked sends the head if it has not gone, then data; end ends
// the stream, after trailers if there are any.
func (s *stream) writeLocked(data []byte, end bool, trailers []hpack.HeaderField, clen string) error {
	c := s.c
	if s.reset || s.localDone {
		return s.waitLocked(false)
	}
	ended := false
	if !s.headSent {
		if err := s.waitLocked(false); err != nil {
			return err
		}
		ended = end && len(data) == 0 && len(trailers) == 0
		s.writeHeadLocked(clen, ended)
	}
	for len(data) > 0 {
		if err := s.waitLocked(true); err != nil {
			return err
		}
		n := min(int64(len(data)), s.sendWin, c.sendWin, int64(c.peerMaxFrame), maxDataFrame)
		last := n == int64(len(data)) && end && len(trailers) == 0
		c.writeDataLocked(s.id, data[:n], last)
		ended = ended || last
		s.sendWin -= n
		c.sendWin -= n
		data = data[n:]
	}
	if end && !ended {
		if len(trailers) > 0 {
			for _, f := range trailers {
				_ = c.enc.WriteField(f)
			}
			c.writeHeaderBlockLocked(s.id, true)
		} else {
			c.writeDataLocked(s.id, nil, true)
		}
	}
	if end {
		s.localDone = true
	}
	return nil
}

// writeHeadLocked encodes the response head.
func (s *stream) writeHeadLocked(clen string, end bool) {
	c := s.c
	c.writeStatus(s.status)
	s.writeFieldsLocked()
	if _, ok := s.hdr["Date"]; !ok {
		c.writeField("date", httpDate())
	}
	if clen != "" {
		c.writeField("content-length", clen)
	}
	c.writeHeaderBlockLocked(s.id, end)
	s.headSent = true
}

func (s *stream) writeFieldsLocked() {
	c := s.c
	for k, vv := range s.hdr {
		if len(vv) == 0 || s.isTrailer(k) {
			continue
		}
		w, ok := fieldName(k)
		if !ok {
			continue
		}
		for _, v := range vv {
			if httpguts.ValidHeaderFieldValue(v) {
				c.writeField(w, v)
			}
		}
	}
}

// Header is the response header map.
func (s *stream) Header() http.Header { return s.hdr }

// WriteHeader sends a 1xx (not 101) at once, and fixes the status of
// the response otherwise.
func (s *stream) WriteHeader(code int) {
	if code < 100 || code > 999 {
		panic(fmt.Sprintf("invalid WriteHeader code %v", code))
	}
	if s.wroteHeader || s.done {
		return
	}
	if code < 200 {
		if code == http.StatusSwitchingProtocols {
			return
		}
		c := s.c
		c.mu.Lock()
		defer c.mu.Unlock()
		if s.reset || c.closed || s.waitLocked(false) != nil {
			return
		}
		if code == http.StatusContinue {
			s.needContinue = false
		}
		c.writeStatus(code)
		s.writeFieldsLocked()
		c.writeHeaderBlockLocked(s.id, false)
		return
	}
	s.wroteHeader = true
	s.status = code
	if cl := s.hdr["Content-Length"]; len(cl) > 0 {
		if n, err := strconv.ParseInt(cl[0], 10, 64); err == nil && n >= 0 {
			s.wlen = n
		} else {
			delete(s.hdr, "Content-Length")
		}
	}
	for _, v := range s.hdr["Trailer"] {
		for _, k := range strings.Split(v, ",") {
			if k = strings.TrimSpace(k); k != "" {
				s.trailerNames = append(s.trailerNames, http.CanonicalHeaderKey(k))
			}
		}
	}
}

// Write holds p until the handler returns, flushes, or holds more than
// one buffer.
func (s *stream) Write(p []byte) (int, error) {
	if !s.wroteHeader {
		s.WriteHeader(http.StatusOK)
	}
	if s.done {
		return 0, errHandlerDone
	}
	if !bodyAllowed(s.status) {
		return 0, http.ErrBodyNotAllowed
	}
	if s.wlen >= 0 && s.written+int64(len(p)) > s.wlen {
		return 0, http.ErrContentLength
	}
	s.written += int64(len(p))
	if s.isHead || len(p) == 0 {
		return len(p), nil
	}
	if s.hold == nil {
		if len(p) > holdSize {
			return s.send(nil, p)
		}
		s.hold = holdPool.Get().(*[]byte)
	}
	if len(*s.hold)+len(p) <= holdSize {
		*s.hold = append(*s.hold, p...)
		return len(p), nil
	}
	return s.send(*s.hold, p)
}

// WriteString is Write without a conversion.
func (s *stream) WriteString(p string) (int, error) {
	if s.hold != nil && len(*s.hold)+len(p) <= holdSize && s.wroteHeader && !s.done &&
		bodyAllowed(s.status) && !s.isHead && (s.wlen < 0 || s.written+int64(len(p)) <= s.wlen) {
		s.written += int64(len(p))
		*s.hold = append(*s.hold, p...)
		return len(p), nil
	}
	return s.Write([]byte(p))
}

// send writes what is held, then p, without ending the stream.
func (s *stream) send(held, p []byte) (int, error) {
	c := s.c
	c.mu.Lock()
	err := s.writeLocked(held, false, nil, "")
	if err == nil {
		err = s.writeLocked(p, false, nil, "")
	}
	c.mu.Unlock()
	if s.hold != nil {
		*s.hold = (*s.hold)[:0]
	}
	s.flushed = true
	if err != nil {
		return 0, err
	}
	return len(p), nil
}

// Flush sends the head and what is held.
func (s *stream) Flush() { _ = s.FlushError() }

// FlushError sends the head and what is held.
func (s *stream) FlushError() error {
	if !s.wroteHeader {
		s.WriteHeader(http.StatusOK)
	}
	if s.done {
		return errHandlerDone
	}
	_, err := s.send(s.held(), nil)
	return err
}

// SetWriteDeadline bounds the wait of Write and Flush for flow control
// and output room; past it the stream is reset. No timer is armed here:
// only a write that has to wait arms one (most never wait), so a
// handler that moves its deadline at every write costs nothing more. A
// write waiting already (on another goroutine) is woken to arm it.
func (s *stream) SetWriteDeadline(t time.Time) error {
	c := s.c
	c.mu.Lock()
	defer c.mu.Unlock()
	s.wdeadline = t
	if s.wtimer != nil && t.IsZero() {
		s.wtimer.Stop()
	}
	if s.wwaiting && !t.IsZero() {
		c.cond.Broadcast()
	}
	return nil
}

// SetReadDeadline bounds the wait of the request body's Read (a timer
// is armed only when a Read has to wait; one waiting already is woken
// to arm it).
func (s *stream) SetReadDeadline(t time.Time) error {
	c := s.c
	c.mu.Lock()
	defer c.mu.Unlock()
	s.rdeadline = t
	if s.rtimer != nil && t.IsZero() {
		s.rtimer.Stop()
	}
	if s.rwaiting && !t.IsZero() {
		s.cond.Broadcast()
	}
	return nil
}

// EnableFullDuplex is a no-op: HTTP/2 streams are full duplex.
func (s *stream) EnableFullDuplex() error { return nil }

// armTimer makes sure a timer fires f at at, for a wait about to
// begin; armed is when t fires now.
func armTimer(t *time.Timer, armed *time.Time, at time.Time, f func()) *time.Timer {
	if t != nil && armed.Equal(at) {
		return t
	}
	*armed = at
	if t == nil {
		return time.AfterFunc(time.Until(at), f)
	}
	t.Reset(time.Until(at))
	return t
}

// maxKeptBody is the most buffer a stream keeps for its request body
// once what it held is read: one frame's worth.
const maxKeptBody = minMaxFrameSize

// requestBody is a request's Body: what DATA frames brought.
type requestBody struct{ s *stream }

func (b *requestBody) Read(p []byte) (int, error) {
	s := b.s
	c := s.c
	c.mu.Lock()
	defer c.mu.Unlock()
	if s.needContinue {
		s.needContinue = false
		if !s.headSent && !s.reset && !c.closed {
			c.writeStatus(http.StatusContinue)
			c.writeHeaderBlockLocked(s.id, false)
		}
	}
	for s.roff == len(s.rbuf) {
		switch {
		case s.bodyClosed:
			return 0, http.ErrBodyReadAfterClose
		case s.recvDone:
			return 0, io.EOF
		case s.reset:
			return 0, s.err
		case c.closed:
			return 0, errConnClosed
		case !s.rdeadline.IsZero() && !time.Now().Before(s.rdeadline):
			return 0, errReadTimeout
		}
		if len(p) == 0 {
			return 0, nil
		}
		if !s.rdeadline.IsZero() {
			s.rtimer = armTimer(s.rtimer, &s.rtimerAt, s.rdeadline, func() {
				c.mu.Lock()
				s.cond.Broadcast()
				c.mu.Unlock()
			})
		}
		s.rwaiting = true
		s.cond.Wait()
		s.rwaiting = false
	}
	n := copy(p, s.rbuf[s.roff:])
	s.roff += n
	if s.roff == len(s.rbuf) {
		// A buffer that grew past a frame is let go once read: kept,
		// a client that fills each stream in turn (the connection
		// window allows one at a time) would leave every stream
		// holding as much for its life.
		if cap(s.rbuf) > maxKeptBody {
			s.rbuf = nil
		}
		s.rbuf, s.roff = s.rbuf[:0], 0
	}
	c.giveBackLocked(int64(n))
	s.giveBackLocked(int64(n))
	return n, nil
}

func (b *requestBody) Close() error {
	s := b.s
	c := s.c
	c.mu.Lock()
	defer c.mu.Unlock()
	if !s.bodyClosed {
		s.bodyClosed = true
		s.needContinue = false
		if n := len(s.rbuf) - s.roff; n > 0 {
			c.giveBackLocked(int64(n))
		}
		s.rbuf, s.roff = nil, 0
		s.cond.Broadcast()
	}
	return nil
}

// AwaitsContinue reports whether body is a request body of this server
// whose request carried Expect: 100-continue and whose 100 has not been
// sent yet (it is sent at the first Read).
func AwaitsContinue(body io.ReadCloser) bool {
	b, ok := body.(*requestBody)
	if !ok {
		return false
	}
	c := b.s.c
	c.mu.Lock()
	defer c.mu.Unlock()
	return b.s.needContinue
}
