package proxy

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptrace"
	"net/http/httputil"
	"net/netip"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/valyala/fasthttp"
	"golang.org/x/net/http/httpguts"

	"peerdns/http/admin"
	"peerdns/http/h2srv"
	"peerdns/http/httpx"
	"peerdns/http/pluginweb"
	"peerdns/internal/stack"
	"peerdns/internal/view"
)

// HTTP/2 and HTTP/3 on the HTTPS edge.
//
// The TLS listener offers ALPN h2 and http/1.1. A connection that
// negotiates http/1.1 stays on fasthttp (the hot path, unchanged); one
// that negotiates h2 is handed (fasthttp's NextProto, after the handshake
// on the connection's own goroutine) to the edge's HTTP/2 server
// (http/h2srv), whose handler (serveHTTP) routes exactly as the fasthttp
// one does: by :authority, with the same route table snapshot, tunnel
// dialer and certificates (the certificate was picked by SNI in the
// handshake). The HTTP/3 server (h3.go) uses the same handler.
//
// Why a server of the edge's own, on x/net's framer and HPACK, and not
// net/http's: net/http's HTTP/2 server started three to four goroutines
// per request (the handler's; the response's HEADERS frame, always
// written on one of its own; the flush of its write buffer) and handed
// each frame between the handler and its serve loop over channels; with
// no proxy work at all it read 0.37x nginx's HTTP/2 proxy under h2load
// (bench/README.md). h2srv's package doc says what it does instead and
// which attacks it bounds (rapid reset, CONTINUATION floods, control
// frame floods, a client that holds the flow-control window). The HTTP/2
// layer for fasthttp (dgrr/http2) is far younger and less used, and gRPC
// needs streaming both ways with trailers, which h2srv gives through the
// standard http.Handler interface. Every protocol error the server counts
// (its CountError hook) adds to Counters.H2Errors; a connection it
// closes with an error (a CONTINUATION flood among them) to
// Counters.H2ConnErrors (h2count.go).
//
// Limits: MaxH2Streams concurrent streams per connection (nginx's
// default, 128), a header list of at most MaxHeaderBytes (the HTTP/1.1
// limit; over it the stream gets 431, counted: h2count.go), idle
// connections closed after IdleTimeout. A stream whose client takes none
// of its response for WriteTimeout (a peer that holds the flow-control
// window: it never sends WINDOW_UPDATE, or never reads the socket) is
// reset, its upstream request abandoned, and counted
// (Counters.H2Stalled); the connection's other streams go on. A
// connection whose client reads nothing for WriteTimeout is closed, as
// for HTTP/1.1. The node's /metrics shows these counts
// (peerdns_edge_http2_protocol_errors_total,
// peerdns_edge_http2_connection_errors_total,
// peerdns_edge_streams_stalled_total) and the HTTP/2 and HTTP/3
// connections open (peerdns_edge_multiplexed_connections).
//
// Upstreams of HTTP/2 and HTTP/3 clients. Most requests (no gRPC, no
// upgrade, a body known to be small: none, or a declared
// length of at most SmallBody, or a GET or HEAD whose body, read ahead,
// turns out to be empty or short) go the way HTTP/1.1 requests go: a pooled
// fasthttp request built from the stream's, a connection of the
// upstream's HostClient pool (the same keep-alive connections, in TLS
// for a claim with ssl: true), and the answer copied to the stream
// (h2fast.go; the exchange is written out over the pool's connections,
// so that a stream the client resets ends its exchange at once). Why: net/http's Transport
// under ReverseProxy cost per request a clone of the request, a hand-off
// to the connection's write goroutine and back from its read goroutine,
// and the allocations of both; profiled under h2load (bench/README.md,
// "edge HTTP/2") it and ReverseProxy were the largest part of what the
// edge spent per request beyond nginx's HTTP/2 proxy, while the pooled
// exchange runs on the stream's own goroutine with pooled objects.
// Nothing is lost for such a request: an HTTP/1.1 upstream is spoken to
// in HTTP/1.1 either way (an ssl claim that would have picked
// h2 in ALPN now gets HTTP/1.1, as from the HTTP/1.1 edge), a small
// body is read whole first, within ReadTimeout, as the HTTP/1.1 edge
// does (408 when it stops coming, 400 when it ends early), the
// forwarding headers are the same (X-Forwarded-Proto https), and the
// answer keeps its Content-Length, so h2Writer's flushing rules below
// hold. An answer passes piece by piece as it comes (flushed at each
// piece when its length is unknown); one cut by its upstream before any
// of it went (a body of up to 64 KiB, read whole; a chunked one before
// its first chunk) is 502, one cut later resets the stream. Not passed
// this way: trailers of a chunked HTTP/1.1 answer (read and dropped).
// Memory: a body of up to prefetched bytes is held as an HTTP/1.1
// connection holds the part it reads with a head; a longer one takes
// its length from the shared body budget (body.go) while it is held,
// and past the budget streams through ReverseProxy instead, so a
// connection's MaxH2Streams streams cannot each hold SmallBody.
//
// The rest (gRPC, large or streamed uploads, upgrades) goes through
// net/http's reverse proxy (httputil.ReverseProxy) over the same tunnel
// dialer, with its own keep-alive pool per upstream (the fasthttp pool
// speaks HTTP/1.1 only):
//
//   - A gRPC request (Content-Type application/grpc...) to a claim
//     without ssl goes to the upstream in h2c (HTTP/2 with prior
//     knowledge, streams multiplexed on one tunnel connection); with
//     ssl: true, in TLS with ALPN h2. gRPC needs HTTP/2 end to end:
//     trailers and streaming both ways pass. An upstream that cannot be
//     reached gives a trailers-only answer with grpc-status 14
//     (UNAVAILABLE); one that fails in the middle of a response ends it
//     with grpc-status 14 in the trailers (the client sees a status, not
//     a reset).
//   - Any other request to a claim without ssl goes in HTTP/1.1 (an
//     upstream is not assumed to speak h2c); with ssl: true, TLS with
//     ALPN h2 and http/1.1, the upstream picks.
//
// In HTTP/1.1 (plain or in TLS), UpstreamTimeout is between two reads
// or writes, as on the HTTP/1.1 path, and the wait for an answer counts
// from the request's last write: an upload may take as long as it keeps
// flowing. In HTTP/2 (h2c, or TLS with h2) the connection's pings find
// a dead upstream; a gRPC stream may be quiet for long (a watch) and
// ends with a status once its connection does; any other answer's read
// that waits UpstreamTimeout for a byte resets its stream (quietAnswer).
//
// Through ReverseProxy, request bodies stream both ways with the
// response (full duplex, as gRPC needs). A body other than gRPC's is
// read with ReadTimeout between two reads, as over HTTP/1.1, 408 past
// it: net/http's Transport ends no exchange, not even one whose
// upstream connection timed out, before its write of the body does, so
// a client that holds its body back would hold the exchange for good.
// Such a body (one not read whole first: over SmallBody, or of unknown
// length on a method other than GET and HEAD) counts against the
// upstream's MaxUploads with the HTTP/1.1 path's uploads: past it, 503
// with Retry-After: 1.
//
// The in-process routes (admin API and panel, DoH, plugins) take their
// body whole within their limits and the shared budget, and are served
// by their fasthttp handler on a request built from the HTTP/2 one
// (fastBridge). WebSocket over HTTP/2 (RFC 8441) is not offered: a
// browser opens an HTTP/1.1 connection for it.
const MaxH2Streams = 128

// newH2 builds the HTTP/2 server of s (http/h2srv), fed the connections
// that negotiated h2 by fasthttp's NextProto.
func (s *Server) newH2() {
	s.h2handler = http.HandlerFunc(s.serveHTTP)
	s.h2base = h2Context(context.Background())
	s.h2 = h2srv.New(h2srv.Config{
		MaxConcurrentStreams: MaxH2Streams,
		// Twice the edge's limit: route answers lists over
		// MaxHeaderBytes itself (and counts them); past this, the server
		// answers 431 on its own (uncounted) or, for a block sent far
		// past it, closes the connection (counted).
		MaxHeaderListSize: 2 * MaxHeaderBytes,
		// 16 KiB, the protocol's default (and nginx's).
		MaxReadFrameSize: 16 << 10,
		// Request bodies unread upstream: as over HTTP/3 (h3.go).
		StreamWindow: H2Window,
		ConnWindow:   H2Window,
		IdleTimeout:  s.d.IdleTimeout,
		CountError: func(kind string) {
			s.h2errors.Add(1)
			s.d.Log.Debug("http2 protocol error", "kind", kind)
		},
		ConnError: func(err error) {
			s.h2connErrors.Add(1)
			s.d.Log.Debug("http2 connection error", "err", err)
		},
	})
	s.https.NextProto("h2", s.serveH2Conn)
}

// serveH2Conn serves one connection that negotiated h2 until it ends
// (fasthttp closes it again when this returns). h2srv sees the
// *tls.Conn itself, so that it refuses a TLS 1.2 connection whose cipher
// suite RFC 9113 §9.2.2 forbids (GOAWAY INADEQUATE_SECURITY, counted
// with the protocol errors).
func (s *Server) serveH2Conn(c net.Conn) error {
	tc := c
	if w, ok := c.(*tlsConn); ok {
		tc = w.Conn
		if mc, ok := w.NetConn().(*movingDeadlines); ok {
			mc.gather() // gather.go
		}
	}
	s.h2open.Add(1)
	defer s.h2open.Add(-1)
	_ = s.h2.ServeConn(s.h2base, tc, s.h2handler)
	return nil
}

// h2Context is the base context of every HTTP/2 request: ctx with
// servedBy under http.ServerContextKey, as net/http's server's requests
// carry their server. httputil.ReverseProxy aborts the handler (panic
// http.ErrAbortHandler) when an answer's body breaks off only for a
// request that has one, and returns as if the answer were whole
// otherwise, so that a gRPC call whose upstream went away mid-stream
// would end without its status (forwardHTTP turns the abort into
// grpc-status 14). HTTP/3 connections get the same (h3.go's
// ConnContext): quic-go's http3 sets only its own http3.ServerContextKey.
func h2Context(ctx context.Context) context.Context {
	return context.WithValue(ctx, http.ServerContextKey, servedBy)
}

// servedBy serves nothing: it says which limits the edge's HTTP/2 and
// HTTP/3 keep, for code that reads a request's server.
var servedBy = &http.Server{
	MaxHeaderBytes: 2 * MaxHeaderBytes,
	IdleTimeout:    IdleTimeout,
}

// shutdownH2 sends GOAWAY on every HTTP/2 connection, waits until ctx
// ends for their streams to end, then closes what is left.
func (s *Server) shutdownH2(ctx context.Context) {
	if s.h2.Shutdown(ctx) != nil {
		_ = s.h2.Close()
	}
}

// shutdownGrace is how long Shutdown waits for requests in flight.
const shutdownGrace = 5 * time.Second

// h2Writer is a stream's ResponseWriter as the edge sees it: the status
// and bytes for the access log, the write deadline moved at each write
// (WriteTimeout between two writes: a stream whose client holds the
// flow-control window is reset, not kept forever), and when what was
// written goes to the client.
//
// Flushing follows the HTTP/1.1 path (flush.go): a response whose
// declared length is over writeBuffer gets its head at once and each
// piece of its body as it is written; one of writeBuffer or less is
// held until the handler returns (for at most its own length), so its
// HEADERS and its one DATA frame with END_STREAM go out together. A
// response of unknown length is flushed by ReverseProxy after each
// piece (FlushInterval: 0 leaves only those to it). Flushing every
// response at once, as FlushInterval -1 did, cost per request a timer
// goroutine (ReverseProxy's first flush runs in one), a HEADERS frame
// of its own and an empty DATA frame to end the stream, each a round
// trip to the connection's serving goroutine, and with it a TLS record
// and a write system call: the largest part of what the edge's HTTP/2
// spent beyond nginx's on small responses (bench/README.md).
type h2Writer struct {
	http.ResponseWriter
	// rc is held by value: one allocation less per request than the
	// pointer NewResponseController returns.
	rc      http.ResponseController
	s       *Server
	status  int
	bytes   int
	length  int64 // the declared Content-Length, -1 when none (set with the status)
	until   time.Time
	stalled bool
	// whole: the answer's body is written in one Write (exchange read
	// it whole), so its head waits for it instead of being flushed alone.
	whole bool
	// altSvc: the answer carries the edge's Alt-Svc (HTTP/2, with
	// HTTP/3 on), set as its head goes (start).
	altSvc bool
}

// WriteHeader passes an informational answer (ReverseProxy's copy of
// an upstream's 103) without the upstream's Alt-Svc: it names the
// upstream's ports, as in a final answer (h2Upstream.RoundTrip).
func (w *h2Writer) WriteHeader(code int) {
	if w.status == 0 && code >= 200 {
		w.start(code)
	} else if code < 200 {
		delete(w.Header(), "Alt-Svc")
	}
	w.ResponseWriter.WriteHeader(code)
	if code >= 200 && w.length > writeBuffer && !w.whole {
		w.Flush()
	}
}

// start notes the answer's status and declared length as its head
// goes, keeps its type unguessed (noSniff), names the edge in an answer
// without a Server field (its own pages, an upstream's answer without
// one), as fasthttp does on HTTP/1.1, and sets the edge's Alt-Svc
// (altSvc). Here and not before the handler runs: ReverseProxy clears
// the answer's header map after it passed on an informational answer,
// and a final answer after a 103 then went without it.
func (w *h2Writer) start(code int) {
	w.status = code
	h := w.Header()
	w.length = declaredLength(h)
	noSniff(h)
	if _, ok := h["Server"]; !ok {
		h["Server"] = serverName
	}
	if w.altSvc {
		// Shared, never changed: the servers copy the values they send.
		h["Alt-Svc"] = w.s.altSvcs
	}
}

// serverName is the Server field's value, shared by every answer and
// never changed (as altSvcs).
var serverName = []string{"peerdns"}[:1:1]

// noSniff keeps an answer without a Content-Type without one: quic-go's
// server would otherwise write the type it guesses from the body's
// first bytes (DetectContentType), which an upstream did not say and a
// browser would believe. A name with no values stops the guess and
// writes no field (the HTTP/2 server guesses nothing either way).
func noSniff(h http.Header) {
	if _, ok := h["Content-Type"]; !ok {
		h["Content-Type"] = nil
	}
}

// headLength keeps a HEAD answer that the handler wrote no body to and
// named no length for without a Content-Length: quic-go's server would
// send the bytes written, 0, and a HEAD answer may only name its GET's
// length (RFC 9110 §8.6). A name with no values writes no field (as in
// noSniff). A HEAD answer the handler wrote its body to gets its length
// from quic-go, which counts the bytes and drops them.
func headLength(h http.Header) {
	if _, ok := h["Content-Length"]; !ok {
		h["Content-Length"] = nil
	}
}

func (w *h2Writer) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.start(http.StatusOK)
	}
	w.move()
	n, err := w.ResponseWriter.Write(b)
	w.bytes += n
	if err != nil && !w.stalled && time.Now().After(w.until) {
		w.stalled = true
		w.s.h2stalled.Add(1)
	}
	if err == nil && w.length > writeBuffer && int64(w.bytes) < w.length {
		w.Flush()
	}
	return n, err
}

// declaredLength is h's Content-Length, or -1.
func declaredLength(h http.Header) int64 {
	v := h["Content-Length"]
	if len(v) == 0 {
		return -1
	}
	n, err := strconv.ParseInt(v[0], 10, 64)
	if err != nil || n < 0 {
		return -1
	}
	return n
}

// move sets the write deadline WriteTimeout ahead, once it is an eighth
// of it behind (as movingDeadlines does).
func (w *h2Writer) move() {
	now := time.Now()
	every := w.s.d.WriteTimeout
	if t := now.Add(every); t.Sub(w.until) > every/8 {
		w.until = t
		_ = w.rc.SetWriteDeadline(t)
	}
}

func (w *h2Writer) Flush() {
	w.move()
	if err := w.rc.Flush(); err != nil && !w.stalled && time.Now().After(w.until) {
		w.stalled = true
		w.s.h2stalled.Add(1)
	}
}

func (w *h2Writer) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// serveHTTP routes one HTTP/2 or HTTP/3 request, as serve does an
// HTTP/1.1 one. Each HTTP/2 request is handled on a goroutine of its
// own, so its stack is grown first (internal/stack): left to grow as the
// handling goes deeper it was copied several times per request, 6-8% of
// the node's CPU under h2load, against 4-5% for one early growth.
// HTTP/3 requests are left to grow: measured under h3load, neither way
// read better than the noise.
func (s *Server) serveHTTP(rw http.ResponseWriter, r *http.Request) {
	if r.ProtoMajor == 2 {
		stack.Grow()
	} else if hc := h3ConnOf(r); hc != nil {
		hc.running.Add(1)
		defer hc.ended()
	}
	s.route(rw, r)
}

func (s *Server) route(rw http.ResponseWriter, r *http.Request) {
	start := time.Now()
	w := &h2Writer{ResponseWriter: rw, rc: *http.NewResponseController(rw), s: s, altSvc: s.altSvc != "" && r.ProtoMajor == 2}
	upstream := ""
	defer func() {
		if w.status == 0 && w.altSvc {
			w.start(http.StatusOK) // nothing written: the 200 the server sends
		}
		if r.ProtoMajor == 3 && w.bytes == 0 && r.Method == http.MethodHead {
			headLength(rw.Header())
		}
		st := w.status
		if st == 0 {
			st = http.StatusOK
		}
		end := time.Now()
		el := end.Sub(start)
		s.finished(st, el)
		s.routes.add(upstream, st, r.ContentLength, int64(w.bytes))
		s.sendAccess(accessLine{method: methodString([]byte(r.Method)), host: r.Host, path: r.URL.Path,
			upstream: upstream, status: st, bytes: w.bytes, dur: el, at: end})
	}()
	size, padded := headerList(r) // h2count.go
	if size > MaxHeaderBytes {
		httpPage(w, http.StatusRequestHeaderFieldsTooLarge, "Request Header Fields Too Large", "The request's header list is larger than this server takes.")
		return
	}
	if st, why := unfitTarget(r); st != 0 { // headcheck.go
		httpPage(w, st, http.StatusText(st), why)
		return
	}
	if padded {
		httpPage(w, http.StatusBadRequest, "Bad Request", "A header field's value starts or ends with whitespace.")
		return
	}
	if r.Host == "" {
		httpPage(w, http.StatusBadRequest, "Bad Request", "No :authority or Host.")
		return
	}
	host := hostOf(r.Host)
	if s.toAdmin(host, r.URL.Path) {
		upstream = "admin"
		s.fastBridge(w, r, s.d.Admin, admin.MaxBody)
		return
	}
	if s.d.Plugins != nil {
		if rt := s.d.Plugins.Site(host); rt != nil {
			upstream = "plugin:" + host
			s.fastBridge(w, r, func(ctx *fasthttp.RequestCtx) { s.d.PluginWeb.Serve(ctx, rt) }, pluginweb.MaxBody)
			return
		}
	}
	if s.d.View != nil {
		if snap := s.d.View.Load(); snap != nil {
			if d, ok := snap.Lookup(host); ok && d.Hash != "" {
				upstream = d.Hash
				slot, ok := h3Slot(w, r) // h3.go
				if !ok {
					return
				}
				defer slot.release()
				continueH3(w, r)
				if viaPool(r) && s.forwardPool(w, r, d) {
					return
				}
				s.forwardHTTP(w, r, d)
				return
			}
		}
	}
	// A short body is read before the answer (up to SmallBody), so the
	// stream ends as the client sent it and errors in its body (a
	// content-length that does not match, bad flow control) are seen
	// as such, not raced by the answer; a longer one is reset. Not one
	// whose client waits for 100 Continue: reading it would send the
	// 100, and the edge refuses it at once, as over HTTP/1.1 (expect.go).
	if r.Body != http.NoBody && !awaitsContinue(r) {
		b := s.stallBody(w, r)
		_, err := io.Copy(io.Discard, io.LimitReader(b, SmallBody))
		b.done()
		if isTimeout(err) {
			bodyStopped(w)
			return
		}
	}
	httpPage(w, http.StatusNotFound, "Not Found", "No site is served for "+host+" on this node.")
}

// stallBody is r's body read with ReadTimeout between two reads (as an
// HTTP/1.1 body is: body.go), for the routes that read a body before
// they answer (a name not served, fastBridge's). Without it a client
// that never sends the body it announced would hold the stream's
// handler for good, and its connection with it (a connection with a
// stream open is not idle). quic-go's HTTP/3 ResponseWriter takes the
// read deadline too.
func (s *Server) stallBody(w http.ResponseWriter, r *http.Request) *stallBody {
	return &stallBody{r: r.Body, rc: http.NewResponseController(w), every: s.d.ReadTimeout}
}

type stallBody struct {
	r     io.ReadCloser
	rc    *http.ResponseController
	every time.Duration
	set   bool
}

// errBodyStalled marks a read that timed out, so that the exchange it
// failed answers 408 rather than 504 (a timeout of the upstream's).
var errBodyStalled = errors.New("request body stopped coming")

// errBodyBroken marks any other failed read: the client's stream ended
// short of (or past) its content-length, or broke off. The exchange it
// failed answers 400 and is logged as the client's doing, as over
// HTTP/1.1 (body.go), not as the upstream unreachable (a 502 would send
// an operator after a healthy upstream). A stream the client reset,
// which cancels the request, is 499 when the Transport sees the cancel
// first; one the HTTP/2 server reset for its body is 400 either way
// (h2srv.ErrBadLength, the cancel's cause).
var errBodyBroken = errors.New("request body ended early")

func (b *stallBody) Read(p []byte) (int, error) {
	if b.rc.SetReadDeadline(time.Now().Add(b.every)) == nil {
		b.set = true
	}
	n, err := b.r.Read(p)
	switch {
	case err == nil || err == io.EOF: //nolint:errorlint // io.Reader's sentinel, returned as is
	case isTimeout(err):
		err = fmt.Errorf("%w: %w", errBodyStalled, err)
	default:
		err = fmt.Errorf("%w: %w", errBodyBroken, err)
	}
	return n, err
}

func (b *stallBody) Close() error { return b.r.Close() }

// done clears the read deadline the reads set.
func (b *stallBody) done() {
	if b.set {
		_ = b.rc.SetReadDeadline(time.Time{})
	}
}

// isTimeout reports whether err is a deadline's.
func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// bodyStopped answers a request whose body stopped coming for
// ReadTimeout: 408.
func bodyStopped(w http.ResponseWriter) {
	httpPage(w, http.StatusRequestTimeout, "Request Timeout", "The request body stopped coming.")
}

// bodyEnded answers a request whose body broke off or did not match its
// content-length.
func bodyEnded(w http.ResponseWriter) {
	httpPage(w, http.StatusBadRequest, "Bad Request", "The request body ended early.")
}

// awaitsContinue reports whether r's client holds its body back until
// it is told 100 Continue (RFC 9113 §8.1 lets an HTTP/2 client ask so).
// The HTTP/2 server takes the Expect field away and sends the 100 at the
// body's first read (h2srv.AwaitsContinue tells whether it is still
// owed); quic-go keeps the field, and sends no 100 itself.
func awaitsContinue(r *http.Request) bool {
	return httpguts.HeaderValuesContainsToken(r.Header["Expect"], "100-continue") || h2srv.AwaitsContinue(r.Body)
}

// continueH3 answers an HTTP/3 request's "Expect: 100-continue" once
// the edge will read its body: quic-go's server sends no 100 Continue
// itself (the HTTP/2 one sends it at the body's first read), and
// a client would wait for it. The field is taken away, as the HTTP/1.1
// edge takes it away: the upstream is not to answer it again.
func continueH3(w http.ResponseWriter, r *http.Request) {
	if r.ProtoMajor != 3 || !httpguts.HeaderValuesContainsToken(r.Header["Expect"], "100-continue") {
		return
	}
	delete(r.Header, "Expect")
	if r.ContentLength != 0 {
		w.WriteHeader(http.StatusContinue)
	}
}

// httpPage answers a small HTML page (page's net/http twin).
func httpPage(w http.ResponseWriter, status int, title, msg string) {
	var ctx fasthttp.RequestCtx
	page(&ctx, status, title, msg)
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	_, _ = w.Write(ctx.Response.Body())
}

// fastBridge serves r with a fasthttp handler: the body is read whole
// (up to limit, bodies of BigBody or more within the shared budget,
// ReadTimeout between two reads: 408 past it), a
// fasthttp request is built from r, and the handler's response is
// copied to w (a body stream of unknown length as it comes: flowing).
func (s *Server) fastBridge(w *h2Writer, r *http.Request, h fasthttp.RequestHandler, limit int) {
	n := r.ContentLength
	if n > int64(limit) {
		httpPage(w, http.StatusRequestEntityTooLarge, "Content Too Large", "The request body is over this route's limit.")
		return
	}
	want := n
	if n < 0 {
		want = int64(limit)
	}
	if want >= BigBody {
		if !s.budget.take(want) {
			w.Header().Set("Retry-After", "1")
			httpPage(w, http.StatusServiceUnavailable, "Service Unavailable", "Too many large request bodies in flight, retry.")
			return
		}
		defer s.budget.give(want)
	}
	continueH3(w, r)
	sb := s.stallBody(w, r)
	body, err := io.ReadAll(io.LimitReader(sb, int64(limit)+1))
	sb.done()
	switch {
	case isTimeout(err):
		bodyStopped(w)
		return
	case err != nil:
		bodyEnded(w)
		return
	case len(body) > limit:
		httpPage(w, http.StatusRequestEntityTooLarge, "Content Too Large", "The request body is over this route's limit.")
		return
	}
	var req fasthttp.Request
	req.Header.DisableNormalizing()
	req.Header.SetMethod(r.Method)
	req.SetRequestURI(r.URL.RequestURI())
	req.Header.SetHost(r.Host)
	for k, vs := range r.Header {
		for _, v := range vs {
			req.Header.Add(k, v)
		}
	}
	req.SetBodyRaw(body)
	if r.TLS != nil {
		req.URI().SetScheme("https")
	}
	var ctx fasthttp.RequestCtx
	ctx.Init2(&bridgeConn{remote: remoteTCPAddr(r.RemoteAddr)}, httpx.Logger{L: s.d.Log}, true)
	req.CopyTo(&ctx.Request)
	h(&ctx)
	resp := &ctx.Response
	hd := w.Header()
	for k, v := range resp.Header.All() {
		key := string(k)
		if isHop(key) || strings.EqualFold(key, "Content-Length") {
			continue
		}
		hd.Add(key, string(v))
	}
	w.WriteHeader(resp.StatusCode())
	if resp.IsBodyStream() {
		bp := copyBufs.Get().(*[]byte)
		if resp.Header.ContentLength() < 0 {
			flowing(w, resp.BodyStream(), *bp)
		} else {
			_, _ = io.CopyBuffer(w, resp.BodyStream(), *bp)
		}
		copyBufs.Put(bp)
		_ = resp.CloseBodyStream()
		return
	}
	if r.Method != http.MethodHead {
		_, _ = w.Write(resp.Body())
	}
}

func isHop(k string) bool {
	return isHopName(k) || strings.EqualFold(k, "Upgrade")
}

// flowing copies a body of unknown length (the admin's streamed
// diagnostics) to w piece by piece as it comes, each flushed, as
// ReverseProxy and the pool copy one (copyBody): h2Writer flushes by
// the declared length alone, and held the pieces until the end.
func flowing(w *h2Writer, body io.Reader, buf []byte) {
	for {
		n, err := body.Read(buf)
		if n > 0 {
			if _, werr := w.Write(buf[:n]); werr != nil {
				return
			}
			w.Flush()
		}
		if err != nil {
			return
		}
	}
}

// bridgeConn is what a handler fastBridge runs sees as its connection
// (ctx.Conn()): the client's address, and deadlines that change
// nothing, the answer's writes being the stream's (h2Writer moves their
// deadline). It reads and writes nothing: the request and its answer
// pass by fastBridge. fasthttp's own stand-in (RequestCtx.Init's)
// panics at any call but its addresses, so a handler that set its
// write deadline (the admin's streamed diagnostics do, from the
// goroutine of their body's writer) took the node down.
type bridgeConn struct{ remote net.Addr }

var (
	errBridged = errors.New("a bridged request's connection is not read or written")
	bridgeAddr = &net.TCPAddr{IP: net.IPv4zero}
)

func (*bridgeConn) Read([]byte) (int, error)         { return 0, errBridged }
func (*bridgeConn) Write([]byte) (int, error)        { return 0, errBridged }
func (*bridgeConn) Close() error                     { return nil }
func (*bridgeConn) LocalAddr() net.Addr              { return bridgeAddr }
func (c *bridgeConn) RemoteAddr() net.Addr           { return c.remote }
func (*bridgeConn) SetDeadline(time.Time) error      { return nil }
func (*bridgeConn) SetReadDeadline(time.Time) error  { return nil }
func (*bridgeConn) SetWriteDeadline(time.Time) error { return nil }

func remoteTCPAddr(s string) net.Addr {
	ap, err := netip.ParseAddrPort(s)
	if err != nil {
		return &net.TCPAddr{}
	}
	return net.TCPAddrFromAddrPort(ap)
}

// h2Upstream is one upstream's net/http side: its HTTP/1.1 (or TLS with
// ALPN) transport, and for gRPC to a plain claim its h2c one.
type h2Upstream struct {
	proxy *httputil.ReverseProxy
	plain *http.Transport // HTTP/1.1, or TLS with ALPN h2 and http/1.1
	// grpc carries gRPC calls: HTTP/2 with prior knowledge to a plain
	// claim, plain's TLS to one with ssl: true. Neither has a
	// ResponseHeaderTimeout: a call's wait is its own (grpcwait.go).
	grpc    *http.Transport
	timeout time.Duration // UpstreamTimeout (quietAnswer)
}

// httpUpstream is the net/http upstream of d.
func (s *Server) httpUpstream(d *view.Domain) *h2Upstream {
	key := d.Hash
	if d.SSL {
		key += "+tls"
	}
	if u, ok := s.h2clients.Load(key); ok {
		return u.(*h2Upstream)
	}
	hash, ssl, name := d.Hash, d.SSL, d.Name
	// An HTTP/1.1 connection's deadlines move (UpstreamTimeout between
	// two reads or writes), and net/http's read loop waits in a Read
	// while the request (an upload of any length) is written: the
	// writes move that read's deadline (renewRead).
	moving := func(c net.Conn) *movingDeadlines {
		mc := movingUpstream(c)
		mc.rd.every.Store(int64(s.d.UpstreamTimeout))
		mc.wr.every.Store(int64(s.d.UpstreamTimeout))
		mc.renewRead = true
		return mc
	}
	dialMoving := func(ctx context.Context, _, _ string) (net.Conn, error) {
		c, err := s.dial(hash)
		if err != nil {
			return nil, err
		}
		return moving(c), nil
	}
	// Multiplexed connections keep no moving read deadline (a gRPC
	// stream may be quiet for long); HTTP/2 pings find a dead one.
	dialPlain := func(ctx context.Context, _, _ string) (net.Conn, error) {
		c, err := s.dial(hash)
		if err != nil {
			return nil, err
		}
		return &watchedConn{Conn: c}, nil
	}
	u := &h2Upstream{timeout: s.d.UpstreamTimeout}
	// Idle connections are kept up to the most that may be open, as the
	// HTTP/1.1 path's HostClient keeps them: with a lower bound, every
	// request beyond it in flight (HTTP/2 clients keep many) closed its
	// connection on return and the next one dialled a new one, a dial
	// and a close per request. IdleConnTimeout still closes the unused.
	//
	// IdleConnTimeout is under UpstreamTimeout here: net/http's read
	// loop waits in a Read on an idle connection, and the connection's
	// moving read deadline (UpstreamTimeout) would end that wait and
	// close the connection under the pool, while a request may just have
	// taken it: an upload, which net/http cannot send twice, then failed
	// with "use of closed network connection" (502). The transport's own
	// idle timeout takes a connection out of the pool before closing it.
	// A request's writes move that Read's deadline (renewRead), so the
	// answer has UpstreamTimeout from the request's last write, however
	// long the connection was idle or the upload took.
	u.plain = &http.Transport{
		DialContext:            dialMoving,
		MaxIdleConns:           upstreamConns,
		MaxIdleConnsPerHost:    upstreamConns,
		MaxConnsPerHost:        upstreamConns,
		IdleConnTimeout:        min(IdleTimeout, s.d.UpstreamTimeout/2),
		ResponseHeaderTimeout:  s.d.UpstreamTimeout,
		TLSHandshakeTimeout:    dialTimeout,
		DisableCompression:     true,
		WriteBufferSize:        32 << 10,
		ReadBufferSize:         32 << 10,
		MaxResponseHeaderBytes: MaxAnswerHeadBytes, // Go's default is 10 MB
		HTTP2:                  &http.HTTP2Config{SendPingTimeout: s.d.UpstreamTimeout, PingTimeout: 15 * time.Second},
	}
	if ssl {
		// TLS is spoken here rather than by the transport, so that an
		// upstream that picks HTTP/1.1 in ALPN gets the HTTP/1.1
		// connection's moving deadlines (above), under TLS: without
		// them one that stalled after its answer's head held the
		// client's stream for good. One that picks h2 is multiplexed
		// and keeps none (as dialPlain's), handed over as the *tls.Conn
		// net/http looks for to speak HTTP/2 on it.
		conf := upstreamTLS(d)
		conf.NextProtos = []string{"h2", "http/1.1"}
		u.plain.DialTLSContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
			c, err := dialPlain(ctx, network, addr)
			if err != nil {
				return nil, err
			}
			tc, err := handshakeUpstream(ctx, c, conf, name)
			if err != nil {
				return nil, err
			}
			if tc.ConnectionState().NegotiatedProtocol == "h2" {
				return tc, nil
			}
			return moving(tc), nil
		}
		u.plain.ForceAttemptHTTP2 = true
		u.grpc = u.plain.Clone()
		u.grpc.ResponseHeaderTimeout = 0
	} else {
		var p http.Protocols
		p.SetUnencryptedHTTP2(true)
		u.grpc = &http.Transport{
			DialContext:            dialPlain,
			Protocols:              &p,
			IdleConnTimeout:        IdleTimeout,
			DisableCompression:     true,
			MaxResponseHeaderBytes: MaxAnswerHeadBytes, // in HTTP/2 the header list it advertises, for trailers too
			HTTP2:                  &http.HTTP2Config{SendPingTimeout: s.d.UpstreamTimeout, PingTimeout: 15 * time.Second},
		}
	}
	scheme := "http"
	if ssl {
		scheme = "https"
	}
	u.proxy = &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.Out.URL.Scheme = scheme
			pr.Out.URL.Host = name // only names the request; the dial ignores it
			pr.Out.Host = pr.In.Host
			pr.Out.Header["X-Forwarded-For"] = pr.In.Header["X-Forwarded-For"]
			for k := range pr.Out.Header {
				if underscoredForwarding(k) {
					delete(pr.Out.Header, k)
				}
			}
			pr.SetXForwarded()
		},
		Transport: u,
		// Unknown lengths (gRPC, event streams, chunked bodies) are
		// flushed piece by piece by ReverseProxy itself; known ones by
		// h2Writer (see there).
		FlushInterval: 0,
		BufferPool:    bufPool{},
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			s.httpUpstreamError(w, r, name, hash, err)
		},
		ErrorLog: log.New(io.Discard, "", 0), // failures are logged on the proxy channel
	}
	actual, _ := s.h2clients.LoadOrStore(key, u)
	return actual.(*h2Upstream)
}

// RoundTrip picks the transport: gRPC's own (to a plain claim in h2c).
func (u *h2Upstream) RoundTrip(r *http.Request) (*http.Response, error) {
	if isGRPC(r) {
		resp, err := u.grpc.RoundTrip(r)
		if err == nil {
			delete(resp.Header, "Alt-Svc")
		}
		return resp, err
	}
	resp, err := u.plain.RoundTrip(r)
	if err == nil {
		delete(resp.Header, "Alt-Svc") // the upstream's own ports (route sets the edge's)
	}
	if err == nil && resp.ProtoMajor == 2 && !isGRPC(r) {
		resp.Body = &quietAnswer{ReadCloser: resp.Body, every: u.timeout}
	}
	return resp, err
}

// quietAnswer is the body of an answer that came on an HTTP/2 upstream
// connection (TLS with h2) to a request other than gRPC's: a read that
// waits UpstreamTimeout for a byte closes it (the stream is reset) and
// fails, as a read of an HTTP/1.1 upstream's answer does at its moving
// deadline. Only while a read waits: a client that takes its time
// holds back the reads, not the upstream. gRPC streams may be quiet for
// long (a watch), and are not watched so.
type quietAnswer struct {
	io.ReadCloser
	every time.Duration
	t     *time.Timer
	quiet atomic.Bool
}

func (b *quietAnswer) Read(p []byte) (int, error) {
	if b.t == nil {
		b.t = time.AfterFunc(b.every, func() {
			b.quiet.Store(true)
			_ = b.ReadCloser.Close()
		})
	} else {
		b.t.Reset(b.every)
	}
	n, err := b.ReadCloser.Read(p)
	b.t.Stop()
	if err != nil && b.quiet.Load() {
		err = fmt.Errorf("the upstream's answer: %w: nothing for %v", os.ErrDeadlineExceeded, b.every)
	}
	return n, err
}

func (b *quietAnswer) Close() error {
	if b.t != nil {
		b.t.Stop()
	}
	return b.ReadCloser.Close()
}

func (u *h2Upstream) closeIdle() {
	u.plain.CloseIdleConnections()
	u.grpc.CloseIdleConnections()
}

// isGRPC reports whether r is a gRPC call: its type is application/grpc,
// alone or with a message format (+proto) or parameters. gRPC-Web
// (application/grpc-web, what browsers speak) is not: it is plain HTTP,
// which an HTTP/1.1 upstream serves, and goes as any other request.
func isGRPC(r *http.Request) bool {
	ct := r.Header.Get("Content-Type")
	const grpc = "application/grpc"
	if len(ct) < len(grpc) || !strings.EqualFold(ct[:len(grpc)], grpc) {
		return false
	}
	return len(ct) == len(grpc) || ct[len(grpc)] == '+' || ct[len(grpc)] == ';'
}

// bufPool lends the response copy buffers to ReverseProxy.
type bufPool struct{}

func (bufPool) Get() []byte  { return *copyBufs.Get().(*[]byte) }
func (bufPool) Put(b []byte) { copyBufs.Put(&b) }

// forwardHTTP proxies r to d's tunnel server.
func (s *Server) forwardHTTP(w *h2Writer, r *http.Request, d *view.Domain) {
	u := s.httpUpstream(d)
	if isGRPC(r) {
		// The call ends as soon as its upstream connection does.
		ctx, cancel := context.WithCancelCause(r.Context())
		defer cancel(nil)
		unwatch := func() {}
		defer func() { unwatch() }()
		// Its answer head within the call's own wait (grpcwait.go).
		hw := &headWait{wait: s.grpcWait(r), cancel: cancel}
		defer hw.came()
		r = r.WithContext(httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{GotConn: func(i httptrace.GotConnInfo) {
			c := i.Conn
			if tc, ok := c.(*tls.Conn); ok { // an upstream in TLS (ssl: true)
				c = tc.NetConn()
			}
			if wc, ok := c.(*watchedConn); ok {
				unwatch = wc.watch(cancel)
			}
		},
			WroteRequest:         func(httptrace.WroteRequestInfo) { hw.sent() },
			GotFirstResponseByte: hw.came,
		}))
		// The client's request body is read by the upstream stream's
		// writer (through ReverseProxy, which keeps it from being
		// closed); a client that keeps its side open would hold that
		// writer, and with it the end of the call, once the upstream
		// has gone. Closing it when the call is cancelled lets go.
		body := r.Body
		stop := context.AfterFunc(ctx, func() { _ = body.Close() })
		defer stop()
		// An upstream that fails after its response head: ReverseProxy
		// aborts the handler (the stream would be reset); a gRPC client
		// is told UNAVAILABLE in the trailers instead.
		defer func() {
			if v := recover(); v != nil {
				if v != http.ErrAbortHandler || w.status == 0 { //nolint:errorlint // the sentinel itself
					panic(v)
				}
				s.d.Log.Warn("gRPC upstream ended mid-stream", "domain", d.Name, "hash", short(d.Hash))
				w.Header().Set(http.TrailerPrefix+"Grpc-Status", "14")
				w.Header().Set(http.TrailerPrefix+"Grpc-Message", url.PathEscape(d.Name+": upstream closed mid-stream"))
			}
		}()
	} else if r.Body != nil && r.Body != http.NoBody && r.ContentLength != 0 {
		// A body its client holds back would hold the exchange for
		// good: the Transport returns no error, even once the upstream
		// connection is closed for its timeout, before its write of the
		// body ends. As over HTTP/1.1 (body.go), ReadTimeout between two
		// reads (gRPC streams may be quiet for long: their calls end
		// with their upstream connection, above).
		// An upload holds an upstream connection for as long as its
		// client takes: the HTTP/1.1 path's cap (body.go), on the same
		// count, so that slow uploaders over either cannot take every
		// connection to the upstream.
		up := s.client(d)
		if !up.takeUpload(s.d.MaxUploads) {
			w.Header().Set("Retry-After", "1")
			httpPage(w, http.StatusServiceUnavailable, "Service Unavailable", "Too many uploads in flight to "+d.Name+", retry.")
			return
		}
		defer up.doneUpload()
		r.Body = s.stallBody(w, r)
	}
	u.proxy.ServeHTTP(w, r)
}

// httpUpstreamError is upstreamError for net/http: 504 or 502 with a
// page, or for gRPC a trailers-only UNAVAILABLE (DEADLINE_EXCEEDED on a
// timeout).
func (s *Server) httpUpstreamError(w http.ResponseWriter, r *http.Request, name, hash string, err error) {
	timeout := errors.Is(err, context.DeadlineExceeded) || isTimeout(err)
	if errors.Is(err, errBodyStalled) {
		s.d.Log.Debug("request body stopped coming", "domain", name, "err", err)
		bodyStopped(w)
		return
	}
	cause := context.Cause(r.Context())
	// A stream the HTTP/2 server reset for its body is the client's
	// doing, whichever the Transport saw first: the cancel (its cause)
	// or the failed read.
	if errors.Is(err, errBodyBroken) || errors.Is(cause, h2srv.ErrBadLength) {
		s.d.Log.Debug("request body not received", "domain", name, "err", err)
		bodyEnded(w)
		return
	}
	if errors.Is(cause, errUpstreamClosed) {
		err = cause
	} else if errors.Is(cause, errAnswerLate) {
		err, timeout = cause, true
	} else if errors.Is(err, context.Canceled) && r.Context().Err() != nil {
		// The client went away: nobody to answer.
		s.d.Log.Debug("client left before the upstream answered", "domain", name, "err", err)
		w.WriteHeader(499)
		return
	}
	if timeout {
		s.d.Log.Warn("upstream timed out", "domain", name, "hash", short(hash), "err", err)
	} else {
		s.d.Log.Warn("upstream unreachable", "domain", name, "hash", short(hash), "err", err)
	}
	if isGRPC(r) {
		code := "14" // UNAVAILABLE
		if timeout {
			code = "4" // DEADLINE_EXCEEDED
		}
		msg := name + " cannot be reached through its tunnel: " + brief(err)
		if timeout {
			msg = name + " did not answer in time"
		}
		w.Header().Set("Content-Type", "application/grpc")
		w.Header().Set("Grpc-Status", code)
		w.Header().Set("Grpc-Message", url.PathEscape(msg))
		w.WriteHeader(http.StatusOK)
		return
	}
	if timeout {
		httpPage(w, http.StatusGatewayTimeout, "Gateway Timeout", name+" did not answer in time.")
		return
	}
	httpPage(w, http.StatusBadGateway, "Bad Gateway", name+" cannot be reached through its tunnel: "+brief(err))
}

// watchedConn is a multiplexed upstream connection that cancels the
// gRPC calls on it when a read fails (the upstream closed or reset it)
// or it is closed. net/http's HTTP/2 client ends its streams itself when
// the connection ends, except after a GOAWAY that names them as
// processed (gRPC servers send one before closing): such a stream would
// wait for the client to give up. Under TLS (a claim with ssl: true) no
// read of it fails when the upstream closes: TLS reads the upstream's
// close_notify and reads no further, and its end shows here only as
// the Close net/http's client makes once its read loop has ended; a
// stream it aborted there still waits for its request body's write to
// end (a client that keeps its side of the call open).
type watchedConn struct {
	net.Conn
	mu      sync.Mutex
	err     error
	next    int
	cancels map[int]context.CancelCauseFunc
}

var errUpstreamClosed = errors.New("upstream connection closed")

func (c *watchedConn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	if err != nil {
		c.ended(err)
	}
	return n, err
}

func (c *watchedConn) Close() error {
	c.ended(net.ErrClosed)
	return c.Conn.Close()
}

// ended cancels the calls watching c, once, with errUpstreamClosed.
func (c *watchedConn) ended(err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err == nil {
		c.err = err
		for _, cancel := range c.cancels {
			cancel(errUpstreamClosed)
		}
		c.cancels = nil
	}
}

// watch cancels with errUpstreamClosed once a read fails or c is
// closed (at once if either has happened); the returned func stops
// watching.
func (c *watchedConn) watch(cancel context.CancelCauseFunc) func() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err != nil {
		cancel(errUpstreamClosed)
		return func() {}
	}
	if c.cancels == nil {
		c.cancels = map[int]context.CancelCauseFunc{}
	}
	id := c.next
	c.next++
	c.cancels[id] = cancel
	return func() {
		c.mu.Lock()
		delete(c.cancels, id)
		c.mu.Unlock()
	}
}

// h2Counters are HTTP/2 and HTTP/3 figures for Counters.
func (s *Server) h2Counters(c *Counters) {
	c.H2Conns = s.h2open.Load()
	c.H2Errors = s.h2errors.Load()
	c.H2ConnErrors = s.h2connErrors.Load()
	c.H2Stalled = s.h2stalled.Load()
	c.H3Conns = s.h3open.Load()
	c.H3Retries = s.h3retries.Load()
	c.H3Stuck = s.h3stuck.Load()
	c.H3AtCap = s.slots.lim.AtCap() // only HTTP/3 connections are refused at the cap (TCP ones wait)
}

// h2State is the Server's HTTP/2 state.
type h2State struct {
	h2           *h2srv.Server
	h2handler    http.Handler    // serveHTTP, made once
	h2base       context.Context // h2Context, made once
	h2open       atomic.Int64
	h2errors     atomic.Int64
	h2connErrors atomic.Int64
	h2stalled    atomic.Int64
	h2clients    sync.Map // upstream key → *h2Upstream
	altSvc       string   // the Alt-Svc value advertising HTTP/3, or ""
	altSvcs      []string // altSvc as a header value, capacity 1
}
