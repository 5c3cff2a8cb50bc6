package admin

// Plugin routes, answered by the plugins supervisor (actors/plugin);
// actions go straight to the plugin's Runtime from the request's
// goroutine (no actor round trip, the handler's own deadline).
//
// Statuses: an unknown plugin or action is 404 (the spec's Errors), a
// domain or action name that is not valid is 400, a plugin that is not
// running or a handler that fails is 500 with the reason, a handler that
// does not answer in time is 504. POST /api/plugins/reload reads
// DATA/plugins again (a folder added while the node runs) and answers
// the list.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/fasthttp/router"
	"github.com/valyala/fasthttp"

	"peerdns/http/httpx"
	"peerdns/http/pluginweb"
	"peerdns/messages"
)

// ActionTimeout bounds a plugin action.
const ActionTimeout = 30 * time.Second

// RegisterPlugins adds the plugin routes.
func RegisterPlugins(r *router.Router, log *slog.Logger, root *actor.RootContext, plugins *actor.PID, sites pluginweb.Sites) {
	p := pluginRoutes{root: root, pid: plugins, sites: sites}
	r.GET("/api/plugins", httpx.Wrap(log, p.list))
	r.POST("/api/plugins/reload", httpx.Wrap(log, p.rescan))
	r.GET("/api/plugins/{domain}", httpx.Wrap(log, p.get))
	for _, op := range []string{"start", "stop", "reload"} {
		r.POST("/api/plugins/{domain}/"+op, httpx.Wrap(log, func(ctx *fasthttp.RequestCtx) error { return p.control(ctx, op) }))
	}
	r.POST("/api/plugins/{domain}/actions/{action}", httpx.Wrap(log, p.action))
	r.POST("/api/plugins/{domain}/settings", httpx.Wrap(log, p.settings))
}

type pluginRoutes struct {
	root  *actor.RootContext
	pid   *actor.PID
	sites pluginweb.Sites
}

func (p pluginRoutes) list(ctx *fasthttp.RequestCtx) error {
	rep, err := httpx.Ask[*messages.GetPluginsReply](p.root, p.pid, &messages.GetPlugins{}, httpx.AskTimeout)
	if err != nil {
		return httpx.Internal("plugins: %v", err)
	}
	return httpx.JSON(ctx, 200, map[string]any{"plugins": rep.Plugins})
}

func (p pluginRoutes) rescan(ctx *fasthttp.RequestCtx) error {
	rep, err := httpx.Ask[*messages.GetPluginsReply](p.root, p.pid, &messages.RescanPlugins{}, httpx.AskTimeout)
	if err != nil {
		return httpx.Internal("plugins: %v", err)
	}
	return httpx.JSON(ctx, 200, map[string]any{"plugins": rep.Plugins})
}

// domainParam reads {domain}, percent-decoded as every path parameter
// is (pathParam), and checks it.
func domainParam(ctx *fasthttp.RequestCtx) (string, error) {
	raw, err := pathParam(ctx, "domain")
	if err != nil {
		return "", httpx.BadRequest("invalid plugin domain %q", ctx.UserValue("domain"))
	}
	d, err := messages.NormalizeDomain(raw)
	if err != nil {
		return "", httpx.BadRequest("invalid plugin domain %q", raw)
	}
	return d, nil
}

func pluginErr(err error) error {
	switch {
	case errors.Is(err, messages.ErrUnknownPlugin), errors.Is(err, messages.ErrUnknownAction):
		return httpx.Errorf(404, "%v", err)
	case errors.Is(err, messages.ErrBadPlugin):
		return httpx.BadRequest("%v", err)
	case errors.Is(err, context.DeadlineExceeded):
		return httpx.Errorf(504, "plugin handler did not answer in time")
	}
	return httpx.Internal("%v", err)
}

func (p pluginRoutes) get(ctx *fasthttp.RequestCtx) error {
	d, err := domainParam(ctx)
	if err != nil {
		return err
	}
	rep, err := httpx.Ask[*messages.GetPluginReply](p.root, p.pid, &messages.GetPlugin{Domain: d}, httpx.AskTimeout)
	if err == nil {
		err = rep.Err
	}
	if err != nil {
		return pluginErr(err)
	}
	return httpx.JSON(ctx, 200, rep.Plugin)
}

func (p pluginRoutes) control(ctx *fasthttp.RequestCtx, op string) error {
	d, err := domainParam(ctx)
	if err != nil {
		return err
	}
	// The supervisor answers a stop once it asked the handler to stop,
	// not once it exited (a start or reload meanwhile runs after that);
	// a start or reload opens the plugin's database before it answers.
	rep, err := httpx.Ask[*messages.ControlPluginReply](p.root, p.pid, &messages.ControlPlugin{Domain: d, Op: op}, httpx.AskTimeout+5*time.Second)
	if err == nil {
		err = rep.Err
	}
	if err != nil {
		return pluginErr(err)
	}
	return httpx.JSON(ctx, 200, map[string]any{"success": true, "message": rep.Message, "domain": d})
}

func (p pluginRoutes) action(ctx *fasthttp.RequestCtx) error {
	d, err := domainParam(ctx)
	if err != nil {
		return err
	}
	name, err := pathParam(ctx, "action")
	if err != nil {
		name, _ = ctx.UserValue("action").(string)
	}
	if err != nil || name == "" || strings.ContainsAny(name, "/\\") || strings.Contains(name, "..") || len(name) > 64 {
		return httpx.BadRequest("invalid action name %q", name)
	}
	var params json.RawMessage
	if body := ctx.PostBody(); len(body) > 0 {
		var obj map[string]json.RawMessage
		if err := json.Unmarshal(body, &obj); err != nil {
			return httpx.BadRequest("action parameters must be a JSON object: %s", messages.JSONError(err, "the body"))
		}
		params = append(json.RawMessage(nil), body...)
	}
	rt := p.sites.Site(d)
	if rt == nil {
		rep, err := httpx.Ask[*messages.GetPluginReply](p.root, p.pid, &messages.GetPlugin{Domain: d}, httpx.AskTimeout)
		if err == nil && rep.Err != nil {
			return pluginErr(rep.Err)
		}
		return httpx.Internal("plugin %s is not running", d)
	}
	if !rt.HasAction(name) {
		return pluginErr(fmt.Errorf("%w: %s in %s", messages.ErrUnknownAction, name, d))
	}
	cctx, cancel := context.WithTimeout(context.Background(), ActionTimeout)
	defer cancel()
	res, err := rt.Action(cctx, name, params)
	if err != nil {
		return pluginErr(err)
	}
	if len(res) == 0 {
		res = json.RawMessage("null")
	}
	return httpx.JSON(ctx, 200, map[string]any{"success": true, "result": res})
}

func (p pluginRoutes) settings(ctx *fasthttp.RequestCtx) error {
	d, err := domainParam(ctx)
	if err != nil {
		return err
	}
	var vals map[string]json.RawMessage
	if err := json.Unmarshal(ctx.PostBody(), &vals); err != nil || vals == nil {
		return &httpx.Error{Status: 400, Msg: "settings must be a JSON object", JSON: map[string]any{"success": false, "errors": []string{"body: want a JSON object of setting key to value"}}}
	}
	rep, err := httpx.Ask[*messages.SetPluginSettingsReply](p.root, p.pid, &messages.SetPluginSettings{Domain: d, Values: vals}, httpx.AskTimeout)
	if err == nil {
		err = rep.Err
	}
	if err != nil {
		return pluginErr(err)
	}
	if len(rep.Errors) > 0 {
		return &httpx.Error{Status: 400, Msg: strings.Join(rep.Errors, "; "), JSON: map[string]any{"success": false, "errors": rep.Errors}}
	}
	return httpx.JSON(ctx, 200, map[string]any{"success": true, "message": "settings of " + d + " saved"})
}
