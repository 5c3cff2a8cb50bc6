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
// domains.go the ledger endpoints, system.go health/status/logs, dns.go
// (DNS engineer) and peers.go (peer engineer) theirs.
package admin

import (
	"log/slog"
	"net"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/fasthttp/router"
	"github.com/valyala/fasthttp"
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
	WS       fasthttp.RequestHandler
	Log      *slog.Logger
	// Register adds the routes of other features (DNS, peers, ...).
	Register []func(r *router.Router)
}

// Server is the admin HTTP server.
type Server struct {
	d   Deps
	srv *fasthttp.Server
	ln  net.Listener
}

// Timeouts: the write timeout is longer than httpx.AskTimeout, so a slow
// actor produces an error body rather than a dropped connection.
const (
	readTimeout  = 10 * time.Second
	writeTimeout = 15 * time.Second
	maxBody      = 4 << 20
)

// New builds the server and its routes.
func New(d Deps) *Server {
	r := router.New()
	r.RedirectTrailingSlash = false
	s := &Server{d: d}
	s.routes(r)
	for _, reg := range d.Register {
		reg(r)
	}
	r.NotFound = func(ctx *fasthttp.RequestCtx) {
		ctx.SetStatusCode(fasthttp.StatusNotFound)
		ctx.SetContentType("text/plain; charset=utf-8")
		ctx.SetBodyString("Not Found")
	}
	s.srv = &fasthttp.Server{
		Handler:            r.Handler,
		Name:               "peerdns",
		ReadTimeout:        readTimeout,
		WriteTimeout:       writeTimeout,
		MaxRequestBodySize: maxBody,
		NoDefaultDate:      true,
		// The WebSocket hub closes a dropped client's connection itself;
		// without this fasthttp turns Close on a hijacked conn into a no-op.
		KeepHijackedConns: true,
	}
	return s
}

// Handler is the router, for tests that drive it without a listener.
func (s *Server) Handler() fasthttp.RequestHandler { return s.srv.Handler }

// Serve serves on ln until Shutdown.
func (s *Server) Serve(ln net.Listener) error {
	s.ln = ln
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
	for _, tab := range []string{"domains", "host", "local-dns", "entries", "peers", "certs", "interfaces", "logs", "settings"} {
		target := "/#" + tab
		r.GET("/"+tab, func(ctx *fasthttp.RequestCtx) {
			// A relative Location, as the spec shows (ctx.Redirect would
			// make it absolute).
			ctx.Response.Header.Set("Location", target)
			ctx.SetStatusCode(fasthttp.StatusFound)
		})
	}
	r.GET("/favicon.ico", func(ctx *fasthttp.RequestCtx) {
		ctx.SetStatusCode(fasthttp.StatusNotFound)
		ctx.SetContentType("text/plain; charset=utf-8")
		ctx.SetBodyString("Not Found")
	})
}
