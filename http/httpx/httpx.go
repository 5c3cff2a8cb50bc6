// Package httpx holds the small helpers every fasthttp server of the node
// shares: one error type, one place that writes errors, JSON bodies in and
// out, the ask-an-actor helper with a deadline, and the Guard that keeps
// web pages from driving a local API (guard.go).
//
// Decisions the admin spec leaves open, taken here for every server:
//   - JSON answers end with a newline, so `curl` output ends cleanly.
//   - Error bodies are plain text and carry X-Content-Type-Options:
//     nosniff, since they may quote the request back.
//   - The request body's Content-Type is checked by the Guard, once for
//     every endpoint, not by DecodeJSON: an endpoint that ignores its body
//     must refuse a text/plain one just the same.
package httpx

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"

	"github.com/valyala/fasthttp"

	"peerdns/messages"
)

// Error is what a handler returns to send a specific status and message.
// Msg is shown to the client; Err is logged, never sent.
type Error struct {
	Status int
	Msg    string
	Err    error
	// JSON, when set, is sent as the body instead of Msg (the few endpoints
	// whose errors the spec gives as JSON).
	JSON any
}

func (e *Error) Error() string {
	if e.Err != nil {
		return e.Msg + ": " + e.Err.Error()
	}
	return e.Msg
}

func (e *Error) Unwrap() error { return e.Err }

// Errorf is a plain-text error with a status. A 500 caused by a full
// disk (an error argument IsNoSpace) becomes a 507 (nospace.go).
func Errorf(status int, format string, a ...any) *Error {
	e := &Error{Status: status, Msg: fmt.Sprintf(format, a...)}
	if status == fasthttp.StatusInternalServerError {
		if cause := noSpaceArg(a); cause != nil {
			return insufficientStorage(e, cause)
		}
	}
	return e
}

// BadRequest is a 400 with a message.
func BadRequest(format string, a ...any) *Error {
	return Errorf(fasthttp.StatusBadRequest, format, a...)
}

// Internal is a 500 whose message names the problem.
func Internal(format string, a ...any) *Error {
	return Errorf(fasthttp.StatusInternalServerError, format, a...)
}

// Handler is a fasthttp handler that returns an error instead of writing it.
type Handler func(ctx *fasthttp.RequestCtx) error

// Wrap turns a Handler into a fasthttp.RequestHandler; errors become the
// response in one place.
func Wrap(log *slog.Logger, h Handler) fasthttp.RequestHandler {
	return func(ctx *fasthttp.RequestCtx) {
		if err := h(ctx); err != nil {
			WriteError(ctx, log, err)
		}
	}
}

// WriteError writes err as the response: an *Error keeps its status and
// message; anything else is a 500 with the error text.
func WriteError(ctx *fasthttp.RequestCtx, log *slog.Logger, err error) {
	var he *Error
	if !errors.As(err, &he) {
		he = &Error{Status: fasthttp.StatusInternalServerError, Msg: err.Error()}
		if IsNoSpace(err) {
			he = insufficientStorage(he, err)
		}
	}
	status := he.Status
	if status == 0 {
		status = fasthttp.StatusInternalServerError
	}
	if status >= 500 && log != nil {
		log.Warn("request failed", "method", string(ctx.Method()), "path", string(ctx.Path()), "status", status, "err", he.Error())
	}
	ctx.Response.Reset()
	ctx.SetStatusCode(status)
	ctx.Response.Header.Set("X-Content-Type-Options", "nosniff")
	if he.JSON != nil {
		_ = JSON(ctx, status, he.JSON)
		return
	}
	ctx.SetContentType("text/plain; charset=utf-8")
	ctx.SetBodyString(he.Msg)
}

// JSON writes v with the status, followed by a newline.
func JSON(ctx *fasthttp.RequestCtx, status int, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return Internal("encode response: %v", err)
	}
	ctx.SetStatusCode(status)
	ctx.SetContentType("application/json; charset=utf-8")
	ctx.SetBody(append(b, '\n'))
	return nil
}

// JSONBytes writes b, a JSON document encoded elsewhere (a cached
// listing), the way JSON would: status 200 and a final newline.
func JSONBytes(ctx *fasthttp.RequestCtx, b []byte) error {
	ctx.SetStatusCode(fasthttp.StatusOK)
	ctx.SetContentType("application/json; charset=utf-8")
	ctx.SetBody(b) // copied: cached bytes stay shared and unchanged
	ctx.Response.AppendBody([]byte{'\n'})
	return nil
}

// OK writes the plain-text body OK with status 200.
func OK(ctx *fasthttp.RequestCtx) error {
	ctx.SetStatusCode(fasthttp.StatusOK)
	ctx.SetContentType("text/plain; charset=utf-8")
	ctx.SetBodyString("OK")
	return nil
}

// DecodeJSON reads the request body into v. An empty or malformed body is
// an error with badStatus (the spec gives 400 for some endpoints and 500
// for those that list only 200/500) and a message naming the problem in
// JSON's terms (messages.JSONError), never v's Go types. The
// Content-Type was already checked by the server's Guard.
func DecodeJSON(ctx *fasthttp.RequestCtx, v any, badStatus int) error {
	body := ctx.PostBody()
	if len(body) == 0 {
		return Errorf(badStatus, "request body is empty: JSON expected")
	}
	if err := json.Unmarshal(body, v); err != nil {
		return Errorf(badStatus, "invalid JSON: %s", messages.JSONError(err, "the body"))
	}
	return nil
}
