package admin

// Service subscription routes and restart-tunnel-clients-for-domain.
// domain-services is answered by the ledger (the services of the resolved
// claim); the rest by the tunnels supervisor (actors/tunnel), which makes
// and deletes the subscription clients and broadcasts
// update-tunnel-clients.
//
// Statuses: 400 for a missing or invalid field, 409 for a service already
// subscribed (or whose client id <domain>_<serviceName> is taken by this
// node's own service), 404 for unsubscribing from a service not
// subscribed, 500 otherwise. The writes answer {"success": true}; errors
// are plain text as everywhere else. restart-tunnel-clients-for-domain
// lists only 200/500, so a missing domain is a 500 naming the problem.

import (
	"errors"
	"log/slog"
	"strings"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/fasthttp/router"
	"github.com/valyala/fasthttp"

	"peerdns/http/httpx"
	"peerdns/messages"
)

// RegisterServices adds the service subscription routes.
func RegisterServices(r *router.Router, log *slog.Logger, root *actor.RootContext, tunnels, ledger *actor.PID) {
	s := serviceRoutes{root: root, tunnels: tunnels, ledger: ledger}
	r.GET("/api/domain-services", httpx.Wrap(log, s.domainServices))
	r.GET("/api/service-subscriptions", httpx.Wrap(log, s.subscriptions))
	r.GET("/api/subscribe-all-domains", httpx.Wrap(log, s.allDomains))
	r.POST("/api/service-subscribe", httpx.Wrap(log, s.subscribe))
	r.POST("/api/service-unsubscribe", httpx.Wrap(log, s.unsubscribe))
	r.POST("/api/subscribe-all", httpx.Wrap(log, func(ctx *fasthttp.RequestCtx) error {
		return s.byDomain(ctx, func(d string) any { return &messages.SubscribeAll{Domain: d} })
	}))
	r.POST("/api/unsubscribe-all", httpx.Wrap(log, func(ctx *fasthttp.RequestCtx) error {
		return s.byDomain(ctx, func(d string) any { return &messages.UnsubscribeAll{Domain: d} })
	}))
	r.POST("/api/restart-tunnel-clients-for-domain", httpx.Wrap(log, s.restartDomain))
}

type serviceRoutes struct {
	root            *actor.RootContext
	tunnels, ledger *actor.PID
}

func (s serviceRoutes) domainServices(ctx *fasthttp.RequestCtx) error {
	domain := strings.TrimSpace(string(ctx.QueryArgs().Peek("domain")))
	if domain == "" {
		return httpx.BadRequest("domain is required")
	}
	rep, err := httpx.Ask[*messages.GetDomainServicesReply](s.root, s.ledger, &messages.GetDomainServices{Domain: domain}, httpx.AskTimeout)
	if err == nil {
		err = rep.Err
	}
	if errors.Is(err, messages.ErrInvalid) {
		return httpx.BadRequest("domain-services: %v", err)
	}
	if err != nil {
		return httpx.Internal("domain-services: %v", err)
	}
	out := rep.Services
	if out == nil {
		out = []messages.Service{}
	}
	return httpx.JSON(ctx, fasthttp.StatusOK, out)
}

func (s serviceRoutes) list() (*messages.GetSubscriptionsReply, error) {
	rep, err := httpx.Ask[*messages.GetSubscriptionsReply](s.root, s.tunnels, &messages.GetSubscriptions{}, httpx.AskTimeout)
	if err != nil {
		return nil, httpx.Internal("subscriptions: %v", err)
	}
	return rep, nil
}

func (s serviceRoutes) subscriptions(ctx *fasthttp.RequestCtx) error {
	rep, err := s.list()
	if err != nil {
		return err
	}
	return httpx.JSON(ctx, fasthttp.StatusOK, rep.Subscriptions)
}

func (s serviceRoutes) allDomains(ctx *fasthttp.RequestCtx) error {
	rep, err := s.list()
	if err != nil {
		return err
	}
	return httpx.JSON(ctx, fasthttp.StatusOK, rep.AllDomains)
}

// subscribeRequest is the service-subscribe body; Port is a pointer so a
// missing port is told apart from port 0.
type subscribeRequest struct {
	Domain      string `json:"domain"`
	ServiceName string `json:"serviceName"`
	Key         string `json:"key"`
	Port        *int   `json:"port"`
	Protocol    string `json:"protocol"`
}

func (s serviceRoutes) subscribe(ctx *fasthttp.RequestCtx) error {
	var req subscribeRequest
	if err := httpx.DecodeJSON(ctx, &req, fasthttp.StatusBadRequest); err != nil {
		return err
	}
	switch {
	case strings.TrimSpace(req.Domain) == "":
		return httpx.BadRequest("domain is required")
	case strings.TrimSpace(req.ServiceName) == "":
		return httpx.BadRequest("serviceName is required")
	case strings.TrimSpace(req.Key) == "":
		return httpx.BadRequest("key is required")
	case req.Port == nil:
		return httpx.BadRequest("port is required")
	}
	sub := messages.Subscription{Domain: req.Domain, ServiceName: req.ServiceName, Key: req.Key, Port: *req.Port, Protocol: req.Protocol}
	return s.write(ctx, &messages.ServiceSubscribe{Sub: sub})
}

func (s serviceRoutes) unsubscribe(ctx *fasthttp.RequestCtx) error {
	var req struct {
		Domain      string `json:"domain"`
		ServiceName string `json:"serviceName"`
	}
	if err := httpx.DecodeJSON(ctx, &req, fasthttp.StatusBadRequest); err != nil {
		return err
	}
	if strings.TrimSpace(req.Domain) == "" || strings.TrimSpace(req.ServiceName) == "" {
		return httpx.BadRequest("domain and serviceName are required")
	}
	return s.write(ctx, &messages.ServiceUnsubscribe{Domain: req.Domain, ServiceName: req.ServiceName})
}

// byDomain decodes {domain} (400 when missing) and sends the request.
func (s serviceRoutes) byDomain(ctx *fasthttp.RequestCtx, req func(domain string) any) error {
	var body struct {
		Domain string `json:"domain"`
	}
	if err := httpx.DecodeJSON(ctx, &body, fasthttp.StatusBadRequest); err != nil {
		return err
	}
	if strings.TrimSpace(body.Domain) == "" {
		return httpx.BadRequest("domain is required")
	}
	return s.write(ctx, req(body.Domain))
}

// write sends a subscription write and maps its error to a status.
func (s serviceRoutes) write(ctx *fasthttp.RequestCtx, req any) error {
	rep, err := httpx.Ask[*messages.SubscriptionReply](s.root, s.tunnels, req, httpx.AskTimeout)
	if err == nil {
		err = rep.Err
	}
	switch {
	case err == nil:
		return httpx.JSON(ctx, fasthttp.StatusOK, map[string]bool{"success": true})
	case errors.Is(err, messages.ErrBadTunnel):
		return httpx.BadRequest("%v", err)
	case errors.Is(err, messages.ErrAlreadySubscribed):
		return httpx.Errorf(fasthttp.StatusConflict, "%v", err)
	case errors.Is(err, messages.ErrNotSubscribed):
		return httpx.Errorf(fasthttp.StatusNotFound, "%v", err)
	}
	return httpx.Internal("%v", err)
}

func (s serviceRoutes) restartDomain(ctx *fasthttp.RequestCtx) error {
	var body struct {
		Domain string `json:"domain"`
	}
	if err := httpx.DecodeJSON(ctx, &body, fasthttp.StatusInternalServerError); err != nil {
		return err
	}
	if strings.TrimSpace(body.Domain) == "" {
		return httpx.Internal("domain is required")
	}
	rep, err := httpx.Ask[*messages.TunnelWriteReply](s.root, s.tunnels, &messages.RestartDomainClients{Domain: body.Domain}, httpx.AskTimeout)
	if err == nil {
		err = rep.Err
	}
	if err != nil {
		return httpx.Internal("restart-tunnel-clients-for-domain: %v", err)
	}
	return httpx.OK(ctx)
}
