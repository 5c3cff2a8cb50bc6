package plugin

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"sync/atomic"
	"unicode/utf8"

	"peerdns/messages"
)

// Runtime is what the edge proxy and the admin API use of one plugin
// while it is loaded: its www folder and its handler (a session with the
// child process, or a Go function for a static plugin). Safe for
// concurrent use; a call while the handler is restarting fails at once
// with ErrPluginDown (the proxy answers 502).
type Runtime struct {
	Domain  string
	WWW     string // absolute path; "" without www
	Handles bool   // has a handler (process or static)
	Actions map[string]bool

	sess     atomic.Pointer[session]
	settings atomic.Pointer[map[string]any] // values in force, for init
	// newSettings: settings changed since the sender last sent them
	// (capacity 1: changes in a row are sent once, the newest).
	newSettings chan struct{}
	static      func(ctx context.Context, req *HandleRequest) (*HandleResponse, error)

	// Counters of the node → plugin calls (the stats' pluginRpc).
	Calls, Failures atomic.Int64
}

// NewRuntime is the runtime of a plugin answered in-process (a static
// plugin): www may be "", handle nil (www only).
func NewRuntime(domain, www string, handle func(ctx context.Context, req *HandleRequest) (*HandleResponse, error)) *Runtime {
	return &Runtime{Domain: domain, WWW: www, Handles: handle != nil, static: handle, Actions: map[string]bool{}}
}

// HandleRequest is the handle call: one HTTP request.
type HandleRequest = messages.PluginHandleRequest

// HandleResponse is the handler's answer.
type HandleResponse = messages.PluginHandleResponse

// Static is the plugin's www folder (absolute), "" without one.
func (r *Runtime) Static() string { return r.WWW }

// HasHandler: the plugin answers requests (a process or in-process).
func (r *Runtime) HasHandler() bool { return r.Handles }

// HasAction: the plugin's manifest declares the action.
func (r *Runtime) HasAction(name string) bool { return r.Actions[name] }

// rawResponse reads the body as the base64 string the protocol says.
type rawResponse struct {
	Status  int               `json:"status"`
	Headers map[string]string `json:"headers"`
	Body    string            `json:"body"`
}

// ErrBadResponse: the handler answered handle with something that is not
// a response.
var ErrBadResponse = errors.New("plugin handler answered with an invalid response")

// Handle passes one HTTP request to the handler.
func (r *Runtime) Handle(ctx context.Context, req *HandleRequest) (*HandleResponse, error) {
	r.Calls.Add(1)
	resp, err := r.handle(ctx, req)
	if err != nil {
		r.Failures.Add(1)
	}
	return resp, err
}

func (r *Runtime) handle(ctx context.Context, req *HandleRequest) (*HandleResponse, error) {
	if r.static != nil {
		return r.static(ctx, req)
	}
	s := r.sess.Load()
	if s == nil {
		return nil, fmt.Errorf("%s: %w", r.Domain, messages.ErrPluginDown)
	}
	raw, err := s.Call(ctx, "handle", req)
	if err != nil {
		return nil, err
	}
	var out rawResponse
	if err := json.Unmarshal(raw, &out); err != nil || out.Status < 100 || out.Status > 599 {
		return nil, fmt.Errorf("%w: %s", ErrBadResponse, clip(raw))
	}
	body, err := base64.StdEncoding.DecodeString(out.Body)
	if err != nil {
		return nil, fmt.Errorf("%w: body is not base64", ErrBadResponse)
	}
	return &HandleResponse{Status: out.Status, Headers: out.Headers, Body: body}, nil
}

// Action runs an action of the handler.
func (r *Runtime) Action(ctx context.Context, name string, params json.RawMessage) (json.RawMessage, error) {
	if len(params) == 0 {
		params = json.RawMessage("{}")
	}
	return r.call(ctx, "action", map[string]any{"name": name, "params": params})
}

// notify sends a notification to the handler, waiting until ctx ends
// for the handler to take its input; it fails when the handler does not
// run (ErrPluginDown), its session ends or ctx ends first.
func (r *Runtime) notify(ctx context.Context, method string, params any) error {
	s := r.sess.Load()
	if s == nil {
		return fmt.Errorf("%s: %w", r.Domain, messages.ErrPluginDown)
	}
	return s.Notify(ctx, method, params)
}

// settingsChanged asks the running handler's settings sender to send
// the settings in force; it never waits.
func (r *Runtime) settingsChanged() {
	select {
	case r.newSettings <- struct{}{}:
	default: // one is pending: it sends the newest
	}
}

// clip shortens what a handler sent for a log line or an error, to 200
// bytes cut at the start of a character.
func clip(b []byte) string {
	if len(b) > 200 {
		n := 200
		for n > 0 && !utf8.RuneStart(b[n]) {
			n--
		}
		return string(b[:n]) + "…"
	}
	return string(b)
}

// call makes a node → plugin call on the running handler.
func (r *Runtime) call(ctx context.Context, method string, params any) (json.RawMessage, error) {
	r.Calls.Add(1)
	s := r.sess.Load()
	if s == nil {
		r.Failures.Add(1)
		return nil, fmt.Errorf("%s: %w", r.Domain, messages.ErrPluginDown)
	}
	res, err := s.Call(ctx, method, params)
	if err != nil {
		r.Failures.Add(1)
	}
	return res, err
}
