package proxy

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http/httputil"
	"strings"
	"time"

	"github.com/valyala/fasthttp"

	"peerdns/internal/view"
)

// upload sends a request whose body is streamed (longer than SmallBody,
// or chunked) on an upstream connection of its own, and reads the
// upstream's answer while the body is still going, as nginx does with
// proxy_request_buffering off: an upstream may answer before it has read
// the whole body (401 for a missing token, 413 for a body too large) and
// close. That answer reaches the client, the rest of the body is not
// read, and the client's connection closes after the answer (what is
// left of the body cannot be told from a next request). fasthttp's
// client reads an answer only once the body has gone, so such an
// upstream would be a 502.
//
// The connection is not reused: a tunnel stream or a local TCP dial per
// upload costs nothing next to the upload. Deadlines: the upstream must
// take some of the body every UpstreamTimeout (its write deadline moves
// with each write); its answer is awaited without a deadline while the
// body goes, then within UpstreamTimeout once it has gone (and between
// two reads of the answer's body). When sending fails on the upstream's
// side, an answer already on its way is still read for answerGrace.
func (s *Server) upload(ctx *fasthttp.RequestCtx, d *view.Domain, cm *movingDeadlines) {
	conn, mc, err := s.dialUpstream(d)
	if err != nil {
		_ = cm.bodyEnd()
		s.upstreamError(ctx, d, err)
		closeAfter(ctx)
		return
	}
	req, resp := &ctx.Request, &ctx.Response
	req.Header.SetConnectionClose() // to the upstream: this connection ends with the exchange
	mc.wr.every.Store(int64(s.d.UpstreamTimeout))
	sent := make(chan error, 1)
	go func() {
		bw := bufio.NewWriterSize(conn, 4<<10)
		err := req.Write(bw)
		if err == nil {
			err = bw.Flush()
		}
		switch {
		case err == nil:
			_ = mc.SetReadDeadline(time.Now().Add(s.d.UpstreamTimeout))
		case cm != nil && cm.readErr != nil, !mc.wfail.Load(): // the client's side (its connection or its body): no answer will do
			_ = mc.SetReadDeadline(time.Now())
		default:
			_ = mc.SetReadDeadline(time.Now().Add(answerGrace))
		}
		sent <- err
	}()
	br := bufio.NewReaderSize(conn, 4<<10)
	herr := readHead(resp, br)
	var werr error
	early := false
	select {
	case werr = <-sent:
	default: // answered (or failed) while the body was still going: stop sending it
		early = true
		cm.haltRead()
		mc.haltWrite()
		werr = <-sent
	}
	cerr := cm.bodyEnd()
	if herr != nil {
		conn.Close()
		resp.Reset()
		switch {
		case werr != nil && cerr != nil:
			s.clientBodyError(ctx, cerr)
		case werr != nil && !mc.wfail.Load():
			// Sending broke, yet no write to the upstream failed: the
			// client's body could not be read (chunks fasthttp could
			// not parse).
			s.clientBodyError(ctx, fmt.Errorf("%w: %w", errChunks, werr))
		case werr != nil && !early:
			s.upstreamError(ctx, d, timedOut(werr))
		default:
			s.upstreamError(ctx, d, timedOut(herr))
		}
		closeAfter(ctx)
		return
	}
	ownHead(&resp.Header) // its body comes below (sendBody)
	if early || werr != nil {
		closeAfter(ctx) // the rest of the body is unread
	}
	// The answer's body: between two reads at most UpstreamTimeout.
	mc.rd.every.Store(int64(s.d.UpstreamTimeout))
	_ = mc.SetReadDeadline(time.Now().Add(s.d.UpstreamTimeout))
	n := resp.Header.ContentLength()
	var body io.Reader
	switch framingOf(resp, req.Header.IsHead()) {
	case bodyNone:
		conn.Close()
		return
	case bodySized:
		body = io.LimitReader(br, int64(n))
	case bodyChunked:
		body = httputil.NewChunkedReader(br)
	case bodyUntilClose: // chunked to the client
		body, n = br, -1
	}
	resp.SetBodyStream(&upstreamBody{Reader: body, c: conn}, n)
	sendBody(ctx, resp)
}

// timedOut marks a deadline that passed as fasthttp's ErrTimeout, which
// upstreamError answers 504 (an upstream that stopped taking the body or
// did not answer in time).
func timedOut(err error) error {
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return fmt.Errorf("%w: %v", fasthttp.ErrTimeout, err)
	}
	return err
}

// answerGrace is how long an answer is awaited after sending the body
// failed on the upstream's side (it may have answered, then closed).
const answerGrace = time.Second

// readHead reads the upstream's answer head, past informational ones
// (100 Continue and the like), in CRLF or lone LF lines (lfhead.go). An
// answer that declares its length both ways is refused (errBothLengths).
func readHead(resp *fasthttp.Response, br *bufio.Reader) error {
	for range 100 {
		n, err := lfHead(br)
		both := false // a Content-Length field in the head as it came
		switch {
		case err != nil:
		case n > 0:
			raw, _ := br.Peek(n)
			both = declaresLength(raw) // before readLFHead takes it
			err = readLFHead(&resp.Header, br, n)
		default:
			// What br holds before fasthttp takes the head from it: not
			// looked at unless the answer is chunked.
			pre, _ := br.Peek(br.Buffered())
			if err = resp.Header.Read(br); err == nil && resp.Header.ContentLength() == -1 {
				both = declaresLength(taken(pre, br))
			}
		}
		if err != nil {
			return err
		}
		if both && resp.Header.ContentLength() == -1 {
			return errBothLengths
		}
		switch code := resp.StatusCode(); {
		case code == fasthttp.StatusSwitchingProtocols:
			return errors.New("upstream switched protocols on a request that did not ask to")
		case code >= 200:
			return nil
		}
	}
	return errors.New("upstream sent more than 100 informational answers")
}

// errBothLengths: the upstream's answer carries both Content-Length and
// Transfer-Encoding. fasthttp reads it chunked (RFC 9112 §6.3: the
// Transfer-Encoding wins) and forgets the Content-Length, but the RFC
// says such a message ought to be handled as an error (it may be an
// attempt at response splitting: an upstream, or something between it
// and the edge, that framed it by its length would have its next answer
// start elsewhere), and nginx refuses it: so does the edge, with a 502,
// and the connection is closed, its request not asked again
// (retryable). The edge refuses such a request from a client too
// (bothFramings).
//
// fasthttp keeps no trace of the Content-Length of a chunked answer, so
// the head is looked at as it came (declaresLength), only when the
// answer is chunked, and only as far as it is still in the read buffer
// (taken): a head that came in one read (nearly every one: heads are a
// few hundred bytes) is looked at whole; one that came in pieces is
// looked at in part or not at all, and fasthttp's reading (the
// Transfer-Encoding wins, the Content-Length is not passed on) stands.
var errBothLengths = errors.New("upstream declared its answer's length twice: Content-Length and Transfer-Encoding")

// taken is the head fasthttp just read from br, as it was in pre (what
// br held before): all of it when br read nothing more meanwhile, else
// its tail, or nil when that cannot be told. A read that moved br's
// buffer is told by the capacities: pre and br's unread bytes lie in
// one array, as many bytes apart as the head is long, only while it did
// not move; where it moved and they still are, pre holds the head's
// bytes from where it began in the array (its tail). Either way no byte
// of pre[:n] is past the head's end.
func taken(pre []byte, br *bufio.Reader) []byte {
	n := len(pre) - br.Buffered()
	rest, _ := br.Peek(0)
	if n <= 0 || cap(pre)-cap(rest) != n {
		return nil
	}
	return pre[:n]
}

// declaresLength reports whether a head (or its tail: its first line is
// not looked at) has a Content-Length field before its empty line, its
// name in any case, spaces before its colon as fasthttp takes them.
func declaresLength(head []byte) bool {
	_, rest, ok := bytes.Cut(head, newline)
	for ok {
		var line []byte
		line, rest, ok = bytes.Cut(rest, newline)
		line = bytes.TrimSuffix(line, carriageReturn)
		if len(line) == 0 {
			return false
		}
		if name, _, found := bytes.Cut(line, colon); found && strings.EqualFold(strings.TrimRight(b2s(name), " \t"), fasthttp.HeaderContentLength) {
			return true
		}
	}
	return false
}

var (
	newline        = []byte{'\n'}
	carriageReturn = []byte{'\r'}
	colon          = []byte{':'}
)

// framing is how an answer's body follows its head.
type framing int

const (
	bodyNone       framing = iota // none: the answer to a HEAD, 204, 304
	bodySized                     // its Content-Length bytes
	bodyChunked                   // chunked, a trailer section after it
	bodyUntilClose                // until the upstream closes (the connection ends with it)
)

// framingOf is resp's framing; head: the request was a HEAD (its
// answer's Content-Length is the GET's, with no body).
func framingOf(resp *fasthttp.Response, head bool) framing {
	switch code, n := resp.StatusCode(), resp.Header.ContentLength(); {
	case head || code == fasthttp.StatusNoContent || code == fasthttp.StatusNotModified:
		return bodyNone
	case n >= 0:
		return bodySized
	case n == -1:
		return bodyChunked
	default:
		return bodyUntilClose
	}
}

// upstreamBody is an answer's body read from an upstream connection of its
// own; the connection closes with it (fasthttp closes a body stream once
// the response is written, or dropped).
type upstreamBody struct {
	io.Reader
	c net.Conn
}

// Close closes the upstream connection. Its error is not the answer's:
// fasthttp would take it for a failed write and drop the answer unsent
// (a tunnel stream the far side reset after its answer fails to close).
func (b *upstreamBody) Close() error {
	_ = b.c.Close()
	return nil
}

// dialUpstream opens a connection of its own to d's tunnel server (TLS
// when d.SSL), with moving deadlines at zero (set by the caller).
func (s *Server) dialUpstream(d *view.Domain) (net.Conn, *movingDeadlines, error) {
	mc, err := s.dialMoving(d.Hash)
	if err != nil {
		return nil, nil, err
	}
	if !d.SSL {
		return mc, mc, nil
	}
	tc, err := tlsUpstream(mc, d)
	if err != nil {
		return nil, nil, err
	}
	return tc, mc, nil
}
