package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
)

// app is the plugin's state: what init said and the greeting setting.
type app struct {
	c        *conn
	mu       sync.Mutex
	domain   string
	peerID   string
	greeting string
	exit     func(code int)
}

type note struct {
	ID      string `json:"id"`
	Text    string `json:"text"`
	Created int64  `json:"created"`
	By      string `json:"by"`
}

// request and response are the handle call's shapes (bodies base64:
// encoding/json does that for []byte).
type request struct {
	Method  string            `json:"method"`
	Path    string            `json:"path"`
	Query   string            `json:"query"`
	Headers map[string]string `json:"headers"`
	Body    []byte            `json:"body"`
}

type response struct {
	Status  int               `json:"status"`
	Headers map[string]string `json:"headers"`
	Body    []byte            `json:"body"`
}

// run serves the node on stdin/stdout until stdin ends; the exit code.
func run(ctx context.Context, stdin io.Reader, stdout, stderr io.Writer) int {
	a := &app{c: newConn(stdout, stderr), greeting: "hello", exit: os.Exit}
	if err := a.c.serve(ctx, stdin, a.handle); err != nil {
		fmt.Fprintf(stderr, "notes: %v\n", err)
		return 1
	}
	return 0
}

// handle answers one call from the node.
func (a *app) handle(ctx context.Context, method string, params json.RawMessage) (any, error) {
	switch method {
	case "init":
		var p struct {
			Domain   string         `json:"domain"`
			PeerID   string         `json:"peerId"`
			Settings map[string]any `json:"settings"`
		}
		if err := json.Unmarshal(params, &p); err != nil {
			return nil, err
		}
		a.mu.Lock()
		a.domain, a.peerID = p.Domain, p.PeerID
		a.mu.Unlock()
		a.setSettings(p.Settings)
		_ = a.c.notify("log", map[string]string{"level": "info", "component": "notes", "message": "notes plugin started on " + p.Domain})
		return map[string]any{}, nil
	case "settings.changed":
		var p struct {
			Settings map[string]any `json:"settings"`
		}
		if err := json.Unmarshal(params, &p); err != nil {
			return nil, err
		}
		a.setSettings(p.Settings)
		return map[string]any{}, nil
	case "handle":
		var r request
		if err := json.Unmarshal(params, &r); err != nil {
			return nil, err
		}
		return a.serveHTTP(ctx, &r), nil
	case "action":
		var p struct {
			Name   string          `json:"name"`
			Params json.RawMessage `json:"params"`
		}
		if err := json.Unmarshal(params, &p); err != nil {
			return nil, err
		}
		return a.action(ctx, p.Name, p.Params)
	case "peer.call":
		var p struct {
			Peer   string `json:"peer"`
			Method string `json:"method"`
		}
		if err := json.Unmarshal(params, &p); err != nil {
			return nil, err
		}
		if p.Method != "ping" {
			return nil, fmt.Errorf("no peer method %q", p.Method)
		}
		a.mu.Lock()
		defer a.mu.Unlock()
		return map[string]string{"pong": a.domain, "from": a.peerID, "caller": p.Peer}, nil
	case "peer.send":
		return nil, nil
	}
	return nil, fmt.Errorf("unknown method %q", method)
}

func (a *app) setSettings(s map[string]any) {
	if g, ok := s["greeting"].(string); ok {
		a.mu.Lock()
		a.greeting = g
		a.mu.Unlock()
	}
}

func (a *app) action(ctx context.Context, name string, params json.RawMessage) (any, error) {
	switch name {
	case "count":
		notes, err := a.list(ctx)
		if err != nil {
			return nil, err
		}
		return map[string]int{"notes": len(notes)}, nil
	case "ping-peer":
		var p struct {
			Peer string `json:"peer"`
		}
		if err := json.Unmarshal(params, &p); err != nil || p.Peer == "" {
			return nil, errors.New(`ping-peer needs {"peer": "<peer id>"}`)
		}
		var out json.RawMessage
		err := a.c.call(ctx, "peer.call", map[string]any{"peer": p.Peer, "method": "ping", "params": map[string]any{}}, &out)
		return out, err
	case "crash":
		a.exit(3)
		return nil, nil
	}
	return nil, fmt.Errorf("no action %q", name)
}

func (a *app) list(ctx context.Context) ([]note, error) {
	var items []struct {
		Key   string `json:"key"`
		Value note   `json:"value"`
	}
	if err := a.c.call(ctx, "db.list", map[string]string{"prefix": "note:"}, &items); err != nil {
		return nil, err
	}
	out := make([]note, 0, len(items))
	for _, it := range items {
		out = append(out, it.Value)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Created < out[j].Created })
	return out, nil
}

func jsonResponse(status int, v any) *response {
	b, _ := json.Marshal(v)
	return &response{Status: status, Headers: map[string]string{"Content-Type": "application/json"}, Body: b}
}

func errorResponse(status int, msg string) *response {
	return jsonResponse(status, map[string]string{"error": msg})
}

// serveHTTP is the plugin's API. Writes arrive only with a valid token
// of this node: the node checks it and sets X-Peerdns-Peer.
func (a *app) serveHTTP(ctx context.Context, r *request) *response {
	switch {
	case r.Path == "/api/notes" && r.Method == http.MethodGet:
		notes, err := a.list(ctx)
		if err != nil {
			return errorResponse(500, err.Error())
		}
		return jsonResponse(200, notes)
	case r.Path == "/api/notes" && r.Method == http.MethodPost:
		var in struct {
			Text string `json:"text"`
		}
		if err := json.Unmarshal(r.Body, &in); err != nil || strings.TrimSpace(in.Text) == "" {
			return errorResponse(400, `want {"text": "..."}`)
		}
		now := time.Now()
		n := note{ID: strconv.FormatInt(now.UnixNano(), 36), Text: in.Text, Created: now.UnixMilli(), By: header(r.Headers, "X-Peerdns-Peer")}
		if err := a.c.call(ctx, "db.put", map[string]any{"key": "note:" + n.ID, "value": n}, nil); err != nil {
			return errorResponse(500, err.Error())
		}
		return jsonResponse(201, n)
	case strings.HasPrefix(r.Path, "/api/notes/") && r.Method == http.MethodDelete:
		id := strings.TrimPrefix(r.Path, "/api/notes/")
		if id == "" || strings.ContainsAny(id, "/:") {
			return errorResponse(400, "bad note id")
		}
		if err := a.c.call(ctx, "db.delete", map[string]string{"key": "note:" + id}, nil); err != nil {
			return errorResponse(500, err.Error())
		}
		return &response{Status: 204}
	case r.Path == "/api/hello" && r.Method == http.MethodGet:
		a.mu.Lock()
		defer a.mu.Unlock()
		return jsonResponse(200, map[string]string{"greeting": a.greeting, "domain": a.domain, "peerId": a.peerID})
	}
	return errorResponse(404, "no route "+r.Method+" "+r.Path)
}

// header reads a header by name in any case.
func header(h map[string]string, name string) string {
	for k, v := range h {
		if strings.EqualFold(k, name) {
			return v
		}
	}
	return ""
}
