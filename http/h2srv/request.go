package h2srv

import (
	"context"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// onHeaders opens a stream, or takes a request's trailers.
func (c *conn) onHeaders(f *http2.MetaHeadersFrame) error {
	id := f.StreamID
	cfg := &c.srv.cfg
	if id%2 == 0 {
		return connError{http2.ErrCodeProtocol, "headers_even_id"}
	}
	c.mu.Lock()
	if s := c.streams[id]; s != nil {
		c.onTrailersLocked(s, f)
		c.mu.Unlock()
		return nil
	}
	if id <= c.maxID {
		// Trailers sent before our reset or GOAWAY arrived.
		ignore := c.ignoredLocked(id)
		c.mu.Unlock()
		if ignore {
			return nil
		}
		return connError{http2.ErrCodeProtocol, "headers_closed_stream"}
	}
	c.maxID = id
	switch {
	case c.goAwaySent:
		// A stream past the last one the GOAWAY announced: never served.
		c.mu.Unlock()
		return nil
	case f.HasPriority() && f.Priority.StreamDep == id:
		c.streamFault("priority_self")
		c.writeRSTLocked(id, http2.ErrCodeProtocol)
		c.mu.Unlock()
		return nil
	case uint32(len(c.streams)) >= cfg.MaxConcurrentStreams:
		c.srv.countError("refused_stream")
		c.writeRSTLocked(id, http2.ErrCodeRefusedStream)
		c.mu.Unlock()
		return nil
	case f.Truncated:
		c.srv.countError("header_list_too_large")
		// Queued without waiting, as the control frames are, and
		// counted with them: a client that reads nothing would
		// otherwise grow the output by an answer per list.
		c.controlLocked()
		c.writeStatus(http.StatusRequestHeaderFieldsTooLarge)
		c.writeField("date", httpDate())
		c.writeField("content-length", "0")
		c.writeHeaderBlockLocked(id, true)
		if !f.StreamEnded() {
			c.writeRSTLocked(id, http2.ErrCodeNo)
		}
		c.mu.Unlock()
		return nil
	}
	c.mu.Unlock()

	s, kind := c.newStream(f)
	c.mu.Lock()
	defer c.mu.Unlock()
	if kind != "" {
		c.streamFault(kind)
		c.writeRSTLocked(id, http2.ErrCodeProtocol)
		return nil
	}
	c.streams[id] = s
	if c.running < int(cfg.MaxConcurrentStreams) {
		c.running++
		c.pool.start(s)
		return nil
	}
	s.queued = true
	c.queue = append(c.queue, s)
	return nil
}

// forbiddenField reports a field RFC 9113 §8.2.2 makes a request
// malformed with: a connection-specific one, or TE other than
// "trailers".
func forbiddenField(hf hpack.HeaderField) bool {
	return connectionSpecific(hf.Name) || badTE(hf)
}

// badTE reports a TE field other than "trailers", the one value HTTP/2
// allows it.
func badTE(hf hpack.HeaderField) bool { return hf.Name == "te" && hf.Value != "trailers" }

// onTrailersLocked takes a second HEADERS on an open stream: the
// request's trailers, which must end the stream (RFC 9113 §8.1).
func (c *conn) onTrailersLocked(s *stream, f *http2.MetaHeadersFrame) {
	code := http2.ErrCodeProtocol
	kind := ""
	switch {
	case s.recvDone:
		code, kind = http2.ErrCodeStreamClosed, "headers_half_closed"
	case !f.StreamEnded():
		kind = "trailers_no_end_stream"
	case f.Truncated:
		// Over MaxHeaderListSize: the Framer dropped fields, and the
		// handler would take what is left for the whole.
		kind = "trailers_too_large"
	case len(f.PseudoFields()) > 0:
		kind = "trailers_pseudo"
	case slices.ContainsFunc(f.RegularFields(), forbiddenField):
		// RFC 9113 §8.2.2 holds for every field section.
		kind = "trailers_connection_specific"
	case s.declLen >= 0 && s.recvd != s.declLen:
		kind = "content_length"
	}
	if kind != "" {
		c.streamFault(kind)
		err := errStreamReset
		if kind == "content_length" {
			// As in onData: the handler sees the cause.
			err = ErrBadLength
			s.cancel(err)
		}
		s.resetLocked(err)
		c.closeStreamLocked(s)
		c.writeRSTLocked(s.id, code)
		return
	}
	if t := s.req.Trailer; t != nil {
		// Only the trailers the request declared are kept, so that the
		// map the handler holds is filled, never replaced.
		for _, hf := range f.RegularFields() {
			k := canonicalKey(hf.Name)
			if _, ok := t[k]; ok {
				t[k] = append(t[k], hf.Value)
			}
		}
	}
	s.recvDone = true
	if s.localDone {
		c.closeStreamLocked(s)
	}
	s.cond.Broadcast()
}

// newStream builds a stream and its request from a HEADERS frame; kind
// names what makes it malformed (RFC 9113 §8.1.1), if anything does.
func (c *conn) newStream(f *http2.MetaHeadersFrame) (*stream, string) {
	cfg := &c.srv.cfg
	var method, scheme, path, authority string
	for _, hf := range f.PseudoFields() {
		switch hf.Name {
		case ":method":
			method = hf.Value
		case ":scheme":
			scheme = hf.Value
		case ":path":
			path = hf.Value
		case ":authority":
			authority = hf.Value
		default:
			// :status, or :protocol (extended CONNECT is not offered).
			return nil, "pseudo_header"
		}
	}
	if method == "" {
		return nil, "no_method"
	}
	connect := method == "CONNECT"
	switch {
	case connect && (scheme != "" || path != "" || authority == ""):
		// RFC 9113 §8.5: :authority only.
		return nil, "connect_pseudo_headers"
	case !connect && (scheme == "" || path == ""):
		return nil, "no_path_or_scheme"
	}
	regular := f.RegularFields()
	h := make(http.Header, len(regular))
	// One backing array for the values: a field's value slice has
	// room for exactly one, so a repeated field copies out of it.
	vals := make([]string, len(regular))
	declLen := int64(-1)
	needContinue := false
	var cookies []string
	var host string
	for _, hf := range regular {
		switch {
		case connectionSpecific(hf.Name):
			return nil, "connection_specific_field"
		case badTE(hf):
			return nil, "te_field"
		case hf.Name == "content-length":
			n, err := strconv.ParseUint(hf.Value, 10, 63)
			if err != nil || declLen >= 0 && int64(n) != declLen {
				return nil, "content_length_field"
			}
			declLen = int64(n)
		case hf.Name == "cookie":
			cookies = append(cookies, hf.Value)
			continue
		case hf.Name == "expect" && strings.EqualFold(hf.Value, "100-continue"):
			needContinue = true
			continue
		case hf.Name == "host":
			host = hf.Value
		}
		k := canonicalKey(hf.Name)
		if vv, ok := h[k]; ok {
			h[k] = append(vv, hf.Value)
		} else {
			vals[0] = hf.Value
			h[k] = vals[:1:1]
			vals = vals[1:]
		}
	}
	if len(cookies) > 0 {
		h["Cookie"] = []string{strings.Join(cookies, "; ")}
	}
	if f.StreamEnded() && declLen > 0 {
		return nil, "content_length_field"
	}
	var u *url.URL
	if connect {
		// As net/http: the target in URL.Host and RequestURI.
		u, path = &url.URL{Host: authority}, authority
	} else {
		var err error
		if u, err = url.ParseRequestURI(path); err != nil {
			return nil, "bad_path"
		}
	}
	if authority == "" {
		authority = host
	}

	s := &stream{
		c:       c,
		id:      f.StreamID,
		declLen: declLen,
		inflow:  int64(cfg.StreamWindow),
		sendWin: c.peerInitWin,
		wlen:    -1,
		hdr:     make(http.Header, 4),
	}
	s.cond.L = &c.mu
	s.body.s = s
	s.ctx, s.cancel = context.WithCancelCause(c.ctx)
	var zero http.Request
	r := zero.WithContext(s.ctx)
	r.Method = method
	r.URL = u
	r.RequestURI = path
	r.Proto = "HTTP/2.0"
	r.ProtoMajor = 2
	r.Header = h
	r.Host = authority
	r.RemoteAddr = c.remote
	r.TLS = c.tlsState
	if f.StreamEnded() {
		s.recvDone = true
		r.Body = http.NoBody
		r.ContentLength = 0
	} else {
		s.needContinue = needContinue
		r.Body = &s.body
		r.ContentLength = declLen
		for _, v := range h["Trailer"] {
			for _, k := range strings.Split(v, ",") {
				if k = strings.TrimSpace(k); k != "" {
					if r.Trailer == nil {
						r.Trailer = make(http.Header)
					}
					r.Trailer[http.CanonicalHeaderKey(k)] = nil
				}
			}
		}
	}
	s.isHead = method == "HEAD"
	s.req = r
	return s, ""
}

// run serves s, then the streams queued for a handler slot, on this
// goroutine.
func (c *conn) run(s *stream) {
	for s != nil {
		c.serveStream(s)
		c.mu.Lock()
		c.running--
		s = nil
		if len(c.queue) > 0 && !c.closed {
			s = c.queue[0]
			c.queue[0] = nil
			c.queue = c.queue[1:]
			s.queued = false
			c.running++
		}
		c.maybeCloseLocked()
		c.mu.Unlock()
	}
}

// holdPool holds the buffers response bodies are gathered in until the
// handler returns, flushes, or writes more than one holds.
var holdPool = sync.Pool{New: func() any { b := make([]byte, 0, holdSize); return &b }}

const holdSize = 16 << 10
