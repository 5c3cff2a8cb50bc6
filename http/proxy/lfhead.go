package proxy

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"

	"github.com/valyala/fasthttp"
)

// An upstream whose answer heads end their lines in LF alone ("HTTP/1.1
// 200 OK\nContent-Length: 2\n\nok": small devices' web pages,
// hand-written servers, CGI scripts) is read as one ending them in CRLF:
// RFC 9112 §2.2 lets a recipient take a lone LF as a line's end, and
// nginx does. fasthttp reads such a head too, but only once the bytes it
// has buffered hold a CRLFCRLF somewhere: before that it waits for more,
// and an upstream that sends nothing more (it is waiting for its next
// request) held the answer until the upstream's timeout, or was 502 when
// it closed. So before fasthttp reads a head, lfHead looks at its status
// line: one that ends in CRLF (every well-behaved upstream's) is left to
// fasthttp, at the cost of finding that line's end; after one that ends
// in a lone LF, the head up to its first empty line is written again
// with CRLFs and read from that copy (an allocation on this rare path
// only). A head whose status line ends in CRLF but whose empty line is a
// lone LF is left as fasthttp reads it.
var (
	strCRLFCRLF = []byte("\r\n\r\n")
	strLFLF     = []byte("\n\n") // also "\r\n\n": a CRLF line, then a lone LF
)

// lfHead returns the length of an answer head at the front of br whose
// status line ends in a lone LF, up to and with its first empty line,
// when br holds no CRLFCRLF (0 otherwise: fasthttp reads the head as it
// is), reading from br's source until it knows. A read error is returned
// (headReadError): br hands an error out once, and fasthttp, reading on,
// would wait for another. On a timeout that was a second UpstreamTimeout
// before the 504 (the connection's deadline moves at each read).
func lfHead(br *bufio.Reader) (int, error) {
	n := 1
	for {
		if b, err := br.Peek(n); len(b) < n {
			if err == bufio.ErrBufferFull {
				return 0, nil // fasthttp says so
			}
			return 0, headReadError(err, len(b))
		}
		b, _ := br.Peek(br.Buffered())
		// Empty lines before the status line are skipped, as fasthttp
		// skips them.
		lead := 0
		for lead < len(b) && (b[lead] == '\r' || b[lead] == '\n') {
			lead++
		}
		if i := bytes.IndexByte(b[lead:], '\n'); i >= 0 {
			if b[lead+i-1] == '\r' || bytes.Contains(b, strCRLFCRLF) {
				return 0, nil
			}
			if j := bytes.Index(b[lead:], strLFLF); j >= 0 {
				return lead + j + len(strLFLF), nil
			}
		}
		if len(b) >= br.Size() {
			return 0, nil // over the buffer: fasthttp says so
		}
		n = len(b) + 1
	}
}

// headReadError is the error fasthttp's head reader gives for a read
// that failed with err after read bytes of the head had come: its
// ErrTimeout for a timeout, io.EOF when nothing came (a pooled
// connection the upstream had closed: staleConn), else err wrapped.
func headReadError(err error, read int) error {
	var ne net.Error
	switch {
	case errors.As(err, &ne) && ne.Timeout():
		return fasthttp.ErrTimeout
	case read == 0:
		return io.EOF
	}
	return fmt.Errorf("error when reading response headers: %w: buffer size=%d", err, read)
}

// readLFHead reads the n-byte head lfHead (or headEnd) found at the
// front of br into h, its lone LFs written as CRLF, and takes it off br.
func readLFHead(h *fasthttp.ResponseHeader, br *bufio.Reader, n int) error {
	raw, _ := br.Peek(n)
	fixed := make([]byte, 0, n+bytes.Count(raw, []byte{'\n'}))
	for i, c := range raw {
		if c == '\n' && (i == 0 || raw[i-1] != '\r') {
			fixed = append(fixed, '\r')
		}
		fixed = append(fixed, c)
	}
	if err := h.Read(bufio.NewReaderSize(bytes.NewReader(fixed), len(fixed))); err != nil {
		return err
	}
	_, err := br.Discard(n)
	return err
}

// readAnswer reads an upstream's answer as fasthttp's
// Response.ReadLimitBody does (a head, then a body of up to limit bytes
// unless the status has none), its head as readHead reads it: in CRLF or
// lone-LF lines, past informational answers.
func readAnswer(resp *fasthttp.Response, br *bufio.Reader, limit int) error {
	if err := readHead(resp, br); err != nil {
		return err
	}
	if framingOf(resp, false) == bodyNone {
		return nil
	}
	return resp.ReadBody(br, limit)
}
