package admin

import (
	"fmt"
	"strconv"
	"time"

	"github.com/fasthttp/router"
	"github.com/valyala/fasthttp"

	"peerdns/http/httpx"
	"peerdns/messages"
)

// HealthSources report each service's and dependency's real state. A nil
// service func means the service is not part of this node (enabled false);
// disabled services do not count against readiness.
type HealthSources struct {
	DNS   func() (enabled, healthy, initialized bool)
	Proxy func() (enabled, healthy bool)
}

// PeerSource answers the peer questions of /api/peers, /api/status and
// health; the peer network implements it.
type PeerSource interface {
	// Peers lists the connected peer ids.
	Peers() ([]string, error)
	// Status says whether this node is the master and how many peers are
	// connected.
	Status() (isMaster bool, peersCount int, err error)
	// Healthy says whether the peer endpoint is up (swarm service).
	Healthy() bool
}

// ReachSource is the optional part of a PeerSource that says what the
// node believes about its own reachability (NAT kind, advertised and
// observed addresses): /api/status shows it as "reach".
type ReachSource interface {
	Reach() (*messages.Reach, error)
}

func (s *Server) systemRoutes(r *router.Router) {
	r.GET("/api/health", s.wrap(s.health))
	r.GET("/api/status", s.wrap(func(ctx *fasthttp.RequestCtx) error {
		out, err := s.Status()
		if err != nil {
			return httpx.Internal("%v", err)
		}
		return httpx.JSON(ctx, 200, out)
	}))
	r.GET("/api/peers", s.wrap(func(ctx *fasthttp.RequestCtx) error {
		ids, err := s.d.Peers.Peers()
		if err != nil {
			return httpx.Internal("peers: %v", err)
		}
		if ids == nil {
			ids = []string{}
		}
		return httpx.JSON(ctx, 200, ids)
	}))
	r.GET("/api/logs", s.wrap(func(ctx *fasthttp.RequestCtx) error {
		return httpx.JSON(ctx, 200, map[string]any{"channels": messages.LogChannels})
	}))
	r.GET("/api/logs/{channel}", s.wrap(s.logTail))
}

// Status is the body of GET /api/status: what the node knows of its
// peers and its own reachability. The stats sampler calls it too.
func (s *Server) Status() (map[string]any, error) {
	isMaster, n, err := s.d.Peers.Status()
	if err != nil {
		return nil, fmt.Errorf("peer status: %w", err)
	}
	out := map[string]any{"isMaster": isMaster, "isConnected": n > 0, "peersCount": n}
	if rs, ok := s.d.Peers.(ReachSource); ok {
		if r, err := rs.Reach(); err == nil && r != nil {
			out["reach"] = r
		}
	}
	return out, nil
}

// logTail serves the last lines of a channel. The channel must be one of
// the known ids: the file name is never built from the request, so no
// request can read outside the logs folder.
func (s *Server) logTail(ctx *fasthttp.RequestCtx) error {
	ch, err := pathParam(ctx, "channel")
	if err != nil {
		return err
	}
	pid, ok := s.d.Channels[ch]
	if !ok || !messages.KnownLogChannel(ch) {
		return httpx.Errorf(fasthttp.StatusNotFound, "unknown log channel %q", ch)
	}
	lines := messages.DefaultLogLines
	if raw := ctx.QueryArgs().Peek("lines"); len(raw) > 0 {
		n, err := strconv.Atoi(string(raw))
		if err != nil || n < 1 {
			return httpx.BadRequest("lines must be a positive integer, got %q", raw)
		}
		lines = min(n, messages.MaxLogLines)
	}
	rep, err := httpx.Ask[*messages.GetLogTailReply](s.d.Root, pid, &messages.GetLogTail{Lines: lines}, httpx.AskTimeout)
	if err != nil {
		return httpx.Internal("log channel %s: %v", ch, err)
	}
	if rep.Err != nil {
		return httpx.Internal("log channel %s: %v", ch, rep.Err)
	}
	return httpx.JSON(ctx, 200, map[string]any{"channel": ch, "lines": rep.Lines})
}

// health answers liveness (the process and its store answer) and
// readiness (the ledger has bootstrapped and every enabled service is up).
//
// The dataStore dependency is what the ledger reports of its store
// (SidecarStatus.Open: the store answers); a ledger that does not answer
// within healthTimeout counts as an unhealthy store too, so a wedged
// ledger makes the node degraded instead of hanging the probe.
func (s *Server) health(ctx *fasthttp.RequestCtx) error {
	probe := string(ctx.QueryArgs().Peek("probe"))
	if probe == "" {
		probe = "liveness"
	}
	if probe != "liveness" && probe != "readiness" {
		return httpx.BadRequest("probe must be liveness or readiness, got %q", probe)
	}
	code, body := s.Health(probe)
	return httpx.JSON(ctx, code, body)
}

// Health is GET /api/health for probe ("liveness" or "readiness"): the
// HTTP status and the body. The stats sampler calls it too.
func (s *Server) Health(probe string) (int, map[string]any) {
	side, err := httpx.Ask[*messages.GetSidecarStatusReply](s.d.Root, s.d.Ledger, &messages.GetSidecarStatus{}, s.healthTimeout)
	storeOK := err == nil && side.Status.Open
	bootstrapped := storeOK && side.Status.BootstrapComplete

	services := map[string]any{}
	ready := bootstrapped
	dnsEnabled, dnsHealthy, dnsInit := false, false, false
	if s.d.Health.DNS != nil {
		dnsEnabled, dnsHealthy, dnsInit = s.d.Health.DNS()
	}
	services["dns"] = map[string]bool{"enabled": dnsEnabled, "healthy": dnsHealthy, "initialized": dnsInit}
	if dnsEnabled && !(dnsHealthy && dnsInit) {
		ready = false
	}
	proxyEnabled, proxyHealthy := false, false
	if s.d.Health.Proxy != nil {
		proxyEnabled, proxyHealthy = s.d.Health.Proxy()
	}
	services["proxy"] = map[string]bool{"enabled": proxyEnabled, "healthy": proxyHealthy}
	if proxyEnabled && !proxyHealthy {
		ready = false
	}
	swarm := s.d.Peers.Healthy()
	services["swarm"] = map[string]bool{"healthy": swarm}

	status := "healthy"
	switch {
	case !storeOK:
		status = "degraded"
	case probe == "readiness" && !ready:
		status = "not_ready"
	case probe == "readiness" && !swarm:
		status = "degraded"
	}
	code := fasthttp.StatusOK
	if status != "healthy" {
		code = fasthttp.StatusServiceUnavailable
	}
	return code, map[string]any{
		"status":    status,
		"timestamp": time.Now().UTC().Format(time.RFC3339Nano),
		"uptime":    int64(time.Since(s.d.Started).Seconds()),
		"probe":     probe,
		"services":  services,
		"dependencies": map[string]any{
			"dataStore":   map[string]bool{"healthy": storeOK},
			"peerNetwork": map[string]bool{"healthy": swarm},
		},
	}
}
