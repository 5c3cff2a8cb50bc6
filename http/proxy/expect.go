package proxy

import (
	"bytes"
	"time"

	"github.com/valyala/fasthttp"
)

// "Expect: 100-continue" (RFC 9110 §10.1.1) is the edge's to answer, as
// nginx answers it: the client holds its body back until it is told
// 100 Continue, and the edge says it only once it has routed the
// request and will read that body.
//
//   - A request with a body for a route the edge serves (a p2p domain,
//     the admin domain, a plugin's) gets 100 Continue, then its body is
//     read and passed on as any other. A chunked body the admin API or
//     a plugin finds over its limit once read is refused (413) after
//     the 100, as one sent without Expect.
//   - One the edge refuses whatever its body (no Host, a head it
//     refuses, a host not served here), or whose declared length is
//     over the limit of the route served in-process it goes to
//     (admin.MaxBody, pluginweb.MaxBody: 413), gets its error at once,
//     with no 100 Continue, its body unread, and the connection is
//     closed after the answer (lingering: the client may send its body
//     anyway). nginx answers so (413 for a Content-Length over
//     client_max_body_size, before any 100).
//   - One with no body (no Content-Length or a zero one, not chunked)
//     gets no 100 Continue: there is nothing to wait for, and a client
//     that read a 100 before the answer would take it for the answer
//     (RFC 9110 forbids such an expectation; the edge ignores it). Nor
//     does an HTTP/1.0 request (RFC 9110: the expectation is ignored
//     there).
//
// The value is compared in any case ("100-Continue" too: fasthttp
// compares it as written, and a client that wrote it otherwise waited
// for a 100 that never came while the edge waited for its body). The
// Expect header is never passed upstream (nor is any other expectation,
// which the edge ignores): the edge has answered it, and an upstream
// that answered it again would send a 100 nobody waits for
// (headNames.expect, prepare).

var (
	strExpect      = []byte("Expect")
	str100Continue = []byte("100-continue")
)

// headerReceived is the servers' HeaderReceived: the head is read
// (headRead), and its expectation looked at (noExpectation).
func headerReceived(h *fasthttp.RequestHeader) fasthttp.RequestConfig {
	headRead(h)
	return noExpectation(h)
}

// noExpectation takes away a
// 100-continue expectation fasthttp would answer 100 Continue to
// although the request has no body or is HTTP/1.0, and writes one in
// another case as fasthttp reads it. Run for every request: a lookup of
// one name among the head's (Peek, about as much as the Host lookup
// serve makes), nothing else unless the request has an Expect.
func noExpectation(h *fasthttp.RequestHeader) fasthttp.RequestConfig {
	v := h.PeekBytes(strExpect)
	if v == nil {
		return fasthttp.RequestConfig{}
	}
	n := h.ContentLength()
	switch {
	case n == 0 || n == -2 || !h.IsHTTP11(): // no body (-2: no framing), or HTTP/1.0
		h.DelBytes(strExpect)
	case !bytes.Equal(v, str100Continue) && bytes.EqualFold(v, str100Continue):
		h.SetBytesKV(strExpect, str100Continue)
	}
	return fasthttp.RequestConfig{}
}

// expectContinue is the servers' ExpectHandler, asked about a request
// with a body that waits for 100 Continue: 100 when the edge will take
// the body; otherwise the request is answered here (answer), and its
// status given to fasthttp, which then sends that answer instead and
// closes the connection.
func (s *Server) expectContinue(ctx *fasthttp.RequestCtx) int {
	if !s.answer(ctx, time.Now(), true) {
		return fasthttp.StatusContinue
	}
	closeAfter(ctx)
	return ctx.Response.StatusCode()
}
