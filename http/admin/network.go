package admin

import (
	"errors"
	"strings"

	"github.com/fasthttp/router"
	"github.com/valyala/fasthttp"

	"peerdns/http/httpx"
	"peerdns/internal/ipam"
	"peerdns/messages"
)

func (s *Server) networkRoutes(r *router.Router) {
	r.GET("/api/subnets", s.wrap(func(ctx *fasthttp.RequestCtx) error {
		rep, err := ask[*messages.GetSubnetsReply](s, &messages.GetSubnets{})
		if err != nil {
			return err
		}
		return httpx.JSON(ctx, 200, map[string]any{"subnets": rep.Subnets})
	}))
	r.POST("/api/subnets", s.wrap(s.setSubnets))
	r.GET("/api/interfaces", s.wrap(func(ctx *fasthttp.RequestCtx) error {
		rep, err := ask[*messages.GetInterfacesReply](s, &messages.GetInterfaces{})
		if err != nil {
			return err
		}
		return httpx.JSON(ctx, 200, rep.Interfaces)
	}))
	r.POST("/api/cleanup-interfaces", s.wrap(func(ctx *fasthttp.RequestCtx) error {
		rep, err := ask[*messages.CleanupInterfacesReply](s, &messages.CleanupInterfaces{})
		if err != nil {
			return err
		}
		if rep.Err != nil {
			return httpx.Internal("%v", rep.Err)
		}
		return httpx.OK(ctx)
	}))
}

// subnetError is the spec's 400 body for subnet validation.
func subnetError(errs ...string) error {
	return &httpx.Error{Status: 400, Msg: strings.Join(errs, "; "), JSON: map[string]any{"error": "Invalid subnets: " + strings.Join(errs, "; "), "errors": errs}}
}

func (s *Server) setSubnets(ctx *fasthttp.RequestCtx) error {
	var req struct {
		Subnets *[]messages.Subnet `json:"subnets"`
	}
	if err := httpx.DecodeJSON(ctx, &req, 400); err != nil {
		var he *httpx.Error
		if errors.As(err, &he) {
			return subnetError(he.Msg)
		}
		return err
	}
	if req.Subnets == nil {
		return subnetError("subnets is required")
	}
	if _, errs := ipam.Validate(*req.Subnets); len(errs) > 0 {
		return subnetError(errs...)
	}
	rep, err := ask[*messages.SetSubnetsReply](s, &messages.SetSubnets{Subnets: *req.Subnets})
	if err != nil {
		return err
	}
	if rep.Err != nil {
		return httpx.Internal("%v", rep.Err)
	}
	return httpx.JSON(ctx, 200, map[string]any{"message": "Subnets saved; restart the node to allocate from them", "restartRequired": true})
}
