package proxy

import (
	"crypto/tls"
	"sync/atomic"
	"time"

	"github.com/valyala/fasthttp"
)

// Route is what served an edge request: the label `route` of the node's
// edge metrics. It is the kind of upstream, never a host name, so the
// label's values stay few whatever clients send.
type Route uint8

// Routes.
const (
	RouteNone   Route = iota // no site for the host (404), or no Host (400)
	RouteAdmin               // the admin domain
	RoutePlugin              // a plugin's domain
	RouteTunnel              // a p2p domain's tunnel
	numRoutes
)

var routeNames = [numRoutes]string{"none", "admin", "plugin", "tunnel"}

func (r Route) String() string {
	if r < numRoutes {
		return routeNames[r]
	}
	return "none"
}

// maxStatus bounds the status codes counted by themselves; anything
// outside 100..599 is counted as 0.
const maxStatus = 600

// routeCounters are the edge's per-route counters: requests by status,
// and body bytes each way. Plain atomics, added once per request next to
// the totals (Counters) the request already adds to; a reader walks them
// at scrape time.
type routeCounters struct {
	byStatus          [numRoutes][maxStatus]atomic.Int64
	bytesIn, bytesOut [numRoutes]atomic.Int64
	handshakes        atomic.Int64 // TLS handshakes completed (full or resumed)
	handshakeNoCert   atomic.Int64 // TLS handshakes refused: no site for the SNI
}

// routeOf turns serve's upstream note into a Route.
func routeOf(upstream string) Route {
	switch {
	case upstream == "":
		return RouteNone
	case upstream == "admin":
		return RouteAdmin
	case len(upstream) > 7 && upstream[:7] == "plugin:":
		return RoutePlugin
	}
	return RouteTunnel
}

// count adds one finished request. The byte counts are the bodies'
// lengths as known when the response is written: the request's declared
// Content-Length (a chunked upload counts 0) and the response body (in
// memory, or the length a streamed upstream declared).
func (c *routeCounters) count(ctx *fasthttp.RequestCtx, status int, upstream string) {
	c.add(upstream, status, int64(ctx.Request.Header.ContentLength()), int64(bodyBytes(&ctx.Response)))
}

// add counts one finished request of either server (HTTP/1.1 or
// HTTP/2 and 3): upstream as serve notes it, body bytes in and out
// (negative: unknown, not counted).
func (c *routeCounters) add(upstream string, status int, in, out int64) {
	r := routeOf(upstream)
	if status < 100 || status >= maxStatus {
		status = 0
	}
	c.byStatus[r][status].Add(1)
	if in > 0 {
		c.bytesIn[r].Add(in)
	}
	if out > 0 {
		c.bytesOut[r].Add(out)
	}
}

// finished adds one request's totals and time, on either server.
func (s *Server) finished(status int, el time.Duration) {
	s.total.Add(1)
	s.nanos.Add(int64(el)) // a request under a millisecond counts for what it took
	if status >= 500 {
		s.failed.Add(1)
	} else {
		s.ok.Add(1)
	}
}

// verifyConnection is the tls.Config.VerifyConnection of the HTTPS
// listener and of HTTP/3's: it runs once per completed handshake,
// resumed ones included, and only counts.
func (s *Server) verifyConnection(tls.ConnectionState) error {
	s.routes.handshakes.Add(1)
	return nil
}

// RouteStatus is how many requests of one route ended with one status.
type RouteStatus struct {
	Route  Route
	Status int // 0: outside 100..599
	Count  int64
}

// RouteBytes are the body bytes of one route's requests and responses.
type RouteBytes struct {
	Route   Route
	In, Out int64
}

// EdgeMetrics is a reading of the edge's metric counters.
type EdgeMetrics struct {
	Requests []RouteStatus // pairs never seen are left out
	Bytes    []RouteBytes  // every route
	// TLSHandshakes counts completed handshakes (over TCP and QUIC);
	// TLSNoCertificate those refused because no site is served for the
	// SNI.
	TLSHandshakes, TLSNoCertificate int64
	OpenConns                       int
}

// Metrics reads the edge's counters without stopping the requests that
// add to them.
func (s *Server) Metrics() EdgeMetrics {
	var m EdgeMetrics
	for r := range s.routes.byStatus {
		for st := range s.routes.byStatus[r] {
			if n := s.routes.byStatus[r][st].Load(); n > 0 {
				m.Requests = append(m.Requests, RouteStatus{Route: Route(r), Status: st, Count: n})
			}
		}
		m.Bytes = append(m.Bytes, RouteBytes{Route: Route(r), In: s.routes.bytesIn[r].Load(), Out: s.routes.bytesOut[r].Load()})
	}
	m.TLSHandshakes = s.routes.handshakes.Load()
	m.TLSNoCertificate = s.routes.handshakeNoCert.Load()
	m.OpenConns = s.OpenConns()
	return m
}
