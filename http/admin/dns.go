package admin

// The DNS endpoints of the admin API: local records, version preferences
// (the selector cache), the DNS cache and the DNS lookup diagnostic. They
// ask the localdns actor (messages/localdns.go) for its state, and call
// the DNS server's thread-safe API (ClearCache, Lookup) for its cache and
// resolver: the server is not an actor and owns no actor's state, the one
// non-actor exception handlers may call directly (see dns/README.md).

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"math"
	"strings"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/fasthttp/router"
	"github.com/valyala/fasthttp"

	nodedns "peerdns/dns"
	"peerdns/http/httpx"
	"peerdns/messages"
)

// DNSDeps are what the DNS endpoints need.
type DNSDeps struct {
	Root     *actor.RootContext
	LocalDNS *actor.PID      // the localdns actor
	Server   *nodedns.Server // the running DNS server (cache, lookup); nil: those endpoints answer 500
	// AskTimeout bounds each actor request; default httpx.AskTimeout.
	AskTimeout time.Duration
}

// RegisterDNS adds the DNS routes to r.
func RegisterDNS(r *router.Router, log *slog.Logger, d DNSDeps) {
	if d.AskTimeout <= 0 {
		d.AskTimeout = httpx.AskTimeout
	}
	h := &dnsHandlers{d: d}
	w := func(f httpx.Handler) fasthttp.RequestHandler { return httpx.Wrap(log, f) }
	r.GET("/api/local-dns", w(h.list))
	r.GET("/api/selector-cache", w(h.selectorCache))
	r.POST("/api/add-local-dns", w(h.add))
	r.POST("/api/update-local-dns", w(h.update))
	r.POST("/api/delete-local-dns", w(h.delete))
	r.POST("/api/update-version-preference", w(h.versionPreference))
	r.POST("/api/clear-dns-cache", w(h.clearCache))
	r.POST("/api/diagnostics/dns-lookup", w(h.lookup))
}

type dnsHandlers struct{ d DNSDeps }

// dnsAsk asks the localdns actor; a timeout is a 500.
func dnsAsk[R any](h *dnsHandlers, req any) (R, error) {
	r, err := httpx.Ask[R](h.d.Root, h.d.LocalDNS, req, h.d.AskTimeout)
	if err != nil {
		var zero R
		return zero, httpx.Internal("local DNS: %v", err)
	}
	return r, nil
}

// dnsWriteError maps the actor's reply error to the endpoint's statuses:
// a bad index or version is 400, anything else (invalid record included,
// where the spec lists only 200/500) is a 500 naming the problem.
func dnsWriteError(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, messages.ErrBadRecordIndex), errors.Is(err, messages.ErrBadVersionPreference):
		return httpx.BadRequest("%v", err)
	}
	return httpx.Internal("%v", err)
}

// dnsRecordJSON is a record as GET /api/local-dns shows it.
func dnsRecordJSON(i int, r messages.LocalRecord) map[string]any {
	m := r.Fields()
	m["index"] = i
	return m
}

func (h *dnsHandlers) list(ctx *fasthttp.RequestCtx) error {
	rep, err := dnsAsk[*messages.GetLocalDNSReply](h, &messages.GetLocalDNS{})
	if err != nil {
		return err
	}
	if rep.Err != nil {
		return httpx.Internal("%v", rep.Err)
	}
	recs := make([]map[string]any, len(rep.Records))
	for i, r := range rep.Records {
		recs[i] = dnsRecordJSON(i, r)
	}
	conflicts := rep.Conflicts
	if conflicts == nil {
		conflicts = []messages.DNSConflict{}
	}
	return httpx.JSON(ctx, fasthttp.StatusOK, map[string]any{"records": recs, "conflicts": conflicts})
}

func (h *dnsHandlers) selectorCache(ctx *fasthttp.RequestCtx) error {
	rep, err := dnsAsk[*messages.GetSelectorCacheReply](h, &messages.GetSelectorCache{})
	if err != nil {
		return err
	}
	if rep.Err != nil {
		return httpx.Internal("%v", rep.Err)
	}
	prefs := rep.Prefs
	if prefs == nil {
		prefs = map[string]string{}
	}
	return httpx.JSON(ctx, fasthttp.StatusOK, prefs)
}

func (h *dnsHandlers) write(ctx *fasthttp.RequestCtx, msg any) error {
	rep, err := dnsAsk[*messages.LocalDNSWriteReply](h, msg)
	if err != nil {
		return err
	}
	if err := dnsWriteError(rep.Err); err != nil {
		return err
	}
	return httpx.OK(ctx)
}

// dnsParseRecord validates a record body; failures are 500 (the spec
// lists only 200/500 for add and for the record part of update).
func dnsParseRecord(b []byte) (messages.LocalRecord, error) {
	if len(b) == 0 || string(b) == "null" {
		return messages.LocalRecord{}, httpx.Internal("record is required")
	}
	r, err := messages.ParseLocalRecord(b)
	if err != nil {
		return r, httpx.Internal("%v", err)
	}
	return r, nil
}

func (h *dnsHandlers) add(ctx *fasthttp.RequestCtx) error {
	if len(ctx.PostBody()) == 0 {
		return httpx.Internal("request body is empty: JSON record expected")
	}
	r, err := dnsParseRecord(ctx.PostBody())
	if err != nil {
		return err
	}
	return h.write(ctx, &messages.AddLocalRecord{Record: r})
}

// dnsIndex reads a JSON index that must be a non-negative integer; else
// it is the spec's 400 invalid index.
func dnsIndex(raw json.RawMessage) (int, error) {
	var f float64
	if len(raw) == 0 || string(raw) == "null" {
		return 0, httpx.BadRequest("invalid index: index is required")
	}
	if err := json.Unmarshal(raw, &f); err != nil || f != math.Trunc(f) || f < 0 || f > math.MaxInt32 {
		return 0, httpx.BadRequest("invalid index: %s is not a record position", string(raw))
	}
	return int(f), nil
}

func (h *dnsHandlers) update(ctx *fasthttp.RequestCtx) error {
	var req struct {
		Index  json.RawMessage `json:"index"`
		Record json.RawMessage `json:"record"`
	}
	if err := httpx.DecodeJSON(ctx, &req, fasthttp.StatusInternalServerError); err != nil {
		return err
	}
	i, err := dnsIndex(req.Index)
	if err != nil {
		return err
	}
	r, err := dnsParseRecord(req.Record)
	if err != nil {
		return err
	}
	return h.write(ctx, &messages.UpdateLocalRecord{Index: i, Record: r})
}

func (h *dnsHandlers) delete(ctx *fasthttp.RequestCtx) error {
	var req struct {
		Index json.RawMessage `json:"index"`
	}
	if err := httpx.DecodeJSON(ctx, &req, fasthttp.StatusInternalServerError); err != nil {
		return err
	}
	i, err := dnsIndex(req.Index)
	if err != nil {
		return err
	}
	return h.write(ctx, &messages.DeleteLocalRecord{Index: i})
}

func (h *dnsHandlers) versionPreference(ctx *fasthttp.RequestCtx) error {
	var req struct {
		Domain  string          `json:"domain"`
		Version json.RawMessage `json:"version"`
	}
	if err := httpx.DecodeJSON(ctx, &req, fasthttp.StatusInternalServerError); err != nil {
		return err
	}
	var version string
	if err := json.Unmarshal(req.Version, &version); err != nil || (version != messages.VersionP2P && version != messages.VersionPublic) {
		return httpx.BadRequest("invalid version %s: must be p2p or public", strings.TrimSpace(string(req.Version)))
	}
	if strings.TrimSpace(req.Domain) == "" {
		return httpx.Internal("domain is required")
	}
	return h.write(ctx, &messages.SetVersionPreference{Domain: req.Domain, Version: version})
}

func (h *dnsHandlers) clearCache(ctx *fasthttp.RequestCtx) error {
	var req struct {
		Domain string `json:"domain"`
	}
	if err := httpx.DecodeJSON(ctx, &req, fasthttp.StatusInternalServerError); err != nil {
		return err
	}
	if h.d.Server == nil {
		return httpx.Internal("the DNS server is not running")
	}
	if _, err := h.d.Server.ClearCache(req.Domain); err != nil {
		return httpx.Internal("%v", err)
	}
	return httpx.OK(ctx)
}

func (h *dnsHandlers) lookup(ctx *fasthttp.RequestCtx) error {
	var req struct {
		Domain string `json:"domain"`
		Type   string `json:"type"`
	}
	if err := httpx.DecodeJSON(ctx, &req, fasthttp.StatusBadRequest); err != nil {
		return err
	}
	if strings.TrimSpace(req.Domain) == "" {
		return httpx.BadRequest("domain is required")
	}
	if h.d.Server == nil {
		return httpx.Internal("the DNS server is not running")
	}
	// fasthttp's ctx is not cancelled on disconnect and is reused after
	// the handler returns; Lookup runs under its own deadline.
	res, err := h.d.Server.Lookup(context.Background(), req.Domain, req.Type)
	if errors.Is(err, nodedns.ErrBadLookupType) {
		return httpx.BadRequest("%v", err)
	}
	if err != nil {
		return httpx.Internal("dns lookup: %v", err)
	}
	return httpx.JSON(ctx, fasthttp.StatusOK, res)
}
