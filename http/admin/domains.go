package admin

import (
	"errors"
	"fmt"
	"net/url"
	"time"

	"github.com/fasthttp/router"
	"github.com/valyala/fasthttp"

	"peerdns/http/httpx"
	"peerdns/messages"
)

func (s *Server) wrap(h httpx.Handler) fasthttp.RequestHandler { return httpx.Wrap(s.d.Log, h) }

// ask asks the ledger; a timeout or transport error becomes a 500.
func ask[R any](s *Server, req any) (R, error) {
	return askWithin[R](s, req, s.askTimeout)
}

// askWrite asks the ledger for a change of a domain (add, remove,
// recalculate), which it may answer later than a read (WriteAskTimeout
// says why).
func askWrite[R any](s *Server, req any) (R, error) {
	return askWithin[R](s, req, s.writeAskTimeout)
}

func askWithin[R any](s *Server, req any, d time.Duration) (R, error) {
	r, err := httpx.Ask[R](s.d.Root, s.d.Ledger, req, d)
	if err != nil {
		var zero R
		return zero, httpx.Internal("ledger: %v", err)
	}
	return r, nil
}

// status maps an actor error to the status an endpoint allows: invalid
// input gets badStatus (400 where the spec has it, else 500).
func status(err error, badStatus int) error {
	if err == nil {
		return nil
	}
	switch {
	case errors.Is(err, messages.ErrInvalid):
		return httpx.Errorf(badStatus, "%v", err)
	case errors.Is(err, messages.ErrNotOwner), errors.Is(err, messages.ErrNotInitialised):
		return httpx.Errorf(fasthttp.StatusForbidden, "%v", err)
	}
	return httpx.Internal("%v", err)
}

func (s *Server) domainRoutes(r *router.Router) {
	r.GET("/api/resolved-domains", s.wrap(func(ctx *fasthttp.RequestCtx) error {
		rep, err := ask[*messages.GetDomainsReply](s, &messages.GetDomains{})
		if err != nil {
			return err
		}
		return httpx.JSONBytes(ctx, rep.JSON) // the ledger's cached listing
	}))
	r.GET("/api/entries", s.wrap(func(ctx *fasthttp.RequestCtx) error {
		rep, err := ask[*messages.GetEntriesReply](s, &messages.GetEntries{})
		if err != nil {
			return err
		}
		return httpx.JSON(ctx, 200, rep.Entries)
	}))
	r.POST("/api/add-domain", s.wrap(func(ctx *fasthttp.RequestCtx) error {
		var req struct {
			Domain *string `json:"domain"`
			Hash   *string `json:"hash"`
			SSL    bool    `json:"ssl"`
		}
		if err := httpx.DecodeJSON(ctx, &req, 500); err != nil {
			return err
		}
		if req.Domain == nil || req.Hash == nil {
			return httpx.Internal("domain and hash are required")
		}
		rep, err := askWrite[*messages.AddDomainReply](s, &messages.AddDomain{Domain: *req.Domain, Hash: *req.Hash, SSL: req.SSL, Asked: time.Now()})
		if err != nil {
			return err
		}
		if rep.Err != nil {
			return httpx.Internal("%v", rep.Err) // the spec lists only 200/500, internal domains included
		}
		return httpx.OK(ctx)
	}))
	r.POST("/api/remove-domain", s.wrap(func(ctx *fasthttp.RequestCtx) error {
		var req struct {
			Domain *string `json:"domain"`
		}
		if err := httpx.DecodeJSON(ctx, &req, 500); err != nil {
			return err
		}
		if req.Domain == nil {
			return httpx.Internal("domain is required")
		}
		rep, err := askWrite[*messages.RemoveDomainReply](s, &messages.RemoveDomain{Domain: *req.Domain})
		if err != nil {
			return err
		}
		if errors.Is(rep.Err, messages.ErrInvalid) {
			// An invalid name cannot have a claim by this peer.
			return httpx.Errorf(fasthttp.StatusForbidden, "no claim by this peer: %v", rep.Err)
		}
		if err := status(rep.Err, 500); err != nil {
			return err
		}
		return httpx.OK(ctx)
	}))
	r.GET("/api/p2p-domain-conflicts", s.wrap(func(ctx *fasthttp.RequestCtx) error {
		rep, err := ask[*messages.GetP2PConflictsReply](s, &messages.GetP2PConflicts{})
		if err != nil {
			return err
		}
		return httpx.JSON(ctx, 200, map[string]any{"conflicts": rep.Conflicts})
	}))
	r.POST("/api/update-hash-preference", s.wrap(func(ctx *fasthttp.RequestCtx) error {
		var req struct {
			Domain     string `json:"domain"`
			Preference string `json:"preference"`
		}
		if err := httpx.DecodeJSON(ctx, &req, 400); err != nil {
			return err
		}
		// The spec's one 400 is an invalid preference; any other
		// failure (a missing or invalid domain included) is a 500.
		if req.Preference != "local" && req.Preference != "resolved" {
			return httpx.BadRequest("invalid preference %q: must be local or resolved", req.Preference)
		}
		rep, err := ask[*messages.SetHashPreferenceReply](s, &messages.SetHashPreference{Domain: req.Domain, Preference: req.Preference})
		if err != nil {
			return err
		}
		if err := status(rep.Err, 500); err != nil {
			return err
		}
		return httpx.OK(ctx)
	}))
}

func (s *Server) consensusRoutes(r *router.Router) {
	// Literal paths are registered beside {domain}; fasthttp/router always
	// prefers a static segment over a parameter, as the spec requires.
	r.GET("/api/consensus/status", s.wrap(func(ctx *fasthttp.RequestCtx) error {
		rep, err := ask[*messages.GetSidecarStatusReply](s, &messages.GetSidecarStatus{})
		if err != nil {
			return err
		}
		return httpx.JSON(ctx, 200, rep.Status)
	}))
	r.GET("/api/consensus/metrics", s.wrap(func(ctx *fasthttp.RequestCtx) error {
		rep, err := ask[*messages.GetConsensusMetricsReply](s, &messages.GetConsensusMetrics{})
		if err != nil {
			return err
		}
		return httpx.JSON(ctx, 200, rep.Metrics)
	}))
	r.GET("/api/consensus/{domain}", s.wrap(func(ctx *fasthttp.RequestCtx) error {
		domain, err := pathParam(ctx, "domain")
		if err != nil {
			return err
		}
		rep, err := ask[*messages.GetConsensusReply](s, &messages.GetConsensus{Domain: domain})
		if err != nil {
			return err
		}
		if rep.Err != nil {
			return httpx.Internal("%v", rep.Err)
		}
		return httpx.JSON(ctx, 200, rep.State)
	}))
	r.POST("/api/consensus/recalculate", s.wrap(func(ctx *fasthttp.RequestCtx) error {
		return s.recalculate(ctx, "")
	}))
	r.POST("/api/consensus/recalculate/{domain}", s.wrap(func(ctx *fasthttp.RequestCtx) error {
		domain, err := pathParam(ctx, "domain")
		if err != nil {
			return err
		}
		return s.recalculate(ctx, domain)
	}))
}

func (s *Server) recalculate(ctx *fasthttp.RequestCtx, domain string) error {
	rep, err := askWrite[*messages.RecalculateReply](s, &messages.Recalculate{Domain: domain})
	if err != nil {
		return err
	}
	if rep.Err != nil {
		return httpx.Internal("%v", rep.Err)
	}
	msg := fmt.Sprintf("consensus recalculated for %d domain(s)", rep.Domains)
	if domain != "" {
		msg = "consensus recalculated for " + domain
	}
	return httpx.JSON(ctx, 200, map[string]any{"success": true, "message": msg})
}

// pathParam returns a router parameter, percent-decoded.
func pathParam(ctx *fasthttp.RequestCtx, name string) (string, error) {
	v, _ := ctx.UserValue(name).(string)
	d, err := url.PathUnescape(v)
	if err != nil {
		return "", httpx.Internal("bad %s in path: %v", name, err)
	}
	return d, nil
}
