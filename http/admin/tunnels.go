package admin

// Tunnel server and client routes, answered by the tunnels supervisor
// (actors/tunnel) through messages/.
//
// Statuses: the spec gives 200/500 for every tunnel route except
// tunnel-client-create, which has 400 for a missing field or a domain the
// local writer does not own (and here also for an invalid field). So an unknown id or an invalid server field
// is a 500 whose message names the problem, and nothing is created.

import (
	"errors"
	"log/slog"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/fasthttp/router"
	"github.com/valyala/fasthttp"

	"peerdns/http/httpx"
	"peerdns/messages"
)

// RegisterTunnels adds the tunnel server and client routes.
func RegisterTunnels(r *router.Router, log *slog.Logger, root *actor.RootContext, tunnels *actor.PID) {
	t := tunnelRoutes{root: root, pid: tunnels}
	r.GET("/api/tunnel-servers", httpx.Wrap(log, t.servers))
	r.POST("/api/tunnel-create", httpx.Wrap(log, t.createServer))
	r.POST("/api/tunnel-delete", httpx.Wrap(log, func(ctx *fasthttp.RequestCtx) error {
		return t.byID(ctx, func(id string) any { return &messages.DeleteTunnelServer{ID: id} })
	}))
	r.POST("/api/tunnel-restart", httpx.Wrap(log, func(ctx *fasthttp.RequestCtx) error {
		return t.byID(ctx, func(id string) any { return &messages.RestartTunnelServer{ID: id} })
	}))
	r.GET("/api/tunnel-clients", httpx.Wrap(log, t.clients))
	r.POST("/api/tunnel-client-create", httpx.Wrap(log, t.createClient))
	r.POST("/api/tunnel-client-delete", httpx.Wrap(log, func(ctx *fasthttp.RequestCtx) error {
		return t.byID(ctx, func(id string) any { return &messages.DeleteTunnelClient{ID: id} })
	}))
	r.POST("/api/tunnel-client-restart", httpx.Wrap(log, func(ctx *fasthttp.RequestCtx) error {
		return t.byID(ctx, func(id string) any { return &messages.RestartTunnelClient{ID: id} })
	}))
}

type tunnelRoutes struct {
	root *actor.RootContext
	pid  *actor.PID
}

func (t tunnelRoutes) servers(ctx *fasthttp.RequestCtx) error {
	rep, err := httpx.Ask[*messages.GetTunnelServersReply](t.root, t.pid, &messages.GetTunnelServers{}, httpx.AskTimeout)
	if err == nil {
		err = rep.Err
	}
	if err != nil {
		return httpx.Internal("tunnel servers: %v", err)
	}
	out := rep.Servers
	if out == nil {
		out = []messages.TunnelServer{}
	}
	return httpx.JSON(ctx, fasthttp.StatusOK, out)
}

func (t tunnelRoutes) clients(ctx *fasthttp.RequestCtx) error {
	rep, err := httpx.Ask[*messages.GetTunnelClientsReply](t.root, t.pid, &messages.GetTunnelClients{}, httpx.AskTimeout)
	if err == nil {
		err = rep.Err
	}
	if err != nil {
		return httpx.Internal("tunnel clients: %v", err)
	}
	out := rep.Clients
	if out == nil {
		out = []messages.TunnelClient{}
	}
	return httpx.JSON(ctx, fasthttp.StatusOK, out)
}

// createServerRequest is the tunnel-create body. Port is a pointer so a
// missing port is told apart from port 0.
type createServerRequest struct {
	Name   string `json:"name"`
	Port   *int   `json:"port"`
	Host   string `json:"host"`
	Key    string `json:"key"`
	Domain string `json:"domain"`
	Secure bool   `json:"secure"`
	UDP    bool   `json:"udp"`
	Log    int    `json:"log"`
}

func (t tunnelRoutes) createServer(ctx *fasthttp.RequestCtx) error {
	var req createServerRequest
	if err := httpx.DecodeJSON(ctx, &req, fasthttp.StatusInternalServerError); err != nil {
		return err
	}
	if req.Port == nil {
		return httpx.Internal("port is required")
	}
	opts := messages.TunnelServerOpts{Name: req.Name, Port: *req.Port, Host: req.Host, Key: req.Key,
		Domain: req.Domain, Secure: req.Secure, UDP: req.UDP, Log: req.Log}
	rep, err := httpx.Ask[*messages.CreateTunnelServerReply](t.root, t.pid, &messages.CreateTunnelServer{Opts: opts}, httpx.AskTimeout)
	if err == nil {
		err = rep.Err
	}
	if err != nil {
		return httpx.Internal("tunnel-create: %v", err)
	}
	return httpx.JSON(ctx, fasthttp.StatusOK, map[string]string{"id": rep.ID})
}

// createClientRequest is the tunnel-client-create body.
type createClientRequest struct {
	Domain      string `json:"domain"`
	Key         string `json:"key"`
	Port        *int   `json:"port"`
	ServiceName string `json:"serviceName"`
	Protocol    string `json:"protocol"`
}

func (t tunnelRoutes) createClient(ctx *fasthttp.RequestCtx) error {
	var req createClientRequest
	if err := httpx.DecodeJSON(ctx, &req, fasthttp.StatusBadRequest); err != nil {
		return err
	}
	switch {
	case req.Domain == "":
		return httpx.BadRequest("domain is required")
	case req.Key == "":
		return httpx.BadRequest("key is required")
	case req.Port == nil:
		return httpx.BadRequest("port is required")
	}
	if req.Protocol == "" {
		req.Protocol = "tcp"
	}
	opts := messages.TunnelClientOpts{Domain: req.Domain, Key: req.Key, Port: *req.Port, Protocol: req.Protocol, ServiceName: req.ServiceName}
	rep, err := httpx.Ask[*messages.CreateTunnelClientReply](t.root, t.pid, &messages.CreateTunnelClient{Opts: opts}, httpx.AskTimeout)
	if err == nil {
		err = rep.Err
	}
	if errors.Is(err, messages.ErrDomainNotOwned) || errors.Is(err, messages.ErrBadTunnel) {
		return httpx.BadRequest("tunnel-client-create: %v", err)
	}
	if err != nil {
		return httpx.Internal("tunnel-client-create: %v", err)
	}
	return httpx.JSON(ctx, fasthttp.StatusOK, map[string]string{"id": rep.ID})
}

// byID decodes {id} and sends the request made from it; the reply is OK
// or a 500 naming the problem (an unknown id included: the spec has no
// 404 for these routes).
func (t tunnelRoutes) byID(ctx *fasthttp.RequestCtx, req func(id string) any) error {
	var body struct {
		ID string `json:"id"`
	}
	if err := httpx.DecodeJSON(ctx, &body, fasthttp.StatusInternalServerError); err != nil {
		return err
	}
	if body.ID == "" {
		return httpx.Internal("id is required")
	}
	rep, err := httpx.Ask[*messages.TunnelWriteReply](t.root, t.pid, req(body.ID), httpx.AskTimeout)
	if err == nil {
		err = rep.Err
	}
	if err != nil {
		return httpx.Internal("%v", err)
	}
	return httpx.OK(ctx)
}
