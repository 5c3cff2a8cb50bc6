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
	// The server's response carries its NoDefaultDate: reset, the answer
	// gets the edge's Date when the upstream sent none, as the pool's
	// answers get it (fasthttp's client resets the response it reads).
	resp.Header.Reset()
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
// answer whose framing could be read two ways is refused
// (framingFault), as is a status code below 100 (errLowStatus).
//
// The head is looked at as it came only when its framing asks for it
// (suspect: a chunked answer, or one in HTTP/1.0), and then whole,
// however it came in reads: fasthttp reads a head by peeking at br
// until it holds the whole head, and a peek moves br's bytes to the
// buffer's start only when something was read before them. On a fresh
// reader (every exchange's first head) the head so lies at the
// buffer's start whatever its reads, and is found there once fasthttp
// has read it (wholeHead); a head after an informational one is found
// whole in br first (headEnd), and read from what was found. An answer
// neither chunked nor in HTTP/1.0 costs no look.
func readHead(resp *fasthttp.Response, br *bufio.Reader) error {
	for range 100 {
		n, err := lfHead(br)
		if err == nil && n == 0 && !atStart(br) {
			n, err = headEnd(br)
		}
		var raw []byte  // the head as it came, when it is to be looked at
		var head []byte // the head as it came, when at hand (its status line: zeroStatus)
		switch {
		case err != nil:
		case n > 0:
			raw, _ = br.Peek(n) // still in br's buffer once readLFHead took it
			head = raw
			err = readLFHead(&resp.Header, br, n)
		default:
			pre, _ := br.Peek(br.Buffered()) // from the buffer's start (atStart), but for a head headEnd found no end of
			err = resp.Header.Read(br)
			if _, small := errors.AsType[*fasthttp.ErrSmallBuffer](err); small {
				raw, err = readBigHead(&resp.Header, br)
				head = raw
			} else if err == nil {
				if cap(pre) == br.Size() {
					head = wholeHead(pre, br)
				}
				if suspect(&resp.Header) {
					if head == nil {
						return errUnchecked
					}
					raw = head
				}
			}
		}
		if err == nil && raw != nil {
			err = framingFault(&resp.Header, raw)
		}
		if err != nil {
			return err
		}
		if resp.Header.Len() > maxAnswerFields {
			return errTooManyFields
		}
		switch code := resp.StatusCode(); {
		case code < 100, code == fasthttp.StatusOK && zeroStatus(head):
			return errLowStatus
		case code == fasthttp.StatusSwitchingProtocols:
			return errUnaskedSwitch
		case code >= 200:
			return nil
		}
	}
	return errTooManyInformational
}

var (
	errUnaskedSwitch        = errors.New("upstream switched protocols on a request that did not ask to")
	errTooManyInformational = errors.New("upstream sent more than 100 informational answers")
)

// errLowStatus: an answer's status code is below 100 (RFC 9110 §15: a
// valid one is 100 to 599). fasthttp reads one, and writes 200 for a
// status of 0; one of 1 to 99 would be taken for an informational
// answer and the final one awaited for UpstreamTimeout. A 502, as for
// any head the edge cannot read.
var errLowStatus = errors.New("upstream answered with a status code below 100")

// zeroStatus reports whether head, an answer's head as it came (nil:
// not at hand), has the status code 000, which fasthttp reads as no
// status and hands out as 200. Only the status line's first bytes are
// looked at.
func zeroStatus(head []byte) bool {
	for len(head) > 0 && (head[0] == '\r' || head[0] == '\n') { // the empty lines fasthttp skips
		head = head[1:]
	}
	i := bytes.IndexByte(head, ' ')
	if i < 0 {
		return false
	}
	for i++; i < len(head) && head[i] == ' '; i++ {
	}
	return bytes.HasPrefix(head[i:], strZeroStatus)
}

var strZeroStatus = []byte("000")

// maxAnswerFields is the most fields an answer's head may have (a 502
// past it, errTooManyFields): the work of dropping an answer's
// hop-by-hop fields grows with its fields times the names it drops
// (dropHopResponse), and MaxAnswerHeadBytes alone would let thousands of
// short fields in. HAProxy takes 101 by default, Envoy 100; 256 leaves
// room for any app's answers.
const maxAnswerFields = 256

var errTooManyFields = fmt.Errorf("upstream's answer head has more than %d fields, the most the edge takes", maxAnswerFields)

// errBothLengths: the upstream's answer carries both Content-Length and
// Transfer-Encoding. fasthttp reads it chunked (RFC 9112 §6.3: the
// Transfer-Encoding wins) and forgets the Content-Length, but the RFC
// says such a message ought to be handled as an error (it may be an
// attempt at response splitting: an upstream, or something between it
// and the edge, that framed it by its length would have its next answer
// start elsewhere), and nginx refuses it: so does the edge, with a 502,
// and the connection is closed, its request not asked again
// (retryable). The edge refuses such a request from a client too
// (bothFramings). fasthttp keeps no trace of the Content-Length of a
// chunked answer: the head is looked at as it came (readHead), whole
// however it was cut between reads.
var errBothLengths = errors.New("upstream declared its answer's length twice: Content-Length and Transfer-Encoding")

// errOldCoding: an HTTP/1.0 answer with a Transfer-Encoding that is not
// one "chunked" field (framingFault).
var errOldCoding = errors.New("upstream answered in HTTP/1.0 with a Transfer-Encoding other than chunked")

// errUnchecked: a head that needed a look could not be had whole (one
// that fasthttp read where headEnd found no end: not expected).
var errUnchecked = errors.New("upstream answer's head could not be checked whole")

// suspect reports whether an answer's head is to be looked at as it
// came: chunked (a Content-Length beside it is lost), or in HTTP/1.0
// (fasthttp drops its Transfer-Encoding unread).
func suspect(h *fasthttp.ResponseHeader) bool {
	return h.ContentLength() == -1 || !h.IsHTTP11()
}

// framingFault checks the framing of an answer whose head raw (as it
// came) fasthttp read into h.
//
//   - Content-Length and Transfer-Encoding both: errBothLengths.
//   - An HTTP/1.0 answer with a Transfer-Encoding. fasthttp ignores the
//     field there (as Go's net/http does) and frames the body by its
//     Content-Length or up to the close, keeping the connection when
//     the answer says keep-alive; RFC 9112 §6.1 says such framing is
//     faulty and the connection is to be closed after the message.
//     nginx reads such an answer chunked, as an HTTP/1.1 one (its
//     Transfer-Encoding handling does not look at the version), and
//     closes the upstream connection after it (any answer below
//     HTTP/1.1 closes it); with a Content-Length too, or a coding
//     other than chunked, it refuses it (502). The edge does the same:
//     one "chunked" field alone is read chunked, the connection closed
//     after the answer (never back to the pool); anything else is a
//     502 (errBothLengths, errOldCoding). Only the chunked reading
//     ends the answer where its sender said; the bytes after its last
//     chunk, if any, go with the connection.
func framingFault(h *fasthttp.ResponseHeader, raw []byte) error {
	lengths, codings, chunked := fieldsOf(raw)
	switch {
	case lengths > 0 && (codings > 0 || h.ContentLength() == -1):
		return errBothLengths
	case codings == 0 || h.IsHTTP11():
		return nil
	case codings > 1 || !chunked:
		return errOldCoding
	}
	h.SetContentLength(-1) // chunked
	h.SetConnectionClose()
	return nil
}

// fieldsOf counts the Content-Length and Transfer-Encoding fields of a
// head as it came (its first line and the empty lines before it are
// not fields), names in any case with the spaces fasthttp takes before
// a colon; chunked: the last Transfer-Encoding's value is "chunked".
func fieldsOf(head []byte) (lengths, codings int, chunked bool) {
	first := true
	for len(head) > 0 {
		line, rest, _ := bytes.Cut(head, newline)
		head = rest
		line = bytes.TrimSuffix(line, carriageReturn)
		if first {
			first = len(line) == 0 // the empty lines fasthttp skips, then the status line
			continue
		}
		if len(line) == 0 {
			break
		}
		name, value, found := bytes.Cut(line, colon)
		if !found {
			continue
		}
		switch k := strings.TrimRight(b2s(name), " \t"); {
		case strings.EqualFold(k, fasthttp.HeaderContentLength):
			lengths++
		case strings.EqualFold(k, fasthttp.HeaderTransferEncoding):
			codings++
			chunked = strings.EqualFold(b2s(trimSpace(value)), "chunked")
		}
	}
	return lengths, codings, chunked
}

// atStart reports whether br's unread bytes begin at its buffer's
// start: a peek that reads more then moves nothing.
func atStart(br *bufio.Reader) bool {
	p, _ := br.Peek(0)
	return cap(p) == br.Size()
}

// wholeHead is the head fasthttp just read from br, given pre, what br
// held before (from its buffer's start: atStart). Every read fasthttp
// asked for meanwhile appended to the buffer, and the head is what it
// took from the start.
func wholeHead(pre []byte, br *bufio.Reader) []byte {
	rest, _ := br.Peek(0)
	return pre[:cap(pre)-cap(rest)]
}

// headEnd returns the length of the head at the front of br, up to and
// with its first empty line (CRLF or lone LF), reading from br's source
// until it has come; 0 when it does not fit br's buffer (fasthttp says
// so). Read errors as lfHead's.
func headEnd(br *bufio.Reader) (int, error) {
	n := 1
	for {
		if b, err := br.Peek(n); len(b) < n {
			if err == bufio.ErrBufferFull {
				return 0, nil
			}
			return 0, headReadError(err, len(b))
		}
		b, _ := br.Peek(br.Buffered())
		lead := 0 // empty lines before the status line, skipped as fasthttp skips them
	skip:
		for {
			switch {
			case lead < len(b) && b[lead] == '\n':
				lead++
			case lead+1 < len(b) && b[lead] == '\r' && b[lead+1] == '\n':
				lead += 2
			default:
				break skip
			}
		}
		if j := emptyLineEnd(b[lead:]); j >= 0 {
			return lead + j, nil
		}
		if len(b) >= br.Size() {
			return 0, nil
		}
		n = len(b) + 1
	}
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
