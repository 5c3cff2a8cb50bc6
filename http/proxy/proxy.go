// Package proxy is the edge proxy: fasthttp servers on the HTTP and HTTPS
// addresses that route every request by its Host (HTTP) or SNI (HTTPS):
//
//   - the admin domain: the admin API, panel and /ws, in-process;
//   - a loaded plugin's domain (or the profile domain): http/pluginweb;
//   - a resolved p2p domain (or a subdomain of one): over a tunnel to the
//     tunnel server of the domain's resolved hash (Deps.Dialer, the
//     tunnel actor's dialer: a server on this node is dialed directly, a
//     peer's through one stream on the existing peer connection). Connections to each
//     upstream are kept alive and reused (a fasthttp.HostClient per hash),
//     so a request costs no new QUIC handshake and usually no new stream.
//     A kept connection on which the upstream sent anything while it was
//     idle (a second answer nobody asked for, its close) is closed
//     unused, as nginx and Go's Transport close it: those bytes would be
//     read as the next request's answer (pool.go, idleSpoke);
//   - anything else: 404 with a small page naming the host.
//
// Routing reads published snapshots (the naming view, the plugin table);
// no actor is asked per request. Host is compared lower-cased, without a
// port and without a trailing dot; a request without Host, or with one
// that is not a host name (or an IP literal) and port, gets 400
// (headcheck.go).
//
// HTTPS: the certificate for an SNI is the node CA's leaf of the domain
// it is routed to (certificate); a name routed nowhere gets none, and so
// does a p2p domain outside .p2p (a peer may claim bank.example.com; the
// node vouches for .p2p names only, whatever its root's constraints), so
// such a domain is served over HTTP only.
//
// Upstream: the Host header is kept, X-Forwarded-For/-Proto/-Host are set
// (a client's fields of those names spelt with underscores, which CGI-style
// apps read as the same, dropped: underscoredForwarding), hop-by-hop
// headers dropped; an answer the upstream sent without a Date gets the
// edge's (RFC 9110 §6.6.1), uploads' answers too. Response bodies are
// streamed to the client
// as they arrive (a download of any size holds a few buffers, not its
// length, in memory, and its first byte is not held until its last),
// except short ones of declared length, read whole (up to 4 KiB, or 64
// KiB from a peer's tunnel stream: pool.go). Request bodies of any size
// are streamed too, with ReadTimeout between two reads
// (body.go; the admin API and plugins get theirs whole, within their
// limits and a shared budget). A claim with ssl: true is spoken to in
// HTTPS/WSS over the tunnel; its certificate is not verified, because the
// tunnel already authenticates the server (a stream only reaches the
// holder of the hash's key). A tunnel that cannot be opened is 502, an
// upstream that does not answer within UpstreamTimeout is 504, each with
// a small page and a line on the proxy channel. WebSocket upgrades are
// passed through as raw bytes both ways until either side closes, once
// the upstream has answered 101 (any other answer goes back as an
// answer, and the connection stays HTTP).
//
// Memory: a keep-alive connection keeps its read and write buffers while
// idle (about 25 KB per idle connection, 250 MB for 10,000). fasthttp's
// ReduceMemoryUsage would give them back (12.5 KB) at the price of a
// one-byte read and a buffer round trip per request: measured on a quiet
// machine it cost 8% of the small-response throughput and halved the
// 64 KiB one (bench/README.md, "Edge proxy"), so it stays off: this is the
// node's hot path.
//
// Timeouts (timeouts.go): a client must send its request head within
// ReadTimeout (10 s: a slowloris client gets 408 and is cut off), an idle
// keep-alive connection is closed after IdleTimeout (60 s), a client that
// reads nothing of its response for WriteTimeout (60 s) is cut off, and
// an upstream that sends nothing for UpstreamTimeout (60 s) is a 504
// before its response head and a cut body after it. The last two are
// between two operations, as nginx's send_timeout and
// proxy_read_timeout: a download that keeps flowing is never cut,
// however long it takes. UpstreamTimeout is nginx's proxy_read_timeout
// default: long-polling apps (a chat's or a bot API's poll, an event
// feed) hold a request 50-60 s before they answer it empty, and a
// shorter wait would answer them 504 where nginx in front of them
// passes the poll's answer. Each connection has its own goroutine, so a
// stalled one stalls nobody else. Request heads over 16 KiB get 431;
// an upstream's answer head over MaxAnswerHeadBytes (32 KiB) is a 502.
// A request refused before it was read whole (431, 400, 408, a body
// refused: body.go) closes its connection lingering (linger.go).
//
// Request framing, for a proxy that may stand behind another: a request
// carrying both Content-Length and Transfer-Encoding is refused with 400
// and its connection closed (bothFramings: the two proxies could split
// the stream differently); fasthttp itself refuses two Content-Lengths
// or Transfer-Encodings or Hosts, a Transfer-Encoding other than chunked
// (identity it ignores), a space before a field's colon, control bytes
// and bare CR or LF, and passes an obs-fold on as one space (RFC 9112
// §5.2 lets a proxy do either), but on Content-Length,
// Transfer-Encoding and Host, which the edge refuses (400) as nginx
// refuses every fold: a proxy in front that read the first line alone
// would frame the body otherwise. What fasthttp takes and a proxy should
// not pass on (a version other than HTTP/1.x, a field name that is not a
// token, user information in the Host or the request target, a Host
// that is not a host name and port, a target of * but for OPTIONS) is
// refused too, as is an HTTP/2 or HTTP/3 :method or :path that an HTTP/1.1
// request line cannot carry as it came (headcheck.go). A chunked body
// whose chunks cannot be read is the client's 400, not the upstream's
// 502. An upstream's answer that carries both Content-Length and
// Transfer-Encoding is a 502, as nginx has it (errBothLengths), however
// its head was cut between reads. An HTTP/1.0 answer with a
// Transfer-Encoding (RFC 9112 §6.1: faulty framing) is read as nginx
// reads it: chunked when that is its one coding, and its upstream
// connection is closed after it, never reused; with a Content-Length
// too, or another coding, it is a 502 (framingFault). So is an answer
// whose status code is below 100 (errLowStatus: fasthttp hands a 000
// out as 200, and 001 to 099 would be awaited past as informational).
// Hop-by-hop headers (Upgrade among them; a WebSocket upgrade goes with
// "Connection: Upgrade" and "Upgrade: websocket" written anew) are not
// passed on, nor are the headers a Connection header names (RFC 9110
// §7.6.1), but those that route and frame the message and the
// forwarding fields a proxy in front of the edge adds (X-Forwarded-For,
// Forwarded, X-Real-IP: keptNominee): removing them on a client's word
// would let it strip what that proxy said of it.
//
// A request head whose lines end in a lone LF, which fasthttp would
// hold until a CRLFCRLF came (the read timeout, for a client that sent
// its whole head), is refused at once with 400 (lfrequest.go); nginx
// takes it, the edge cannot make fasthttp read it.
//
// "Expect: 100-continue" is the edge's to answer, as nginx answers it
// (expect.go): 100 Continue only once a request with a body is routed
// to a site served here, an error at once (no 100 first) for one the
// edge refuses, nothing for a request with no body; the Expect header
// is not passed upstream. An HTTP/2 client's expectation (RFC 9113
// §8.1) is answered the same way (h2.go, awaitsContinue).
//
// HTTPS: the certificate is the node CA's leaf for the SNI name
// (internal/certs: issued on first use, then cached). A name that is not
// served here (not admin, plugin or resolved p2p) gets no certificate:
// the handshake fails (no leaf is issued for names a stranger makes up).
// A handshake without SNI (or with an address as SNI) gets the admin
// domain's certificate.
//
// Access log: one line per request on the httpProxy channel (method,
// host, path, status, bytes, duration, upstream; for a streamed body,
// bytes is the length the upstream declared, -1 when chunked), handed to
// a goroutine through a buffer of AccessBuffer lines and dropped
// (counted) when it is full, so logging never blocks a request.
package proxy

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"html"
	"log/slog"
	"net"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/valyala/fasthttp"

	"peerdns/http/admin"
	"peerdns/http/httpx"
	"peerdns/http/pluginweb"
	"peerdns/internal/certs"
	"peerdns/internal/procs"
	"peerdns/internal/view"
	"peerdns/messages"
)

// Defaults.
const (
	ReadTimeout     = 10 * time.Second
	WriteTimeout    = 60 * time.Second
	IdleTimeout     = 60 * time.Second
	UpstreamTimeout = 60 * time.Second
	MaxHeaderBytes  = 16 << 10
	AccessBuffer    = 4096
)

// MaxAnswerHeadBytes is the largest answer head (status line and fields)
// the edge reads from an upstream, on every protocol; a larger one is a
// 502 that names the limit. Twice a request's (MaxHeaderBytes): answers
// carry the large fields (sign-in cookies cut into 4 KiB pieces, content
// security policies, preload links). nginx reads one page (4 KiB) by
// default and its users raise it (proxy_buffer_size) for such apps;
// HAProxy reads about 15 KiB, Envoy 60 KiB, Go's Transport 10 MB. The
// read buffers stay 4 KiB: a head longer than that is read into a copy
// of its own (readBigHead), at most this long, with at most
// maxAnswerFields fields.
const MaxAnswerHeadBytes = 32 << 10

// Dialer opens a connection to the tunnel server of a hash ("hs://..."):
// a stream to the peer that serves it, or a TCP connection when the
// server runs on this node (the tunnel actor's dialer implements it).
type Dialer interface {
	Dial(ctx context.Context, hash string) (net.Conn, error)
}

// Deps are what the proxy needs from the node.
type Deps struct {
	HTTPAddr, HTTPSAddr string
	AdminDomain         string
	Admin               fasthttp.RequestHandler // the guarded admin router
	View                *view.Published
	Plugins             pluginweb.Sites // the loaded plugins' domains
	PluginWeb           *pluginweb.Server
	Dialer              Dialer
	CA                  *certs.CA
	Log                 *slog.Logger // the proxy channel
	Access              *slog.Logger // the httpProxy channel
	// AccessBatch, when set, takes the access lines in batches (for the
	// httpProxy channel actor) instead of Access, with the batch's
	// reference (messages.LogBatch).
	AccessBatch     func(*messages.LogBatch)
	UpstreamTimeout time.Duration
	// ReadTimeout, WriteTimeout and IdleTimeout replace the defaults
	// above when set (tests shorten them); IdleTimeout is the client
	// connections' on every protocol.
	ReadTimeout, WriteTimeout, IdleTimeout time.Duration
	// BodyBudget replaces the default request-body budget (body.go)
	// when set.
	BodyBudget int64
	// MaxUploads replaces the default MaxUploads (body.go) when set.
	MaxUploads int64
	// MaxConns caps the client connections open at once on the HTTP and
	// HTTPS listeners and HTTP/3 together; default DefaultMaxConns, or a
	// quarter of the descriptor limit when that is less (connlimit.go).
	MaxConns int
	// MaxConnsPerAddr is how many of them one client address (an IPv6
	// client's /64; loopback aside) may hold; default 256, or a quarter
	// of MaxConns when less (internal/connshare); at most MaxConns.
	MaxConnsPerAddr int
	// countLoopback counts loopback clients under their address's share
	// of MaxConns as any other (tests; connlimit.go).
	countLoopback bool
	// NoHTTP3 keeps the edge off UDP (no HTTP/3, no Alt-Svc).
	NoHTTP3 bool
	// H3HandshakeRate and H3HandshakeBurst replace the defaults of the
	// HTTP/3 handshake rate (h3.go) when set.
	H3HandshakeRate  float64
	H3HandshakeBurst int
}

// Counters are the proxy's request counters (the stats' requests).
type Counters struct {
	Total, Successful, Failed int64
	TotalMillis               int64 // summed response time
	AccessDropped             int64 // access-log lines dropped (buffer full)
	BodyRefused               int64 // 503s: a large body did not fit the budget
	H2Conns                   int64 // HTTP/2 connections open
	H2Errors                  int64 // HTTP/2 stream and connection errors net/http's server counts (its CountError: frames the protocol forbids)
	H2ConnErrors              int64 // HTTP/2 connections closed with an error (GOAWAY with an error code; h2count.go)
	H2Stalled                 int64 // HTTP/2 and HTTP/3 streams reset: the client took nothing for WriteTimeout
	H3Conns                   int64 // HTTP/3 connections open
	H3Retries                 int64 // QUIC Retry packets sent to new HTTP/3 connections over the handshake rate (h3.go)
	H3Stuck                   int64 // HTTP/3 connections closed with streams open whose request head never came (watchH3)
	ConnsOverShare            int64 // client connections (TCP and QUIC) closed at once: their address held its share of the cap (connlimit.go)
	H3AtCap                   int64 // HTTP/3 connections closed at once: the edge held its cap of client connections (admitQUIC)
}

// Server is the edge proxy.
type Server struct {
	d       Deps
	http    *fasthttp.Server
	https   *fasthttp.Server
	ln, tln net.Listener
	wg      sync.WaitGroup
	up      atomic.Bool
	// stopOnce: Shutdown's work is done once.
	stopOnce sync.Once

	clients sync.Map // upstream key → *upstream
	// local counts HTTP/1.1 exchanges with an upstream on this node
	// (a TCP socket, not a peer's tunnel stream): LocalExchanges.
	local atomic.Int64

	total, ok, failed, nanos, dropped atomic.Int64 // nanos: summed request time
	// slots: the cap on open client connections, HTTP, HTTPS and HTTP/3
	// together, and each address's share of it (connlimit.go).
	slots                  *connSlots
	access                 chan accessLine
	accessDone, accessStop chan struct{}
	budget                 *bodyBudget

	h2State
	h3State
	routes routeCounters // by route and status (metrics.go)
}

// New builds the proxy; Start listens.
func New(d Deps) *Server {
	if d.UpstreamTimeout <= 0 {
		d.UpstreamTimeout = UpstreamTimeout
	}
	if d.ReadTimeout <= 0 {
		d.ReadTimeout = ReadTimeout
	}
	if d.WriteTimeout <= 0 {
		d.WriteTimeout = WriteTimeout
	}
	if d.IdleTimeout <= 0 {
		d.IdleTimeout = IdleTimeout
	}
	if d.Log == nil {
		d.Log = slog.New(slog.DiscardHandler)
	}
	if d.Access == nil {
		d.Access = slog.New(slog.DiscardHandler)
	}
	d.AdminDomain = strings.ToLower(d.AdminDomain)
	if d.BodyBudget <= 0 {
		d.BodyBudget = BodyBudget
	}
	if d.MaxUploads <= 0 {
		d.MaxUploads = MaxUploads
	}
	if d.MaxConns <= 0 {
		d.MaxConns = procs.ConnCap(DefaultMaxConns, procs.OpenFileLimit())
	}
	if d.H3HandshakeRate <= 0 {
		d.H3HandshakeRate = H3HandshakeRate
	}
	if d.H3HandshakeBurst <= 0 {
		d.H3HandshakeBurst = H3HandshakeBurst
	}
	s := &Server{d: d, access: make(chan accessLine, AccessBuffer), accessDone: make(chan struct{}), accessStop: make(chan struct{}),
		budget: newBodyBudget(d.BodyBudget), slots: newConnSlots(d.MaxConns, d.MaxConnsPerAddr, d.countLoopback, d.Log)}
	mk := func() *fasthttp.Server {
		return &fasthttp.Server{
			// No WriteTimeout: the listeners' connections move their
			// write deadline themselves (WriteTimeout between two
			// writes, timeouts.go); fasthttp's, set before each answer,
			// cost a clock read per request for the same bound.
			Handler: s.serve, Name: "peerdns", ReadTimeout: d.ReadTimeout,
			IdleTimeout: d.IdleTimeout, ReadBufferSize: MaxHeaderBytes,
			NoDefaultDate: true, KeepHijackedConns: true, Logger: briefLogger{httpx.Logger{L: d.Log}},
			// A head it cannot read is not quoted back in the 400 or
			// the log (brief, briefLogger: fasthttp quotes some whole
			// even so).
			SecureErrorLogMessage: true,
			// "Expect: 100-continue" is the edge's to answer (expect.go);
			// a head fasthttp would wait on is refused (lfrequest.go).
			HeaderReceived: headerReceived, ExpectHandler: s.expectContinue, ConnState: connState,
			// Bodies are streamed (body.go), and forwarded as they came: a
			// pre-parsed multipart form would be re-encoded
			// (TestEdgePassesMultipartBodies).
			StreamRequestBody: true, DisablePreParseMultipartForm: true,
			// A request fasthttp could not read is answered and its
			// connection closed with bytes still coming (the rest of an
			// oversized head, a body): the close lingers, so the client
			// reads the answer instead of a reset (closeAfter).
			// Counted as any answer, under route "none" (nothing was
			// routed).
			ErrorHandler: func(ctx *fasthttp.RequestCtx, err error) {
				closeAfter(ctx)
				defer func() {
					st := ctx.Response.StatusCode()
					s.finished(st, 0)
					s.routes.add("", st, -1, int64(len(ctx.Response.Body())))
				}()
				// A request that did not arrive within ReadTimeout (a
				// slowloris client) is 408, and the connection is closed.
				st := httpx.ReadErrorStatus(err)
				if st == fasthttp.StatusBadRequest {
					ctx.Error("Bad Request: "+brief(err), st)
					return
				}
				ctx.Error(fasthttp.StatusMessage(st), st)
			},
		}
	}
	s.http, s.https = mk(), mk()
	s.newH2()
	return s
}

// alpn is what the HTTPS edge offers in ALPN, in its order of
// preference: HTTP/2, then HTTP/1.1, and HTTP/1.0 (as nginx offers it),
// for a client that offers nothing else (curl --http1.0): Go's TLS
// refuses the handshake when no name is shared. HTTP/1.0 and 1.1 are
// the same server.
var alpn = []string{"h2", "http/1.1", "http/1.0"}

// Start listens on both addresses and serves.
func (s *Server) Start() error {
	var err error
	ln, err := net.Listen("tcp", s.d.HTTPAddr)
	if err != nil {
		return fmt.Errorf("edge http: %w", err)
	}
	s.ln = betweenWrites{ln, s.d.WriteTimeout, true, s.slots, newListenerStop()}
	tl, err := net.Listen("tcp", s.d.HTTPSAddr)
	if err != nil {
		s.ln.Close()
		return fmt.Errorf("edge https: %w", err)
	}
	s.tln = tlsListener{tls.NewListener(betweenWrites{tl, s.d.WriteTimeout, false, s.slots, newListenerStop()}, &tls.Config{GetCertificate: s.certificate, VerifyConnection: s.verifyConnection, MinVersion: tls.VersionTLS12, NextProtos: alpn})}
	if err := s.startH3(tl.Addr()); err != nil {
		s.ln.Close()
		s.tln.Close()
		return err
	}
	go s.logAccess()
	for _, p := range []struct {
		srv *fasthttp.Server
		ln  net.Listener
	}{{s.http, s.ln}, {s.https, s.tln}} {
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			if err := p.srv.Serve(p.ln); err != nil {
				s.d.Log.Error("edge proxy listener stopped", "addr", p.ln.Addr().String(), "err", err)
				s.up.Store(false)
			}
		}()
	}
	s.up.Store(true)
	s.d.Log.Info("edge proxy started", "http", s.ln.Addr().String(), "https", s.tln.Addr().String(), "max_conns", s.d.MaxConns, "per_addr", s.slots.lim.PerAddr())
	return nil
}

// Addrs are the bound HTTP and HTTPS addresses.
func (s *Server) Addrs() (httpAddr, httpsAddr net.Addr) { return s.ln.Addr(), s.tln.Addr() }

// Healthy: both listeners are serving.
func (s *Server) Healthy() bool { return s.up.Load() }

// Shutdown stops taking connections on every listener at once and lets
// the requests in flight on each protocol finish, all within one grace
// of shutdownGrace: an HTTP/1.1 connection is closed once its answer is
// out, HTTP/2 and HTTP/3 clients are sent GOAWAY and their connections
// closed once their streams end. What is left after the grace is closed
// (HTTP/2, HTTP/3) or left to the process's exit (an HTTP/1.1 answer
// still going: fasthttp gives no way to cut it). A rolling restart so
// loses no request that takes less than the grace, whatever its
// protocol. Calling Shutdown again does nothing.
func (s *Server) Shutdown() { s.stopOnce.Do(s.shutdown) }

func (s *Server) shutdown() {
	s.up.Store(false)
	ctx, cancel := context.WithTimeout(context.Background(), shutdownGrace)
	defer cancel()
	var wg sync.WaitGroup
	wg.Go(func() { s.stopH3(ctx) })
	wg.Go(func() { s.shutdownH2(ctx) })
	for _, srv := range []*fasthttp.Server{s.http, s.https} {
		// Closes the listener first, then waits for its connections
		// (those handed to HTTP/2 among them) until ctx ends.
		wg.Go(func() { _ = srv.ShutdownWithContext(ctx) })
	}
	wg.Wait()
	s.ln.Close()
	s.tln.Close()
	s.wg.Wait()
	close(s.accessStop)
	<-s.accessDone
	s.clients.Range(func(_, v any) bool {
		v.(*upstream).hc.CloseIdleConnections()
		return true
	})
	s.h2clients.Range(func(_, v any) bool {
		v.(*h2Upstream).closeIdle()
		return true
	})
}

// OpenConns is the number of client connections open on both listeners.
func (s *Server) OpenConns() int {
	return int(s.http.GetOpenConnectionsCount() + s.https.GetOpenConnectionsCount())
}

// LocalExchanges is how many HTTP/1.1 requests (plain or in TLS) went
// to an upstream on this node, a server reached over a TCP socket rather
// than a peer's tunnel stream. Each is served from start to end by its
// client connection's goroutine, independent of the others, as a DNS
// query is: the node's GOMAXPROCS governor takes a high rate of them as
// work that every core serves best (internal/procs).
func (s *Server) LocalExchanges() int64 { return s.local.Load() }

// Counters reads the request counters.
func (s *Server) Counters() Counters {
	_, refused := s.budget.stats()
	c := Counters{Total: s.total.Load(), Successful: s.ok.Load(), Failed: s.failed.Load(),
		TotalMillis: s.nanos.Load() / int64(time.Millisecond), AccessDropped: s.dropped.Load(), BodyRefused: refused}
	c.ConnsOverShare = s.slots.lim.Refused()
	s.h2Counters(&c)
	return c
}

// hostOf is the request's host: lower case, no port, no trailing dot.
func hostOf(raw string) string {
	h := raw
	// A port only when there is a colon (SplitHostPort builds an error
	// for every Host without one: an allocation per request).
	if strings.IndexByte(raw, ':') >= 0 {
		if host, _, err := net.SplitHostPort(raw); err == nil {
			h = host
		}
	}
	return strings.TrimSuffix(strings.ToLower(strings.Trim(h, "[]")), ".")
}

// toAdmin reports whether a request for host (hostOf) and path goes to
// the admin API: one for the admin domain, or DNS over HTTPS asked at an
// address (https://127.0.0.1:7743/dns-query). A browser's secure-DNS
// setting names its server by URL and finds the server's address with
// the system's resolver, which knows no .p2p name unless the node is
// the machine's resolver already; an address needs no resolver, and a
// connection that names no server (or an address) gets the admin
// domain's certificate, which names the node's address too. Only the
// DNS path is answered so: the API's other paths stay under its domain
// on the edge. Any client that connects could send the admin domain as
// its Host anyway, so the address opens nothing new.
func (s *Server) toAdmin(host, path string) bool {
	if s.d.Admin == nil {
		return false
	}
	if host == s.d.AdminDomain {
		return true
	}
	if path != admin.DoHPath {
		return false
	}
	_, err := netip.ParseAddr(host)
	return err == nil
}

// serve routes one request.
func (s *Server) serve(ctx *fasthttp.RequestCtx) {
	// The request's start is the time fasthttp took when the head had
	// been read (one clock read fewer per request).
	s.answer(ctx, ctx.Time(), false)
}

// answer routes one request that came at start and answers it; with
// refusalsOnly (a request whose body waits for 100 Continue: expect.go)
// it answers only a request the edge refuses whatever its body (no
// Host, a head it refuses, a host not served here) and reports false for
// one it would take. Only an answered request is counted and logged.
func (s *Server) answer(ctx *fasthttp.RequestCtx, start time.Time, refusalsOnly bool) (answered bool) {
	upstream := ""
	raw, path := hostAndPath(ctx) // also the access line's
	defer func() {
		if !answered {
			return
		}
		st := ctx.Response.StatusCode()
		end := time.Now()
		el := end.Sub(start)
		s.finished(st, el)
		if ctx.IsTLS() { // an upstream's Alt-Svc names its own ports: the edge's replaces it
			if s.altSvc != "" {
				ctx.Response.Header.Set("Alt-Svc", s.altSvc)
			} else {
				ctx.Response.Header.Del("Alt-Svc")
			}
		}
		s.routes.count(ctx, st, upstream)
		s.logRequest(ctx, raw, path, st, end, el, upstream)
		if !inMemory(&ctx.Request) {
			// A body nobody read (no such host, no Host): what is
			// left of it cannot be told from a next request.
			closeAfter(ctx)
		}
	}()
	answered = true
	if raw == "" {
		ctx.Error("Bad Request: no Host header", fasthttp.StatusBadRequest)
		return
	}
	names := namesOf(&ctx.Request.Header) // headcheck.go
	if names.bothFramings() {
		page(ctx, fasthttp.StatusBadRequest, "Bad Request", "The request declares its body's length twice: Content-Length and Transfer-Encoding.")
		ctx.SetConnectionClose()
		return
	}
	if st, why := unfitHead(&ctx.Request.Header, names); st != 0 {
		page(ctx, st, fasthttp.StatusMessage(st), why)
		ctx.SetConnectionClose()
		return
	}
	host := hostOf(raw)
	switch {
	case s.toAdmin(host, path):
		upstream = "admin"
		if refusalsOnly {
			return s.refuseDeclared(ctx, admin.MaxBody)
		}
		held, ok := s.wholeBody(ctx, admin.MaxBody)
		if !ok {
			return
		}
		defer s.budget.give(held)
		s.d.Admin(ctx)
		return
	}
	if s.d.Plugins != nil {
		if rt := s.d.Plugins.Site(host); rt != nil {
			upstream = "plugin:" + host
			if refusalsOnly {
				return s.refuseDeclared(ctx, pluginweb.MaxBody)
			}
			held, ok := s.wholeBody(ctx, pluginweb.MaxBody)
			if !ok {
				return
			}
			defer s.budget.give(held)
			s.d.PluginWeb.Serve(ctx, rt)
			return
		}
	}
	if s.d.View != nil {
		if snap := s.d.View.Load(); snap != nil {
			if d, ok := snap.Lookup(host); ok && d.Hash != "" {
				if refusalsOnly {
					return false
				}
				upstream = d.Hash
				s.forward(ctx, d, names)
				return
			}
		}
	}
	page(ctx, fasthttp.StatusNotFound, "Not Found", "No site is served for "+host+" on this node.")
	return
}

// refuseDeclared answers 413 for a request to a route served
// in-process whose declared body is over the route's limit (what
// wholeBody would answer once it had sent 100 Continue), in the
// refusals-only pass (expect.go); false, and nothing answered, for any
// other.
func (s *Server) refuseDeclared(ctx *fasthttp.RequestCtx, limit int) bool {
	if ctx.Request.Header.ContentLength() <= limit {
		return false
	}
	s.refuseBody(ctx, fasthttp.StatusRequestEntityTooLarge, "Content Too Large")
	return true
}

// hostAndPath is the request's Host and path as strings, made in one
// allocation (as the request came: the path before any handler's change).
func hostAndPath(ctx *fasthttp.RequestCtx) (host, path string) {
	h, p := ctx.Host(), ctx.Path()
	var stack [256]byte
	both := string(append(append(stack[:0], h...), p...))
	return both[:len(h)], both[len(h):]
}

// page answers a small HTML page.
func page(ctx *fasthttp.RequestCtx, status int, title, msg string) {
	ctx.Response.Reset()
	ctx.SetStatusCode(status)
	ctx.SetContentType("text/html; charset=utf-8")
	ctx.SetBodyString("<!doctype html><title>" + html.EscapeString(title) + "</title><h1>" + html.EscapeString(title) +
		"</h1><p>" + html.EscapeString(msg) + "</p>\n")
}

// certificate picks the HTTPS certificate by SNI.
func (s *Server) certificate(hello *tls.ClientHelloInfo) (*tls.Certificate, error) {
	name := hostOf(hello.ServerName)
	if _, err := netip.ParseAddr(name); name == "" || err == nil {
		// No SNI, or an address (RFC 6066 forbids it, some tools send
		// it): the admin domain's certificate.
		name = s.d.AdminDomain
	}
	if !s.serves(name) {
		s.routes.handshakeNoCert.Add(1)
		return nil, fmt.Errorf("no site %q on this node", name)
	}
	if s.d.CA == nil {
		return nil, errors.New("no certificate authority")
	}
	cn, ok := certName(s, name)
	if !ok {
		s.routes.handshakeNoCert.Add(1)
		return nil, fmt.Errorf("no certificate for %q: a peer's name outside .p2p is served over HTTP only", name)
	}
	return s.d.CA.Certificate(cn, s.ipOf(name))
}

// certName is the domain a leaf is issued for, in the order requests
// are routed: the admin domain and a plugin's domain as they are, else
// the resolved p2p domain a subdomain belongs to (its leaf covers
// *.domain), else the name (an internal domain). ok is false for a p2p
// domain outside .p2p: a peer may claim any name (bank.example.com), and
// the node vouches only for .p2p ones, whatever its root's name
// constraints (a root made before them signs for any name).
func certName(s *Server, name string) (cn string, ok bool) {
	if name == s.d.AdminDomain || (s.d.Plugins != nil && s.d.Plugins.Site(name) != nil) {
		return name, true
	}
	if s.d.View != nil {
		if snap := s.d.View.Load(); snap != nil {
			if d, ok := snap.Lookup(name); ok {
				if strings.HasSuffix(d.Name, ".p2p") {
					return d.Name, true
				}
				_, internal := snap.Internal[name]
				return name, internal
			}
		}
	}
	return name, true
}

// serves reports whether name is routed here.
func (s *Server) serves(name string) bool {
	if name == s.d.AdminDomain || (s.d.Plugins != nil && s.d.Plugins.Site(name) != nil) {
		return true
	}
	if s.d.View != nil {
		if snap := s.d.View.Load(); snap != nil {
			if d, ok := snap.Lookup(name); ok && d.Hash != "" {
				return true
			}
			if _, ok := snap.Internal[name]; ok {
				return true
			}
		}
	}
	return false
}

func (s *Server) ipOf(name string) (ip netip.Addr) {
	if s.d.View == nil {
		return ip
	}
	snap := s.d.View.Load()
	if snap == nil {
		return ip
	}
	if d, ok := snap.Lookup(name); ok {
		return d.IP
	}
	return snap.Internal[name]
}

// ctxFor is a context for one upstream exchange.
func ctxFor(d time.Duration) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), d)
}
