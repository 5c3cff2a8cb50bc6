package proxy

import (
	"errors"
	"fmt"
	"io"
	"net"
	"sync"

	"github.com/valyala/fasthttp"
)

// Request bodies are streamed (fasthttp's StreamRequestBody): the server
// reads a request's head and at most the first 8 KiB of its body before
// the handler runs (the handler runs once those have come, within
// ReadTimeout), and the rest is read as it is used.
//
//   - To a p2p domain a body of up to SmallBody bytes is read whole
//     first, as nginx buffers bodies by default: a client that trickles
//     a form ties up no upstream connection. A longer (or chunked) body
//     goes upstream as it arrives, on a connection of its own, with its
//     Content-Length or chunked as it came (upload.go): an upload of any
//     size costs the node a few buffers, and its first bytes reach the
//     upstream before its last have left the client. There is no size
//     limit: the upstream decides what it accepts, and its answer is
//     read while the body still goes, so one that refuses a body before
//     reading it (401, 413, then closing) reaches the client as such.
//     Such uploads hold a connection (a tunnel stream, or a local TCP
//     connection) and a goroutine each for as long as the client takes,
//     outside the keep-alive pool, so at most MaxUploads stream to one
//     upstream at once (a quarter of the pool's size): past that an
//     upload is 503 with Retry-After: 1, and slow uploaders cannot open
//     streams to a peer without bound.
//   - The routes served in-process (the admin API, plugins) get their
//     body whole, read here first up to their own limit (admin.MaxBody,
//     pluginweb.MaxBody; over it: 413). Those of BigBody or more share a
//     budget of BodyBudget bytes, taken before reading (the declared
//     length, the route's limit for a chunked body) and given back when
//     the handler returns: past it a request is 503 with Retry-After: 1,
//     so heads that each declare megabytes and then trickle their bodies
//     cannot make the node hold megabytes per connection.
//   - A body is read with ReadTimeout between two reads, not over the
//     whole body (as nginx's client_body_timeout): a large upload from a
//     slow uplink is never cut while it keeps coming, and one that stalls
//     for ReadTimeout is (408, or the upstream request is abandoned). The
//     head must still arrive whole within ReadTimeout.
//   - A request whose body was not read to its end (an unknown host, an
//     upstream that failed or answered mid-body) closes its connection
//     after the answer: the rest of the body cannot be told from a next
//     request. The close lingers (movingDeadlines.Close): the node stops
//     sending, then reads and drops what the client still sends for up
//     to lingerTime, so the client reads the answer instead of a reset.
const (
	BodyBudget = 256 << 20
	BigBody    = 1 << 20
	SmallBody  = 64 << 10
	MaxUploads = upstreamConns / 4
	// prefetched is what fasthttp reads of a body with its head
	// (readBodyWithStreaming): a body this short is whole in memory
	// before the handler runs.
	prefetched = 8 << 10
)

type bodyBudget struct {
	mu            sync.Mutex
	left, refused int64
}

func newBodyBudget(total int64) *bodyBudget { return &bodyBudget{left: total} }

// take reserves n bytes; false: they do not fit (counted as refused).
func (b *bodyBudget) take(n int64) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.left < n {
		b.refused++
		return false
	}
	b.left -= n
	return true
}

// tryTake is take without counting a refusal (the caller has another
// way to serve the request).
func (b *bodyBudget) tryTake(n int64) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.left < n {
		return false
	}
	b.left -= n
	return true
}

func (b *bodyBudget) give(n int64) {
	if n == 0 {
		return
	}
	b.mu.Lock()
	b.left += n
	b.mu.Unlock()
}

// stats: bytes free and requests refused so far.
func (b *bodyBudget) stats() (left, refused int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.left, b.refused
}

// inMemory reports whether the request's body is whole in memory (none,
// or short enough to have come with the head).
func inMemory(req *fasthttp.Request) bool {
	if !req.IsBodyStream() {
		return true
	}
	n := req.Header.ContentLength()
	return n >= 0 && n <= prefetched
}

// wholeBody reads the request's body whole, up to limit bytes, for a
// route served in-process; held is what it took from the budget (give
// it back when the handler returns). false: the request was answered
// (413, 503, 408 or 400) and its connection will close.
func (s *Server) wholeBody(ctx *fasthttp.RequestCtx, limit int) (held int64, ok bool) {
	req := &ctx.Request
	if inMemory(req) {
		if req.IsBodyStream() {
			_ = req.Body() // a plain body from here on
		}
		return 0, true
	}
	n := req.Header.ContentLength()
	if n > limit {
		s.refuseBody(ctx, fasthttp.StatusRequestEntityTooLarge, "Content Too Large")
		return 0, false
	}
	want := int64(n)
	if n < 0 { // chunked
		want = int64(limit)
	}
	if want >= BigBody {
		if !s.budget.take(want) {
			s.busy(ctx, "too many large request bodies in flight")
			return 0, false
		}
		held = want
	}
	mc := s.bodyStart(ctx)
	var b []byte
	var err error
	if n >= 0 {
		b = make([]byte, n)
		_, err = io.ReadFull(ctx.RequestBodyStream(), b)
	} else {
		b, err = io.ReadAll(io.LimitReader(ctx.RequestBodyStream(), int64(limit)+1))
	}
	if cerr := mc.bodyEnd(); err != nil && cerr != nil {
		err = cerr
	} else if err != nil && n < 0 {
		err = fmt.Errorf("%w: %w", errChunks, err)
	}
	switch {
	case err != nil:
		s.budget.give(held)
		s.clientBodyError(ctx, err)
		return 0, false
	case len(b) > limit:
		s.budget.give(held)
		s.refuseBody(ctx, fasthttp.StatusRequestEntityTooLarge, "Content Too Large")
		return 0, false
	}
	req.SetBodyRaw(b)
	return held, true
}

// refuseBody answers without reading the body, and closes the connection.
func (s *Server) refuseBody(ctx *fasthttp.RequestCtx, status int, msg string) {
	ctx.Error(msg, status)
	closeAfter(ctx)
}

// closeAfter closes the connection after the answer, lingering: the
// client may still be sending a body nobody will read (see
// movingDeadlines.Close).
func closeAfter(ctx *fasthttp.RequestCtx) {
	ctx.SetConnectionClose()
	if mc := clientConn(ctx); mc != nil {
		mc.linger.Store(true)
	}
}

// clientConn is the listener's wrapper of ctx's connection (under TLS
// too); nil for a connection the listeners did not wrap.
func clientConn(ctx *fasthttp.RequestCtx) *movingDeadlines {
	c := ctx.Conn()
	if u, ok := c.(interface{ NetConn() net.Conn }); ok { // *tls.Conn
		c = u.NetConn()
	}
	mc, _ := c.(*movingDeadlines)
	return mc
}

// busy answers 503 with Retry-After: 1 without reading the body (the
// request itself is fine; the edge has no room for it now).
func (s *Server) busy(ctx *fasthttp.RequestCtx, why string) {
	s.refuseBody(ctx, fasthttp.StatusServiceUnavailable, "Service Unavailable: "+why+", retry")
	ctx.Response.Header.Set("Retry-After", "1")
}

// clientBodyError answers a body the client stopped sending or sent
// wrong: 408 when it stalled for ReadTimeout, 400 when it broke off or
// its chunks could not be read.
func (s *Server) clientBodyError(ctx *fasthttp.RequestCtx, err error) {
	s.d.Log.Debug("request body not received", "remote", ctx.RemoteAddr().String(), "host", string(ctx.Host()), "err", err)
	var ne net.Error
	switch {
	case errors.As(err, &ne) && ne.Timeout():
		s.refuseBody(ctx, fasthttp.StatusRequestTimeout, "Request Timeout: the request body stopped coming")
	case errors.Is(err, errChunks):
		s.refuseBody(ctx, fasthttp.StatusBadRequest, "Bad Request: "+errChunks.Error())
	default:
		s.refuseBody(ctx, fasthttp.StatusBadRequest, "Bad Request: the request body ended early")
	}
}

// errChunks marks a chunked request body fasthttp could not read (a
// chunk size that is not hex or overflows, a chunk not ended by CRLF):
// the client's fault, not the upstream's. fasthttp's errors for it are
// not all of one type, so the edge tells them by where they came from:
// reading the body, not the connection.
var errChunks = errors.New("the request body's chunked encoding is malformed")

// bodyStart puts the client connection in body mode: its read deadline
// moves with each read (ReadTimeout between reads) and a read error is
// kept, so a failure can be told to be the client's. nil (a no-op for
// bodyEnd) for a connection the listeners did not wrap.
func (s *Server) bodyStart(ctx *fasthttp.RequestCtx) *movingDeadlines {
	mc := clientConn(ctx)
	if mc == nil {
		return nil
	}
	mc.readErr = nil
	mc.rd.every.Store(int64(s.d.ReadTimeout))
	return mc
}

// bodyEnd leaves body mode; the error is the client side's read error
// while in it, if any.
func (c *movingDeadlines) bodyEnd() error {
	if c == nil {
		return nil
	}
	c.rd.every.Store(0)
	err := c.readErr
	c.readErr = nil
	return err
}
