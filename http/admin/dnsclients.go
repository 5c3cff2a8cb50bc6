package admin

// The DNS query log and per-client counters (dns/querylog.go), off by
// default:
//
//	GET  /api/dns-clients?limit=N   {"queryLog": bool, "clients": [{"client", "queries"}], "other": n, "dropped": n}
//	POST /api/dns-query-log         {"enabled": true|false} → OK
//
// Clients are those with most queries first (limit default 100, 0: all);
// "other" counts the queries of clients beyond the table's bound,
// "dropped" the queries the log could not keep up with. The log lines go
// to the `dns` log channel, at most dns.QueryLogRate a second.

import (
	"log/slog"
	"strconv"

	"github.com/fasthttp/router"
	"github.com/valyala/fasthttp"

	nodedns "peerdns/dns"
	"peerdns/http/httpx"
)

// RegisterDNSClients adds the query-log routes over srv.
func RegisterDNSClients(r *router.Router, log *slog.Logger, srv *nodedns.Server) {
	r.GET("/api/dns-clients", httpx.Wrap(log, func(ctx *fasthttp.RequestCtx) error {
		limit := 100
		if v := ctx.QueryArgs().Peek("limit"); len(v) > 0 {
			n, err := strconv.Atoi(string(v))
			if err != nil || n < 0 {
				return httpx.BadRequest("limit %q: want a whole number ≥ 0", v)
			}
			limit = n
		}
		clients, other, dropped := srv.QueryClients(limit)
		if clients == nil {
			clients = []nodedns.ClientCount{}
		}
		return httpx.JSON(ctx, fasthttp.StatusOK, map[string]any{
			"queryLog": srv.QueryLogEnabled(), "clients": clients, "other": other, "dropped": dropped})
	}))
	r.POST("/api/dns-query-log", httpx.Wrap(log, func(ctx *fasthttp.RequestCtx) error {
		var req struct {
			Enabled *bool `json:"enabled"`
		}
		if err := httpx.DecodeJSON(ctx, &req, fasthttp.StatusBadRequest); err != nil {
			return err
		}
		if req.Enabled == nil {
			return httpx.BadRequest("enabled (true or false) is required")
		}
		srv.SetQueryLog(*req.Enabled)
		return httpx.OK(ctx)
	}))
}
