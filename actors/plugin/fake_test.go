package plugin

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// TestMain lets the test binary play a plugin handler (fakePlugin) when
// a plugin folder's run.sh starts it with PEERDNS_FAKE_PLUGIN set.
func TestMain(m *testing.M) {
	if mode := os.Getenv("PEERDNS_FAKE_PLUGIN"); mode != "" {
		os.Exit(fakePlugin(mode))
	}
	os.Exit(m.Run())
}

// fakePlugin speaks the protocol with the package's own session type
// (JSON-RPC is symmetric). Modes: ok; garbage (writes non-JSON-RPC lines
// first); crash (exits at once); flood (answers handle with one 9 MiB
// line).
func fakePlugin(mode string) int {
	switch mode {
	case "crash":
		fmt.Fprintln(os.Stderr, "crashing on purpose")
		return 3
	case "garbage":
		fmt.Println("this is not json")
		fmt.Println(`{"jsonrpc":"1.0","id":1}`)
	}
	var sess *session
	ready := make(chan struct{}) // closed once sess is set
	var mu sync.Mutex            // guards settings: calls are served concurrently
	var settings json.RawMessage
	serve := func(ctx context.Context, method string, params json.RawMessage) (any, error) {
		<-ready
		switch method {
		case "init":
			var p struct{ Settings json.RawMessage }
			_ = json.Unmarshal(params, &p)
			mu.Lock()
			settings = p.Settings
			mu.Unlock()
			_ = sess.Notify(ctx, "log", map[string]string{"level": "info", "component": "test", "message": "fake plugin up"})
			if mode == "logflood" {
				for i := range 5000 {
					_ = sess.Notify(ctx, "log", map[string]string{"level": "info", "component": "test", "message": fmt.Sprintf("flood line %d", i)})
				}
			}
			if mode == "runelog" {
				// A component whose byte 64 is in the middle of a é.
				_ = sess.Notify(ctx, "log", map[string]string{"level": "warn", "component": strings.Repeat("c", 63) + "éé", "message": "runes"})
			}
			if mode == "biglog" {
				_ = sess.Notify(ctx, "log", map[string]string{"level": "warn", "component": strings.Repeat("c", 1<<20), "message": strings.Repeat("m", 1<<20)})
			}
			return map[string]any{}, nil
		case "settings.changed":
			var p struct{ Settings json.RawMessage }
			_ = json.Unmarshal(params, &p)
			mu.Lock()
			settings = p.Settings
			mu.Unlock()
			return nil, nil
		case "handle":
			if mode == "flood" {
				os.Stdout.WriteString(`{"jsonrpc":"2.0","id":1,"result":"` + strings.Repeat("x", 9<<20) + "\"}\n")
				select {}
			}
			var req HandleRequest
			if err := json.Unmarshal(params, &req); err != nil {
				return nil, err
			}
			if rest, ok := strings.CutPrefix(req.Path, "/peernote/"); ok {
				// /peernote/<n>/<peer>: n peer.call notifications to
				// peer, then the answer.
				count, peer, _ := strings.Cut(rest, "/")
				var n int
				_, _ = fmt.Sscan(count, &n)
				for range n {
					if err := sess.Notify(ctx, "peer.call", map[string]any{"peer": peer, "method": "ping", "params": map[string]any{}}); err != nil {
						return nil, err
					}
				}
				return map[string]any{"status": 200, "body": []byte("sent")}, nil
			}
			if n, ok := strings.CutPrefix(req.Path, "/seq/"); ok {
				// Two puts in order: k/<n>, then last=<n>. A consistent
				// copy holding last=n holds every k/0..k/n.
				if _, err := sess.Call(ctx, "db.put", map[string]any{"key": "k/" + n, "value": json.RawMessage(n)}); err != nil {
					return nil, err
				}
				if _, err := sess.Call(ctx, "db.put", map[string]any{"key": "last", "value": json.RawMessage(n)}); err != nil {
					return nil, err
				}
				return map[string]any{"status": 200, "headers": map[string]string{"Content-Type": "application/json"}, "body": []byte("{}")}, nil
			}
			if _, err := sess.Call(ctx, "db.put", map[string]any{"key": "last", "value": req.Path}); err != nil {
				return nil, err
			}
			got, err := sess.Call(ctx, "db.get", map[string]any{"key": "last"})
			if err != nil {
				return nil, err
			}
			body, _ := json.Marshal(map[string]any{"method": req.Method, "path": req.Path, "query": req.Query,
				"peer": req.Headers["X-Peerdns-Peer"], "stored": got, "body": string(req.Body)})
			return map[string]any{"status": 200, "headers": map[string]string{"Content-Type": "application/json"}, "body": body}, nil
		case "peer.call":
			// A peer's call: method big answers 2 MiB, any other pong.
			var p struct{ Method string }
			_ = json.Unmarshal(params, &p)
			if p.Method == "big" {
				return strings.Repeat("x", 2<<20), nil
			}
			return map[string]any{"pong": true}, nil
		case "action":
			var p struct {
				Name   string
				Params json.RawMessage
			}
			_ = json.Unmarshal(params, &p)
			switch p.Name {
			case "echo":
				return p.Params, nil
			case "settings":
				mu.Lock()
				defer mu.Unlock()
				return settings, nil
			case "slow":
				<-ctx.Done()
				return nil, ctx.Err()
			case "exit":
				os.Exit(4)
			}
			return nil, fmt.Errorf("no action %s", p.Name)
		}
		return nil, fmt.Errorf("unknown method %s", method)
	}
	sess = newSession(os.Stdin, os.Stdout, serve, sessionHooks{garbage: func(line []byte) { fmt.Fprintf(os.Stderr, "garbage from the node: %q\n", line) }})
	close(ready)
	<-sess.Done()
	return 0
}

// writePlugin makes a plugin folder under dir running this test binary
// in mode; manifest fields in extra override the defaults.
func writePlugin(t testing.TB, dir, folder, domain, mode string, extra map[string]any) string {
	t.Helper()
	p := filepath.Join(dir, folder)
	if err := os.MkdirAll(filepath.Join(p, "www"), 0o755); err != nil {
		t.Fatal(err)
	}
	script := fmt.Sprintf("#!/bin/sh\nPEERDNS_FAKE_PLUGIN=%s exec '%s' -test.run=^$\n", mode, os.Args[0])
	if err := os.WriteFile(filepath.Join(p, "run.sh"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(p, "www", "index.html"), []byte("<h1>"+domain+"</h1>"), 0o644); err != nil {
		t.Fatal(err)
	}
	m := map[string]any{
		"name": folder, "version": "1.0.0", "description": "test plugin", "domain": domain,
		"handler": "run.sh", "www": "www", "database": true,
		"actions":  []map[string]string{{"name": "echo", "label": "Echo"}, {"name": "settings"}, {"name": "slow"}, {"name": "exit"}},
		"settings": map[string]any{"greeting": map[string]any{"type": "string", "label": "Greeting", "default": "hello"}, "limit": map[string]any{"type": "number", "default": 3}},
	}
	for k, v := range extra {
		if v == nil {
			delete(m, k)
		} else {
			m[k] = v
		}
	}
	b, _ := json.Marshal(m)
	if err := os.WriteFile(filepath.Join(p, ManifestName), b, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}
