package proxy

import (
	"bytes"
	"errors"
	"net"
	"unsafe"

	"github.com/valyala/fasthttp"
)

// A client's request head whose lines end in a lone LF ("GET /
// HTTP/1.1\nHost: a.p2p\n\n": netcat, hand-written clients) is
// refused at once with 400, its connection closed, instead of waiting
// for the read timeout (408). fasthttp reads such a head only once the
// bytes it has buffered hold a CRLFCRLF somewhere after its request line
// (the response side has the same trait: lfhead.go); before that it asks
// the connection for more, and a client that sent its whole head waits
// for an answer, so nothing more comes. RFC 9112 §2.2 lets a server take
// a lone LF as a line's end (nginx does), but the edge cannot make
// fasthttp read the head it holds; it can only stop the wait. A lone-LF
// head that fasthttp does read (a CRLFCRLF came after it: a pipelined
// request behind it) is served as any other.
//
// How the wait is told (headWatch): from the connection's start, and
// from each answer (fasthttp's StateIdle) until fasthttp has read the
// next head (HeaderReceived), the connection watches what it hands out
// for the head's end, its first empty line after a line that is not (the
// empty lines fasthttp skips before a request line do not count). A
// read asked for after that end was handed out, with the head still not
// read, is fasthttp waiting for a CRLFCRLF: it fails (errLoneLF), and
// fasthttp answers 400 (the ErrorHandler). A head that ends in CRLFCRLF
// is read as soon as its end is handed out, so no read is asked for in
// between: the watch never fails one. Cost per request: two flag writes
// (the window opens and closes), and a look at the end of each read in
// the window: a read that begins a line and ends in CRLFCRLF (a whole
// head, the common case) is done in one comparison, any other is walked
// line by line (bytes.IndexByte) to its first empty line.
//
// A head whose end was split between the bytes of an earlier read
// (pipelined, read before the answer) and those of a later one is not
// told (the watch sees only its own reads): it waits for the read
// timeout, as every lone-LF head did.
var errLoneLF = errors.New("the request head's lines end in a lone LF (not CRLF)")

// headWatch watches a client connection's reads for a head fasthttp
// waits on (above). Only the goroutine that serves the connection uses
// it.
type headWatch struct {
	open    bool // between an answer (or the start) and the next head's read
	started bool // a line that is not empty was handed out in the window
	ended   bool // the head's empty line was handed out
	cr      bool // the last byte handed out was a CR
	line    int  // bytes of the current line handed out (with a CR)
}

// start opens the window: a head is to come.
func (w *headWatch) start() { *w = headWatch{open: true} }

// stuck reports whether a read asked for now is fasthttp waiting for a
// CRLFCRLF after a whole head.
func (w *headWatch) stuck() bool { return w.open && w.ended }

var strCRLF2 = []byte("\r\n\r\n")

// saw takes in b, just handed out by a read in the window.
func (w *headWatch) saw(b []byte) {
	if w.ended || len(b) == 0 {
		return
	}
	if w.line == 0 && !w.cr && len(b) > 4 && b[0] != '\r' && b[0] != '\n' && bytes.HasSuffix(b, strCRLF2) {
		w.ended = true // a line that is not empty, then an empty one
		return
	}
	for len(b) > 0 {
		i := bytes.IndexByte(b, '\n')
		if i < 0 {
			w.line += len(b)
			w.cr = b[len(b)-1] == '\r'
			return
		}
		n := w.line + i
		if i > 0 && b[i-1] == '\r' || i == 0 && w.cr {
			n--
		}
		if n == 0 && w.started {
			w.ended = true
			return
		}
		w.started = w.started || n > 0
		w.line, w.cr = 0, false
		b = b[i+1:]
	}
}

// watchOf is the headWatch of a connection a listener of the edge
// handed out; nil for any other.
func watchOf(c net.Conn) *headWatch {
	switch c := c.(type) {
	case *movingDeadlines:
		return &c.watch
	case *tlsConn:
		return &c.watch
	}
	return nil
}

// connState is the servers' ConnState: a new connection, and one that
// has sent its answer and stays open, wait for a head.
func connState(c net.Conn, st fasthttp.ConnState) {
	if st == fasthttp.StateNew || st == fasthttp.StateIdle {
		if w := watchOf(c); w != nil {
			w.start()
		}
	}
}

// headRead closes the window of the connection whose head h is: it has
// been read. fasthttp hands HeaderReceived the header of the RequestCtx
// it serves the connection with, &ctx.Request.Header, so the ctx is
// found at a fixed offset before it.
func headRead(h *fasthttp.RequestHeader) {
	ctx := (*fasthttp.RequestCtx)(unsafe.Add(unsafe.Pointer(h), -headerOffset))
	if w := watchOf(ctx.Conn()); w != nil {
		w.open = false
	}
}

// headerOffset is where a RequestCtx's request header lies in it.
var headerOffset = func() int {
	var ctx *fasthttp.RequestCtx
	return int(unsafe.Offsetof(ctx.Request) + unsafe.Offsetof(ctx.Request.Header))
}()
