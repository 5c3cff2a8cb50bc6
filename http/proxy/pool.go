package proxy

import (
	"bufio"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http/httputil"
	"sync"
	"sync/atomic"

	"github.com/valyala/fasthttp"
)

// poolTransport is the HTTP/1.1 edge's exchange with an upstream of the
// keep-alive pool (the HostClient's Transport): fasthttp's own exchange
// (AcquireConn, write, read the head) written out so that an answer
// whose body is declared and short (wholeBody, wholeStream) is read
// whole into the response, and only a longer one, or one of unknown
// length, is streamed (poolBody). fasthttp's client streams every
// answer once StreamResponseBody is set, at four allocations per answer
// (its stream and the stream's three closures) and a copy through the
// stream when the answer is written; most answers through a proxy are
// small. fasthttp's Do still runs the exchange: its retries of an
// idempotent request whose pooled connection failed before the answer,
// the pool, its limits.
//
// Timeouts are the upstream connection's moving deadlines
// (UpstreamTimeout between two reads or writes; the HostClient has none
// of its own); a timeout is fasthttp's ErrTimeout (504). An idempotent
// request is tried again (by Do, on another connection) only when its
// pooled connection was found closed before anything of the answer
// came, or held bytes that are no head (retryable), as the HTTP/2
// exchange tries it: fasthttp's own exchange asks again after any
// failure, and an upstream that took the request and then was silent
// for UpstreamTimeout, or answered a head the edge cannot read, had it
// sent five times, the client's 504 coming after five timeouts (two and
// a half minutes) instead of one.
//
// local, when not nil, counts the exchanges with an upstream on this node
// (a TCP socket: Server.LocalExchanges).
type poolTransport struct{ local *atomic.Int64 }

// wholeBody is the longest declared body read whole from a TCP
// connection (an upstream on this node): the client connection's write
// buffer (flush.go). A longer one streams at no cost: the socket hands
// out what has come in one read, usually the whole answer, which goes
// to the client with the head in one write; read whole, it was copied
// once more and written in two (same node, 64 KiB: 22.6k req/s at 35.1
// µs a request against 23.4k at 33.3 streamed, bench/README.md).
//
// wholeStream is the longest read whole from a peer's tunnel stream
// (RemoteAddr's network "hs"): one copy buffer (copyBufs). A QUIC stream
// hands its data out as its packets come, so a streamed answer left in
// pieces of a few packets, each a write system call to the client
// (counted under strace, about twice the write calls); read whole,
// a 64 KiB answer through a tunnel read 5.71k req/s at 241 µs of both
// nodes' CPU a request against 4.98k at 263 streamed. Its first byte
// waits for its last: at most 64 KiB, a few milliseconds at a tunnel's
// rate.
const (
	wholeBody   = writeBuffer
	wholeStream = 64 << 10
)

// chunksBegin waits for the first byte of a chunked body after its
// head. fasthttp's writer and the HTTP/2 one hold the head of an answer
// of unknown length until its first chunk (nginx's proxy does too), so
// an upstream that closes or stalls between the head and the first
// chunk has sent the client nothing yet: it is answered 502 (504), not
// an empty reply or a reset stream; so is one whose body does not begin
// with a chunk. It costs nothing the client would
// see: the head waited for that byte anyway.
func chunksBegin(br *bufio.Reader) error {
	b, err := br.Peek(1)
	if err != nil {
		return fmt.Errorf("its chunked answer ended after its head: %w", err)
	}
	// A chunk's size is hex digits (RFC 9112 §7.1), which the chunked
	// reader takes nothing before: an answer that says it is chunked and
	// is not (a page sent as it is) fails here, before anything went.
	if c := b[0] | 0x20; !('0' <= b[0] && b[0] <= '9' || 'a' <= c && c <= 'f') {
		return errors.New("its chunked answer does not begin with a chunk")
	}
	return nil
}

func (t poolTransport) RoundTrip(hc *fasthttp.HostClient, req *fasthttp.Request, resp *fasthttp.Response) (retry bool, err error) {
	cc, err := hc.AcquireConn(0, req.ConnectionClose())
	if err != nil {
		return false, err
	}
	reused := !cc.LastUseTime().IsZero() // set when a connection goes back to the pool
	// fasthttp's Do asks again only GET, HEAD, PUT and QUERY requests.
	once := !(req.Header.IsGet() || req.Header.IsHead() || req.Header.IsPut() || req.Header.IsQuery())
	for reused && idleSpoke(cc.Conn(), once) {
		// Closed unused, as often as the pool hands out such a one:
		// each close leaves one idle connection fewer.
		hc.CloseConn(cc)
		if cc, err = hc.AcquireConn(0, req.ConnectionClose()); err != nil {
			return false, err
		}
		reused = !cc.LastUseTime().IsZero()
	}
	conn := cc.Conn()
	br, err := sendForHead(hc, conn, req, resp)
	if err != nil {
		hc.ReleaseReader(br)
		hc.CloseConn(cc) // resets cc
		return retryable(err, reused), timedOut(err)
	}
	reuse := !req.ConnectionClose() && !resp.ConnectionClose()
	n := resp.Header.ContentLength()
	whole := wholeBody
	if conn.RemoteAddr().Network() == "hs" {
		whole = wholeStream
	} else if t.local != nil {
		t.local.Add(1)
	}
	kind := framingOf(resp, req.Header.IsHead())
	switch {
	case kind == bodyNone:
	case kind == bodySized && n <= whole:
		resp.StreamBody = false
		if err = resp.ReadBody(br, 0); err != nil {
			hc.ReleaseReader(br)
			hc.CloseConn(cc)
			return false, timedOut(err) // the upstream answered: not asked again
		}
	default:
		if kind == bodyChunked {
			if err = chunksBegin(br); err != nil {
				hc.ReleaseReader(br)
				hc.CloseConn(cc)
				return false, timedOut(err) // the upstream answered: not asked again
			}
		}
		b := poolBodies.Get().(*poolBody)
		b.hc, b.cc, b.br, b.reuse, b.kind, b.conn = hc, cc, br, reuse, kind, conn
		switch kind {
		case bodySized:
			b.lr = io.LimitedReader{R: br, N: int64(n)}
			b.r = &b.lr
		case bodyChunked:
			b.r = httputil.NewChunkedReader(br)
		case bodyUntilClose: // chunked to the client
			b.r, b.reuse, n = br, false, -1
		}
		resp.SetBodyStream(b, n)
		return false, nil
	}
	reuse = reuse && nothingAfter(br)
	hc.ReleaseReader(br)
	connDone(hc, cc, reuse)
	return false, nil
}

// nothingAfter reports whether br holds no bytes past the answer just
// read. One exchange at a time runs on a pooled connection, so bytes
// there are an upstream's sending more than its answer (a body longer
// than its Content-Length, a body after a HEAD's answer), which the next
// exchange would read as its answer: the connection is closed instead
// of reused, as nginx closes one that "sent more data than specified".
// Bytes that come after the answer's last read are not seen here: the
// next exchange reads them as the start of its answer (502 when they are
// not a head).
func nothingAfter(br *bufio.Reader) bool { return br.Buffered() == 0 }

// idleSpoke reports whether a pooled upstream connection, idle since its
// last answer, has had something to read come in since (bytes, or its
// end): it is closed unused, as nginx's keep-alive cache and Go's
// Transport close one. Sent a request, it would have had those bytes
// read as the request's answer: an upstream that answered twice (a body
// after the answer to a HEAD, a second answer written unasked) had its
// second answer go to the next request on that connection, perhaps
// another client's, and that request's own answer to the one after it;
// one that had closed the connection failed the request, a POST (which
// fasthttp does not send twice) with a 502. Bytes that came with the
// last answer's are seen before the connection goes back to the pool
// (nothingAfter); these came after.
//
// The pool's idle connections are looked into together (idleWatch: a
// poll(2) over all of them whenever a connection handed out has not
// been looked into since it went back, or the last look is more than a
// millisecond old); for an upstream in TLS, what TLS holds is looked into
// too (tlsHolds). A peer's tunnel stream is looked into as it is handed
// out, by the stream itself (streamLook: two reads that cannot wait, no
// system call), for its end (the server's target closed the connection)
// or a reset; bytes that came on it unasked are seen there on a stream
// path (TCP, relayed) but not on QUIC, where a second answer is caught
// when it came with the first (nothingAfter), or when it is no head
// (retryable).
//
// once: the request to go on c is never sent twice (not idempotent), so
// a close missed would fail it: a TCP connection is looked into alone,
// now (idleWatch.spoke).
func idleSpoke(c net.Conn, once bool) bool {
	mc := movingOf(c)
	if mc == nil || mc.pool == nil { // no connection of the pool's Dial
		return false
	}
	if mc.pool.spoke(mc, once) {
		return true
	}
	// TLS first: over a stream path a record that came while idle (a
	// late session ticket) is TLS's to take, not a byte for the stream's
	// look to find and take for a sign that the upstream spoke.
	if tc, ok := c.(*tls.Conn); ok && mc.tlsHolds(tc) {
		return true
	}
	l, ok := mc.Conn.(streamLook)
	return ok && l.IdleSpoke()
}

// streamLook is a connection that looks into itself for what came while
// it was idle (a peer's tunnel stream: transport.Spoke), its read
// deadline left as it was.
type streamLook interface{ IdleSpoke() bool }

// tlsHolds reports whether tc, TLS over c, holds what it has read from
// c and not handed out (idleSpoke): records that came in the same read
// as the last answer's, which c's socket no longer shows. It reads from
// tc with c's read deadline in the past, and c's moving deadline off
// meanwhile, so the read hands out what tc holds and never waits
// (crypto/tls takes a timeout as no error of the connection's). The
// next read puts a fresh deadline on. Only for upstreams in TLS (a
// claim with ssl: true): a deadline set, one more on the next read.
func (c *movingDeadlines) tlsHolds(tc *tls.Conn) bool {
	every := c.rd.every.Swap(0)
	defer c.rd.every.Store(every)
	if c.SetReadDeadline(halted) != nil {
		return true
	}
	var b [1]byte
	n, err := tc.Read(b[:])
	var ne net.Error
	return n > 0 || !errors.As(err, &ne) || !ne.Timeout()
}

// sendForHead writes req on conn, a connection of hc's pool, and reads
// the answer's head, with the pool's buffers. The reader the body
// follows on is returned also on an error: the caller releases it.
func sendForHead(hc *fasthttp.HostClient, conn net.Conn, req *fasthttp.Request, resp *fasthttp.Response) (*bufio.Reader, error) {
	bw := hc.AcquireWriter(conn)
	err := req.Write(bw)
	if err == nil {
		err = bw.Flush()
	}
	hc.ReleaseWriter(bw)
	br := hc.AcquireReader(conn)
	if err == nil {
		err = readHead(resp, br)
	}
	return br, err
}

// poolBody is a streamed answer's body on a pooled upstream connection:
// the connection goes back to the pool when the body was read to its
// end (and neither side asked to close), and is closed otherwise (fasthttp
// closes a body stream once the answer is written, or dropped).
type poolBody struct {
	r     io.Reader // lr, a chunked reader, or br itself (until the upstream closes)
	lr    io.LimitedReader
	br    *bufio.Reader
	conn  net.Conn         // the connection br reads (splice.go)
	chunk io.LimitedReader // a piece spliced from conn's socket (splice.go)
	hc    *fasthttp.HostClient
	cc    any  // the pool's connection (fasthttp's type is unexported)
	reuse bool // the connection may serve another exchange once the body has passed
	// kind: bodySized (lr), bodyChunked (its trailer section is read
	// past and not passed on, as neither fasthttp's stream nor nginx's
	// HTTP/1.1 proxy passes it) or bodyUntilClose.
	kind   framing
	end    bool // the body was read to its end
	failed bool // a read failed: the connection is not at a next answer
}

var poolBodies = sync.Pool{New: func() any { return new(poolBody) }}

func (b *poolBody) Read(p []byte) (int, error) {
	if b.end {
		return 0, io.EOF
	}
	n, err := b.r.Read(p)
	switch {
	case err == io.EOF && b.kind == bodySized && b.lr.N > 0:
		b.failed = true // cut short of its declared length
		return n, io.ErrUnexpectedEOF
	case err == io.EOF && b.kind == bodyChunked:
		if !skipTrailer(b.br) {
			b.failed = true
			return n, io.ErrUnexpectedEOF
		}
		b.end = true
	case err == io.EOF:
		b.end = true
	case err != nil:
		b.failed = true
	case b.kind == bodySized && b.lr.N == 0:
		b.end = true // the writer stops at the declared length without asking again
	}
	return n, err
}

// Close hands the connection back to the pool or closes it. Its error is
// not the answer's (as upstreamBody's).
func (b *poolBody) Close() error {
	reuse := b.end && !b.failed && b.reuse && nothingAfter(b.br)
	b.hc.ReleaseReader(b.br)
	connDone(b.hc, b.cc, reuse)
	*b = poolBody{}
	poolBodies.Put(b)
	return nil
}

// connDone hands a pooled connection back (reuse) or closes it. The
// connection is held as an any: fasthttp's type for it is unexported,
// so it is asserted back in a function generic in that type. One handed
// back joins its pool's idle connections that are looked into
// (idleWatch) before the pool has it: once the pool has it, another
// exchange may take it at once.
var connDone = doneWith((*fasthttp.HostClient).ReleaseConn, (*fasthttp.HostClient).CloseConn)

func doneWith[C interface{ Conn() net.Conn }](release, closeConn func(*fasthttp.HostClient, C)) func(*fasthttp.HostClient, any, bool) {
	return func(hc *fasthttp.HostClient, cc any, reuse bool) {
		c := cc.(C)
		if !reuse {
			closeConn(hc, c)
			return
		}
		if mc := movingOf(c.Conn()); mc != nil && mc.pool != nil {
			mc.pool.add(mc)
		}
		release(hc, c)
	}
}
