package proxy

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"net/http/httputil"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/valyala/bytebufferpool"
	"github.com/valyala/fasthttp"

	"peerdns/internal/view"
)

// The HTTP/1.1 pool for HTTP/2 and HTTP/3 requests (see the "Upstreams"
// paragraph of h2.go's comment for when and why): the request is built
// as a pooled fasthttp.Request from the http.Request, sent with the
// upstream's HostClient (the one the HTTP/1.1 edge uses), and its
// answer copied to the stream.

// viaPool reports whether r may go upstream through the HTTP/1.1 pool:
// not gRPC (it needs HTTP/2 end to end), not an upgrade, and
// a body known to be small: none, or a Content-Length of at most
// SmallBody. A GET or HEAD without a declared length (every HTTP/3
// request without a body, an HTTP/2 one whose HEADERS did not end the
// stream) is read ahead (readSmall): almost always it has no body, and
// one that has more than prefetched bytes goes to forwardHTTP.
func viaPool(r *http.Request) bool {
	if isGRPC(r) || r.Header["Upgrade"] != nil {
		return false
	}
	switch n := r.ContentLength; {
	case n >= 0:
		return n <= SmallBody
	default:
		return r.Method == http.MethodGet || r.Method == http.MethodHead
	}
}

// errBodyTooLong: a body without a declared length was longer than
// prefetched (what was read is handed on with the rest).
var errBodyTooLong = errors.New("request body of unknown length over the read-ahead")

// readSmall reads r's body whole into b.B, within ReadTimeout (the whole
// body: it is small). A declared length is read as declared (viaPool
// bounded it); a body of unknown length is read up to prefetched bytes,
// and one that turns out longer gives errBodyTooLong, with what was
// read of it in b.B.
func (s *Server) readSmall(w *h2Writer, r *http.Request, b *bytebufferpool.ByteBuffer) error {
	n := r.ContentLength
	if n == 0 {
		return nil
	}
	// A stream whose client stops sending its body is not held for
	// longer than an HTTP/1.1 connection would be (HTTP/3 may not
	// support read deadlines: its idle timeout bounds it then).
	if w.rc.SetReadDeadline(time.Now().Add(s.d.ReadTimeout)) == nil {
		defer func() { _ = w.rc.SetReadDeadline(time.Time{}) }()
	}
	if n > 0 {
		b.B = growTo(b.B, int(n))
		_, err := io.ReadFull(r.Body, b.B)
		return err
	}
	ra := readAhead.Get().(*[prefetched + 1]byte)
	defer readAhead.Put(ra)
	got := 0
	for {
		m, err := r.Body.Read(ra[got:])
		got += m
		switch {
		case got > prefetched:
			b.B = append(b.B[:0], ra[:got]...)
			return errBodyTooLong
		case err == io.EOF:
			b.B = append(b.B[:0], ra[:got]...)
			return nil
		case err != nil:
			return err
		}
	}
}

// readAhead holds the buffers a body of unknown length is read into
// until it ends or passes prefetched bytes. Almost every such body is
// empty (a GET over HTTP/3), and it is copied to the request's buffer
// only when it is not: read into the request's pooled buffer directly,
// each request grew that buffer to prefetched bytes, and bytebufferpool
// drops buffers far above the sizes it is used at, so it was an 8 KiB
// allocation a request, most of what an HTTP/3 request allocated.
var readAhead = sync.Pool{New: func() any { return new([prefetched + 1]byte) }}

func growTo(b []byte, n int) []byte {
	if cap(b) < n {
		return make([]byte, n)
	}
	return b[:n]
}

// prefixedBody is a request body whose first bytes were read ahead.
type prefixedBody struct {
	io.Reader
	io.Closer
}

// forwardPool proxies r to d's tunnel server through the HTTP/1.1 pool
// (viaPool said it may). false: it did not, and r (its body as it came)
// goes to forwardHTTP instead: a body of unknown length that was not
// small.
func (s *Server) forwardPool(w *h2Writer, r *http.Request, d *view.Domain) bool {
	// Bodies longer than what HTTP/1.1 reads with a head take their
	// length from the shared budget while they are held (body.go): a
	// connection's streams could otherwise hold MaxH2Streams of them.
	// Past the budget the body streams (forwardHTTP).
	if n := r.ContentLength; n > prefetched {
		if !s.budget.tryTake(n) {
			return false
		}
		defer s.budget.give(n)
	}
	bb := bytebufferpool.Get()
	defer func() {
		if bb != nil {
			bytebufferpool.Put(bb)
		}
	}()
	if err := s.readSmall(w, r, bb); err != nil {
		if errors.Is(err, errBodyTooLong) {
			// Handed on with the buffer: ReverseProxy reads it after
			// this returns.
			r.Body = prefixedBody{io.MultiReader(bytes.NewReader(bb.B), r.Body), r.Body}
			bb = nil
			return false
		}
		if isTimeout(err) {
			bodyStopped(w)
			return true
		}
		bodyEnded(w)
		return true
	}

	req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
	defer func() {
		fasthttp.ReleaseResponse(resp)
		fasthttp.ReleaseRequest(req)
	}()
	poolRequest(req, r)
	if len(bb.B) > 0 {
		req.SetBodyRaw(bb.B) // sent before exchange returns; bb outlives it
	}
	// The answer's Content-Type is the upstream's, or none (fasthttp
	// would read one it did not send as text/plain).
	resp.Header.SetNoDefaultContentType(true)
	resp.Header.DisableNormalizing()
	s.exchange(w, r, d, req, resp)
	return true
}

// poolRequest builds req from r: method, the URI as the client sent it
// (written as it is: the URI is never parsed, so never normalized),
// Host, its headers but the hop-by-hop ones, and the forwarding ones.
func poolRequest(req *fasthttp.Request, r *http.Request) {
	// r's header names are canonical already (both servers make them
	// so): fasthttp need not normalize them again.
	req.Header.DisableNormalizing()
	req.Header.SetNoDefaultContentType(true) // no type the client did not send, as prepare
	req.Header.SetMethod(r.Method)
	uri := r.RequestURI
	if uri == "" {
		uri = r.URL.RequestURI()
	}
	req.Header.SetRequestURI(uri)
	req.Header.SetHost(r.Host)
	for k, vs := range r.Header {
		switch k {
		case "Connection", "Keep-Alive", "Proxy-Connection", "Proxy-Authenticate", "Proxy-Authorization",
			"Te", "Trailer", "Transfer-Encoding", "Upgrade", "Content-Length", "Host",
			// The body is read whole: no 100 Continue to wait for.
			"Expect":
			continue
		}
		if underscoredForwarding(k) {
			continue
		}
		for _, v := range vs {
			req.Header.Add(k, v)
		}
	}
	ap, _ := netip.ParseAddrPort(r.RemoteAddr)
	// HTTP/2 and HTTP/3 reach the edge on TLS only: https.
	setForwarded(req, ap.Addr(), true, r.Host, hasForwarded(r.Header))
}

// hasForwarded reports whether h (net/http's: canonical names) has a
// forwarding field setForwarded replaces.
func hasForwarded(h http.Header) bool {
	return len(h["X-Forwarded-For"])+len(h["X-Forwarded-Proto"])+len(h["X-Forwarded-Host"]) > 0
}

// maxAttempts bounds the tries of an idempotent request whose pooled
// connection fails before its answer's head (fasthttp's
// MaxIdemponentCallAttempts: a keep-alive connection the upstream
// closed while it was idle).
const maxAttempts = 5

// exchange sends req to d's upstream on a connection of its keep-alive
// pool (the HostClient's) and copies the answer to w.
//
// It is fasthttp's client exchange written out (AcquireConn, write,
// read), not HostClient.Do, for one reason: a stream the client resets
// or abandons ends its upstream exchange at once (the connection is
// halted and closed), as ReverseProxy ends it through the request's
// context. HostClient.Do takes no context, and an HTTP/2 client may
// open and reset streams far faster than an HTTP/1.1 client can open
// connections (rapid reset): each abandoned exchange would hold its
// handler and its upstream connection until UpstreamTimeout.
//
// Deadlines are the upstream connection's moving ones (UpstreamTimeout
// between two reads or writes: 504 before the answer's head, a reset
// stream in its body). The answer's head and its status pass as they
// came, its Content-Length where the body is declared (so h2Writer
// flushes by it, and a small answer leaves as one HEADERS and one DATA
// frame), and its body piece by piece as it comes (flushed at each piece
// when its length is unknown, as ReverseProxy does), but for a body of
// declared length up to wholeStream: read whole before its head goes
// and written with it in one hand-off (nothing has gone when such a body
// is cut or stalls: 502 or 504, as over HTTP/1.1). An upstream that
// fails in the middle of a longer body resets the stream (the client
// must not take a cut body for a whole one), as ReverseProxy does. The
// connection goes back to the pool only when the body was read to its
// end and neither side asked to close. A kept connection on which the
// upstream sent anything while it was idle is closed unused, as the
// HTTP/1.1 edge closes it (idleSpoke).
func (s *Server) exchange(w *h2Writer, r *http.Request, d *view.Domain, req *fasthttp.Request, resp *fasthttp.Response) {
	hc := s.client(d).hc
	ctx := r.Context()
	idempotent := r.Method == http.MethodGet || r.Method == http.MethodHead || r.Method == http.MethodPut ||
		r.Method == http.MethodDelete || r.Method == http.MethodOptions
	var err error
	for attempt := 1; ; attempt++ {
		cc, aerr := hc.AcquireConn(s.d.UpstreamTimeout, false)
		if aerr != nil {
			err = aerr
			break
		}
		reused := !cc.LastUseTime().IsZero() // set when a connection goes back to the pool; CloseConn resets it
		for reused && idleSpoke(cc.Conn(), !idempotent) {
			// Closed unused, as poolTransport closes one: what the
			// upstream sent while it was idle would be read as this
			// request's answer.
			hc.CloseConn(cc)
			if cc, aerr = hc.AcquireConn(s.d.UpstreamTimeout, false); aerr != nil {
				break
			}
			reused = !cc.LastUseTime().IsZero()
		}
		if aerr != nil {
			err = aerr
			break
		}
		conn := cc.Conn()
		var halt func()
		if mc := movingOf(conn); mc != nil {
			halt = mc.halter()
		} else {
			halt = func() { _ = conn.Close() }
		}
		stop := context.AfterFunc(ctx, halt)
		br, herr := sendForHead(hc, conn, req, resp)
		// abandon ends an exchange before anything of its answer went to
		// the client; true: the client reset the stream or left, and
		// nobody is answered (the access log says 499, as ReverseProxy's
		// path).
		abandon := func() bool {
			stop()
			hc.ReleaseReader(br)
			hc.CloseConn(cc)
			if ctx.Err() != nil {
				w.WriteHeader(499)
				return true
			}
			return false
		}
		if herr != nil {
			if abandon() {
				return
			}
			if idempotent && attempt < maxAttempts && retryable(herr, reused) {
				continue
			}
			err = timedOut(herr)
			break
		}

		reuse := !resp.ConnectionClose()
		n := resp.Header.ContentLength()
		// The body, N bytes of R (none when R is nil): a concrete type,
		// so it stays on the stack.
		var body io.LimitedReader
		kind := framingOf(resp, r.Method == http.MethodHead)
		switch kind {
		case bodySized:
			body = io.LimitedReader{R: br, N: int64(n)}
			w.whole = n <= wholeStream
		case bodyChunked:
			body = io.LimitedReader{R: httputil.NewChunkedReader(br), N: math.MaxInt64}
		case bodyUntilClose:
			body, reuse, n = io.LimitedReader{R: br, N: math.MaxInt64}, false, -1
		}
		// A body read whole (w.whole) is read before its head goes, and a
		// chunked one's first byte is awaited (chunksBegin): one cut
		// there is answered 502 (504), as over HTTP/1.1.
		var bp *[]byte // the body read whole: its first n bytes
		var cut error
		switch {
		case w.whole:
			bp = copyBufs.Get().(*[]byte)
			if nr, rerr := readFull(&body, (*bp)[:n]); rerr != nil {
				copyBufs.Put(bp)
				cut = fmt.Errorf("its answer was cut after %d of %d bytes: %w", nr, n, rerr)
			}
		case kind == bodyChunked:
			cut = chunksBegin(br)
		}
		if cut != nil {
			if abandon() {
				return
			}
			err = timedOut(cut)
			break
		}
		copyHead(w, resp, r.Method == http.MethodHead || body.R != nil, n)
		sent := true
		switch {
		case bp != nil:
			// net/http's writer copies what it is handed.
			_, werr := w.Write((*bp)[:n])
			sent = werr == nil
			copyBufs.Put(bp)
		case body.R != nil:
			sent = s.copyBody(w, r, d, &body, n < 0)
		}
		clean := sent && (kind != bodyChunked || skipTrailer(br)) && nothingAfter(br)
		hc.ReleaseReader(br)
		connDone(hc, cc, stop() && clean && reuse)
		if !sent && ctx.Err() == nil {
			// The body was cut (by the upstream, or a client that took
			// nothing for WriteTimeout): the stream is reset, not ended
			// as if whole, as ReverseProxy does.
			panic(http.ErrAbortHandler)
		}
		return
	}
	status, title, msg := s.upstreamFailed(d, err)
	httpPage(w, status, title, msg)
}

// readFull is io.ReadFull on a concrete reader: given as an io.Reader,
// exchange's body would be moved to the heap, an allocation a request.
func readFull(r *io.LimitedReader, p []byte) (int, error) {
	n := 0
	for n < len(p) {
		k, err := r.Read(p[n:])
		n += k
		if err != nil {
			if err == io.EOF && n < len(p) {
				err = io.ErrUnexpectedEOF
			}
			if n == len(p) {
				err = nil
			}
			return n, err
		}
	}
	return n, nil
}

// movingOf is the moving-deadline connection under c (under TLS for a
// claim with ssl: true).
func movingOf(c net.Conn) *movingDeadlines {
	if tc, ok := c.(*tls.Conn); ok {
		c = tc.NetConn()
	}
	mc, _ := c.(*movingDeadlines)
	return mc
}

// copyHead writes the answer's status and headers but the hop-by-hop
// ones and those its Connection headers name (as dropHopResponse), with
// Content-Length n when the answer has a body (or is to a
// HEAD) and n is known.
//
// The values are made in two allocations, not two per header: one
// string holding them all (each value a substring of it) and one array
// of one-value slices (each header's slice a part of it, capacity 1, so
// an Add to a header gets an array of its own). The headers are walked
// twice (fasthttp hands a Set-Cookie value in a buffer it reuses for
// the next: each value is copied when it is visited).
func copyHead(w *h2Writer, resp *fasthttp.Response, withLength bool, n int) {
	type field struct {
		name string
		size int
	}
	var stack [24]field
	fields := stack[:0]
	size := 0
	var kept [64]byte
	nominated := kept[:0] // the names the Connection headers give (dropHopResponse)
	for k, v := range resp.Header.All() {
		name := headerName(k)
		switch name {
		case "Connection":
			nominated = appendNominees(nominated, v)
			name = ""
		case "Keep-Alive", "Proxy-Connection", "Proxy-Authenticate", "Proxy-Authorization",
			"Te", "Trailer", "Transfer-Encoding", "Upgrade", "Content-Length",
			"Alt-Svc": // the upstream's own ports (route sets the edge's)
			name = ""
		}
		fields = append(fields, field{name, len(v)})
		if name != "" {
			size += len(v)
		}
	}
	if len(nominated) > 0 {
		named := nomineesOf(nominated)
		for i, f := range fields {
			if f.name != "" && named.has(s2b(f.name)) {
				fields[i].name = ""
				size -= f.size
			}
		}
	}
	var arena strings.Builder
	arena.Grow(size)
	i := 0
	for _, v := range resp.Header.All() {
		if i < len(fields) && fields[i].name != "" && len(v) == fields[i].size {
			arena.Write(v)
		}
		i++
	}
	all := arena.String()
	if len(all) != size {
		all = "" // not the same walk twice (cannot happen): values empty rather than wrong
	}
	vals := make([]string, len(fields)+1) // and Content-Length
	hd := w.Header()
	at := 0
	for i, f := range fields {
		if f.name == "" {
			continue
		}
		var val string
		if all != "" {
			val = all[at : at+f.size]
		}
		at += f.size
		if vs, ok := hd[f.name]; ok {
			hd[f.name] = append(vs, val)
			continue
		}
		vals[i] = val
		hd[f.name] = vals[i : i+1 : i+1]
	}
	if withLength && n >= 0 {
		vals[len(fields)] = strconv.Itoa(n)
		hd["Content-Length"] = vals[len(fields):]
	}
	w.WriteHeader(resp.StatusCode())
}

// copyBody copies an answer's body to w as it comes, flushing each
// piece when flush (a body of unknown length); true: the body was read
// to its end and written. An upstream that fails in its middle is
// logged; a client that took nothing for WriteTimeout is counted by
// h2Writer.
func (s *Server) copyBody(w *h2Writer, r *http.Request, d *view.Domain, body *io.LimitedReader, flush bool) bool {
	bp := copyBufs.Get().(*[]byte)
	defer copyBufs.Put(bp)
	buf := *bp
	for {
		n, rerr := body.Read(buf)
		if n > 0 {
			if _, err := w.Write(buf[:n]); err != nil {
				return false
			}
			if flush {
				w.Flush()
			}
		}
		switch {
		case rerr == io.EOF:
			return true
		case rerr != nil:
			if r.Context().Err() == nil { // else the client left, and the exchange was halted
				s.d.Log.Warn("upstream answer cut", "domain", d.Name, "hash", short(d.Hash), "err", rerr)
			}
			return false
		}
	}
}

// staleConn reports whether err, before any of the answer came, is a
// pooled connection the upstream had closed (nothing read, or the write
// refused): an idempotent request is tried again.
func staleConn(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE)
}

// retryable reports whether an idempotent request whose answer's head
// could not be had (err) is tried again on another connection: its
// pooled connection was found closed (staleConn), or, one that had
// served an exchange before (reused), it held what is no answer's head:
// bytes an upstream sent past its previous answer once that answer had
// been read (a body after the answer to a HEAD, or longer than its
// Content-Length), which nothingAfter cannot see. Never after a timeout:
// the upstream had the request and said nothing for UpstreamTimeout;
// asked again, the client waited one timeout per attempt, and an
// upstream that answers no head the edge can read on a fresh connection
// is asked once. Nor for a head that was read and refused
// (refusedAnswer: too many fields, an unasked 101, a status below 100):
// that was the upstream's answer to this request.
func retryable(err error, reused bool) bool {
	if staleConn(err) {
		return true
	}
	if refusedAnswer(err) {
		return false
	}
	return reused && !errors.Is(timedOut(err), fasthttp.ErrTimeout)
}

// refusedAnswer reports whether err is an answer's head that was read
// and refused (readHead): the upstream had the request and answered it,
// so it is not asked again.
func refusedAnswer(err error) bool {
	for _, e := range []error{errBothLengths, errOldCoding, errTooManyFields, errLowStatus, errUnaskedSwitch, errTooManyInformational} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

// skipTrailer reads a chunked body's trailer section up to its blank
// line (the chunked reader stops at the last chunk), so the connection
// is left at the next answer; false: it could not be.
func skipTrailer(br *bufio.Reader) bool {
	for range 100 {
		line, err := br.ReadSlice('\n')
		if err != nil {
			return false
		}
		if len(line) <= 2 && (len(line) == 1 || line[0] == '\r') {
			return true
		}
	}
	return false
}

// headerName is k as a canonical header name, without allocating for
// the names most answers carry.
func headerName(k []byte) string {
	switch string(k) {
	case "Content-Length":
		return "Content-Length"
	case "Content-Type":
		return "Content-Type"
	case "Date":
		return "Date"
	case "Server":
		return "Server"
	case "Last-Modified":
		return "Last-Modified"
	case "ETag", "Etag":
		return "Etag"
	case "Accept-Ranges":
		return "Accept-Ranges"
	case "Cache-Control":
		return "Cache-Control"
	case "Content-Encoding":
		return "Content-Encoding"
	case "Vary":
		return "Vary"
	case "Set-Cookie":
		return "Set-Cookie"
	case "Location":
		return "Location"
	case "Connection":
		return "Connection"
	case "Keep-Alive":
		return "Keep-Alive"
	case "Transfer-Encoding":
		return "Transfer-Encoding"
	case "Expires":
		return "Expires"
	}
	return http.CanonicalHeaderKey(string(k))
}
