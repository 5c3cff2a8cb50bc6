package admin

// Settings routes, answered by the settings actor (actors/settings).
// update-settings takes {settings: {NAME: value}}; a value may be a JSON
// string, number or boolean (stored as its text). Any unknown name or bad
// value is a 400 {errors: [...]} and nothing changes.

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/fasthttp/router"
	"github.com/valyala/fasthttp"

	"peerdns/http/httpx"
	"peerdns/messages"
)

// RegisterSettings adds GET /api/settings and POST /api/update-settings.
func RegisterSettings(r *router.Router, log *slog.Logger, root *actor.RootContext, settings *actor.PID) {
	r.GET("/api/settings", httpx.Wrap(log, func(ctx *fasthttp.RequestCtx) error {
		rep, err := httpx.Ask[*messages.GetSettingsReply](root, settings, &messages.GetSettings{}, httpx.AskTimeout)
		if err == nil {
			err = rep.Err
		}
		if err != nil {
			return httpx.Internal("settings: %v", err)
		}
		return httpx.JSON(ctx, 200, map[string]any{"settings": rep.Settings, "metadata": rep.Metadata})
	}))
	r.POST("/api/update-settings", httpx.Wrap(log, func(ctx *fasthttp.RequestCtx) error {
		vals, errs := decodeSettings(ctx.PostBody())
		if len(errs) > 0 {
			return settingsErrors(errs)
		}
		// The actor answers by the deadline (it runs nothing after it and
		// waits for the ledger no longer), so a 500 is its answer, not
		// the ask giving up on an update that is saved later.
		req := &messages.UpdateSettings{Settings: vals, Deadline: time.Now().Add(httpx.AskTimeout)}
		rep, err := httpx.Ask[*messages.UpdateSettingsReply](root, settings, req, httpx.AskTimeout+settingsGrace)
		if err == nil {
			err = rep.Err
		}
		if err != nil {
			return httpx.Internal("settings: %v", err)
		}
		if len(rep.Errors) > 0 {
			return settingsErrors(rep.Errors)
		}
		out := map[string]any{"message": rep.Message, "restartRequired": rep.RestartRequired}
		if len(rep.RestartRequiredSettings) > 0 {
			out["restartRequiredSettings"] = rep.RestartRequiredSettings
		}
		return httpx.JSON(ctx, 200, out)
	}))
}

// settingsGrace is how long update-settings waits for the actor's answer
// after the deadline it gave it.
const settingsGrace = 2 * time.Second

func settingsErrors(errs []string) error {
	return &httpx.Error{Status: 400, Msg: fmt.Sprint(errs), JSON: map[string]any{"errors": errs}}
}

// decodeSettings reads {settings: {NAME: string | number | boolean}}.
func decodeSettings(body []byte) (map[string]string, []string) {
	var req struct {
		Settings map[string]json.RawMessage `json:"settings"`
	}
	// Unmarshal, not a Decoder: data after the object is an error, as
	// every other body (httpx.DecodeJSON).
	if err := json.Unmarshal(body, &req); err != nil {
		return nil, []string{"body: not a JSON object with a settings object: " + messages.JSONError(err, "the body")}
	}
	if req.Settings == nil {
		return nil, []string{"settings is required (an object of setting names to values)"}
	}
	vals := map[string]string{}
	var errs []string
	for name, raw := range req.Settings {
		v, err := settingText(raw)
		if err != nil {
			errs = append(errs, fmt.Sprintf("%s: %v", name, err))
			continue
		}
		vals[name] = v
	}
	return vals, errs
}

// settingText is a JSON scalar as the text a setting stores.
func settingText(raw json.RawMessage) (string, error) {
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		return "", err
	}
	switch x := v.(type) {
	case string:
		return x, nil
	case bool:
		return strconv.FormatBool(x), nil
	case float64:
		return string(bytes.TrimSpace(raw)), nil
	}
	return "", errors.New("want a string, number or boolean")
}
