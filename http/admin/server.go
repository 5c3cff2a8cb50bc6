// Package admin is the node's admin HTTP API (fasthttp + fasthttp/router):
// the paths, bodies and statuses of spec/naming-node-admin-api.md.
//
// Handlers never touch actor state: they validate, ask the owning actor
// with a deadline (httpx.Ask) and render its reply. Errors are written in
// one place (httpx.WriteError): plain text with the status the spec lists
// for the endpoint; where the spec lists only 200/500, bad input is a 500
// whose message names the problem.
//
// Feature files register their own routes: this file wires the router,
// domains.go the ledger and consensus endpoints, system.go
// health/status/logs, network.go subnets and interfaces, dns.go the local
// DNS endpoints (RegisterDNS) and peers.go invites and invite diagnostics
// (RegisterPeers); the browser panel (GET /, its files, the tab
// redirects and /favicon.ico) is package panel.
//
// The whole router, /ws included, is served behind an httpx.Guard: the
// API has no login, so it answers only its own Hosts (the listen address,
// localhost, loopback IPs, the admin domain, Deps.AllowedHosts; else
// 421), refuses requests a web page makes from another origin (403), and
// takes request bodies only as application/json (415). curl, scripts and
// the CLI send no Origin and keep working. See httpx.Guard for the rules
// and http/README.md for a summary.
//
// Decisions the spec leaves open: a refused request gets a plain-text
// message naming what was refused; every answer carries
// X-Frame-Options: DENY, so no other site can frame the panel; GET
// /api/health waits at most 2 s for the ledger and reports the store
// unhealthy when it does not answer; every GET path but /ws answers HEAD
// too (the GET's status and headers without the body).
package admin

import (
	"fmt"
	"log/slog"
	"net"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/fasthttp/router"
	"github.com/valyala/fasthttp"

	"peerdns/http/admin/panel"
	"peerdns/http/httpx"
)

// Deps are what the admin handlers need.
type Deps struct {
	Root     *actor.RootContext
	Ledger   *actor.PID
	Channels map[string]*actor.PID // log channel id → actor
	Self     string                // local peer id
	Started  time.Time
	Health   HealthSources
	Peers    PeerSource
	// WS serves GET /ws (ws.Handler); it runs behind the same guard.
	WS fasthttp.RequestHandler
	// DoH serves /dns-query (http/doh) when set. It is the one path the
	// browser guard does not screen beyond the Host: DoH clients send
	// application/dns-message bodies, browsers' secure-DNS requests may
	// carry any Origin, and a DNS answer changes nothing on the node.
	DoH fasthttp.RequestHandler
	Log *slog.Logger
	// Register adds the routes of other features (DNS, peers, ...).
	Register []func(r *router.Router)

	// Addr is the listen address as bound (host:port); requests that name
	// it as their Host are answered. Serve takes it from the listener when
	// it is empty.
	Addr string
	// AdminDomain is the admin domain (ADMIN_DOMAIN), answered on any
	// port; DefaultAdminDomain when empty.
	AdminDomain string
	// AllowedHosts are further Hosts the API is reached under: "name" on
	// any port, "name:port" on that port only. Entries that do not parse
	// are logged and allow nothing.
	AllowedHosts []string
}

// DefaultAdminDomain is the admin domain when Deps.AdminDomain is empty.
const DefaultAdminDomain = "admin.p2p"

// Server is the admin HTTP server.
type Server struct {
	d      Deps
	router fasthttp.RequestHandler
	srv    *fasthttp.Server
	ln     net.Listener
	// healthTimeout bounds the ledger question of GET /api/health.
	healthTimeout time.Duration
	// askTimeout bounds a question to the ledger (httpx.AskTimeout);
	// writeAskTimeout a change of a domain (WriteAskTimeout).
	askTimeout, writeAskTimeout time.Duration

	reqTotal, reqOK, reqFailed, reqNanos atomic.Int64 // reqNanos: summed response time
}

// Timeouts: the write timeout is longer than httpx.AskTimeout and
// WriteAskTimeout, so a slow actor produces an error body rather than a
// dropped connection.
//
// WriteAskTimeout bounds the ledger's answer to an add-domain,
// remove-domain or recalculation. The ledger answers a change once the domain settled,
// or 3 s after the request was asked (actors/ledger, waitLimit), and the
// change is committed before that wait; what can hold the answer longer
// is the ledger's mailbox, behind its peers' ops on a node that is far
// behind (fifty nodes on two cores: 0-5 claims a burst took more than the
// 5 s reads get). A 500 "did not answer in time" then reports a claim
// that is made a moment later as failed; waiting longer gives the caller
// the answer instead.
const (
	WriteAskTimeout = 12 * time.Second
	readTimeout     = 10 * time.Second
	writeTimeout    = 15 * time.Second
	MaxBody         = 4 << 20 // the largest request body (also through the edge proxy)
	// MaxHeaderBytes bounds a request's head, as the edge proxy bounds
	// it for the admin domain (http/proxy.MaxHeaderBytes): a browser
	// sends the cookies of every port of this host (RFC 6265 §8.5), so
	// another local program's cookies can take a head past fasthttp's
	// default 4 KiB.
	MaxHeaderBytes = 16 << 10
)

// New builds the server and its routes.
func New(d Deps) *Server {
	if d.AdminDomain == "" {
		d.AdminDomain = DefaultAdminDomain
	}
	r := router.New()
	r.RedirectTrailingSlash = false
	s := &Server{d: d, router: r.Handler, healthTimeout: 2 * time.Second,
		askTimeout: httpx.AskTimeout, writeAskTimeout: WriteAskTimeout}
	s.routes(r)
	for _, reg := range d.Register {
		reg(r)
	}
	s.headRoutes(r)
	r.NotFound = notFound
	s.srv = &fasthttp.Server{
		Handler:            s.counted(s.guarded(d.Addr, true)),
		Name:               "peerdns",
		Logger:             httpx.Logger{L: d.Log},
		ReadTimeout:        readTimeout,
		WriteTimeout:       writeTimeout,
		MaxRequestBodySize: MaxBody,
		ReadBufferSize:     MaxHeaderBytes,
		NoDefaultDate:      true,
		ErrorHandler:       requestError,
		// The WebSocket hub closes a dropped client's connection itself;
		// without this fasthttp turns Close on a hijacked conn into a no-op.
		KeepHijackedConns: true,
	}
	return s
}

// requestError answers a request fasthttp could not read with the
// status the edge gives it (httpx.ReadErrorStatus): fasthttp's default
// answers 400 "Error when parsing request" to a body over MaxBody too.
func requestError(ctx *fasthttp.RequestCtx, err error) {
	switch st := httpx.ReadErrorStatus(err); st {
	case fasthttp.StatusRequestEntityTooLarge:
		ctx.Error(fmt.Sprintf("request body larger than %d bytes", MaxBody), st)
	default:
		ctx.Error(fasthttp.StatusMessage(st), st)
	}
}

// guarded is the router behind the guard for a server bound to addr.
func (s *Server) guarded(addr string, logErrors bool) fasthttp.RequestHandler {
	hosts := append([]string{s.d.AdminDomain}, s.d.AllowedHosts...)
	g, err := httpx.NewGuard(addr, hosts)
	if err != nil && logErrors && s.d.Log != nil {
		s.d.Log.Error("admin: allowed hosts", "err", err)
	}
	guarded := g.Wrap(s.d.Log, s.router)
	if s.d.DoH == nil {
		return guarded
	}
	return func(ctx *fasthttp.RequestCtx) {
		if string(ctx.Path()) != DoHPath {
			guarded(ctx)
			return
		}
		if !g.HostAllowed(string(ctx.Request.Header.Host())) {
			httpx.WriteError(ctx, nil, httpx.Errorf(fasthttp.StatusMisdirectedRequest, "host %q is not served here", ctx.Request.Header.Host()))
			return
		}
		s.d.DoH(ctx)
	}
}

// DoHPath is where the API answers DNS over HTTPS: doh.Path (not
// imported: admin does not depend on the DNS side).
const DoHPath = "/dns-query"

// RequestCounters are the admin API's request counters (the stats'
// requests): every request answered, by outcome, and their summed time.
type RequestCounters struct{ Total, Successful, Failed, TotalMillis int64 }

// Requests reads the request counters.
func (s *Server) Requests() RequestCounters {
	return RequestCounters{Total: s.reqTotal.Load(), Successful: s.reqOK.Load(), Failed: s.reqFailed.Load(), TotalMillis: s.reqNanos.Load() / int64(time.Millisecond)}
}

// counted counts every request h answers (a failure is a 5xx).
func (s *Server) counted(h fasthttp.RequestHandler) fasthttp.RequestHandler {
	return func(ctx *fasthttp.RequestCtx) {
		start := time.Now()
		h(ctx)
		s.reqTotal.Add(1)
		// Summed in nanoseconds: a request under a millisecond, as most
		// are, counts for what it took.
		s.reqNanos.Add(int64(time.Since(start)))
		if ctx.Response.StatusCode() >= 500 {
			s.reqFailed.Add(1)
		} else {
			s.reqOK.Add(1)
		}
	}
}

// Handler is the guarded router, for tests that drive it without a
// listener.
func (s *Server) Handler() fasthttp.RequestHandler { return s.srv.Handler }

// Serve serves on ln until Shutdown.
func (s *Server) Serve(ln net.Listener) error {
	s.ln = ln
	if s.d.Addr == "" {
		// Before Serve starts, so no request sees the swap.
		s.srv.Handler = s.counted(s.guarded(ln.Addr().String(), false))
	}
	return s.srv.Serve(ln)
}

// Shutdown stops accepting and waits for open requests.
func (s *Server) Shutdown() error { return s.srv.Shutdown() }

func (s *Server) routes(r *router.Router) {
	s.domainRoutes(r)
	s.consensusRoutes(r)
	s.systemRoutes(r)
	s.networkRoutes(r)
	if s.d.WS != nil {
		r.GET("/ws", s.d.WS)
	}
	// The panel: GET /, its files, the tab redirects and /favicon.ico.
	panel.Register(r)
}

// headRoutes answers HEAD on every GET path that has no HEAD route of
// its own, as GET without the body (RFC 9110 §9.3.2: a server that
// answers GET answers HEAD; an uptime monitor's HEAD /api/health got
// 405). The request runs as a GET and is a HEAD again before fasthttp
// writes the answer, so the body is left out and Content-Length kept.
// /ws is left out: a HEAD is no WebSocket handshake.
func (s *Server) headRoutes(r *router.Router) {
	routes := r.List()
	has := map[string]bool{}
	for _, p := range routes[fasthttp.MethodHead] {
		has[p] = true
	}
	asGet := func(ctx *fasthttp.RequestCtx) {
		ctx.Request.Header.SetMethod(fasthttp.MethodGet)
		s.router(ctx)
		ctx.Request.Header.SetMethod(fasthttp.MethodHead)
	}
	for _, p := range routes[fasthttp.MethodGet] {
		if !has[p] && p != "/ws" {
			r.HEAD(p, asGet)
		}
	}
}

func notFound(ctx *fasthttp.RequestCtx) {
	httpx.WriteError(ctx, nil, httpx.Errorf(fasthttp.StatusNotFound, "Not Found"))
}
