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
var strCRLFCRLF = []byte("\r\n\r\n")

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
			if j := emptyLineEnd(b[lead:]); j >= 0 {
				return lead + j, nil
			}
		}
		if len(b) >= br.Size() {
			return 0, nil // over the buffer: fasthttp says so
		}
		n = len(b) + 1
	}
}

// emptyLineEnd is where the first empty line in b ends, or -1: an LF
// right after a line's LF, or a CR and an LF (RFC 9112 §2.2: a lone LF
// may end a line, and a CR before it is ignored; a script that writes
// its fields with LFs and the empty line with CRLF ends its head there).
func emptyLineEnd(b []byte) int {
	for at := 0; ; {
		i := bytes.IndexByte(b[at:], '\n')
		if i < 0 {
			return -1
		}
		at += i + 1
		switch {
		case at < len(b) && b[at] == '\n':
			return at + 1
		case at+1 < len(b) && b[at] == '\r' && b[at+1] == '\n':
			return at + 2
		}
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
	if err := readCRLF(h, raw); err != nil {
		return err
	}
	_, err := br.Discard(n)
	return err
}

// readCRLF reads into h the head raw holds whole, from a copy with its
// lone LFs written as CRLF.
func readCRLF(h *fasthttp.ResponseHeader, raw []byte) error {
	fixed := make([]byte, 0, len(raw)+bytes.Count(raw, []byte{'\n'}))
	for i, c := range raw {
		if c == '\n' && (i == 0 || raw[i-1] != '\r') {
			fixed = append(fixed, '\r')
		}
		fixed = append(fixed, c)
	}
	return h.Read(bufio.NewReaderSize(bytes.NewReader(fixed), len(fixed)))
}

// readBigHead reads into h an answer head longer than br's buffer,
// which fasthttp's reader refuses (it reads a head whole within its
// buffer): the head's lines are taken off br one at a time (a line
// longer than the buffer in pieces) up to its first empty line, at most
// MaxAnswerHeadBytes, and read from that copy (readCRLF, as
// readLFHead). Only the head is taken: what follows it stays in br. raw
// is the head as it came. The pool's buffers stay small (what comes
// with a head is copied, the rest of a body from this machine is
// spliced: splice.go), and an answer with a head of some KiB (sign-in
// cookies) costs a copy of it.
func readBigHead(h *fasthttp.ResponseHeader, br *bufio.Reader) (raw []byte, err error) {
	raw = make([]byte, 0, 2*br.Size())
	started := false // a line other than an empty one came
	for {
		line, err := br.ReadSlice('\n')
		if len(raw)+len(line) > MaxAnswerHeadBytes {
			return nil, errHeadTooLarge
		}
		fresh := len(raw) == 0 || raw[len(raw)-1] == '\n' // a line's start, not more of a long one
		raw = append(raw, line...)
		if err == bufio.ErrBufferFull {
			continue
		}
		if err != nil {
			return nil, headReadError(err, len(raw))
		}
		if !fresh || string(line) != "\n" && string(line) != "\r\n" {
			started = true
		} else if started {
			break
		} // else an empty line before the status line, skipped as fasthttp skips it
	}
	if err := readCRLF(h, raw); err != nil {
		return nil, err
	}
	return raw, nil
}

// errHeadTooLarge: an upstream's answer head over MaxAnswerHeadBytes.
var errHeadTooLarge = fmt.Errorf("upstream's answer head is over %d KiB, the most the edge takes", MaxAnswerHeadBytes>>10)

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
