package main

import (
	"context"
	"encoding/json"
	"io"
	"strings"
	"sync"
	"testing"
	"time"
)

// fakeNode plays the node on the other end of the pipes: it answers the
// plugin's db.* calls from a map and lets the test call the plugin.
type fakeNode struct {
	t     *testing.T
	in    *io.PipeWriter // to the plugin's stdin
	c     *conn          // our side of the session
	mu    sync.Mutex
	db    map[string]json.RawMessage
	logs  []string
	crash int
}

func startPlugin(t *testing.T) (*fakeNode, *strings.Builder) {
	t.Helper()
	toPlugin, pluginIn := io.Pipe()
	fromPlugin, pluginOut := io.Pipe()
	stderr := &strings.Builder{}
	n := &fakeNode{t: t, in: pluginIn, db: map[string]json.RawMessage{}}
	n.c = newConn(pluginIn, io.Discard)
	a := &app{c: newConn(pluginOut, stderr), greeting: "hello", exit: func(c int) { n.mu.Lock(); n.crash = c; n.mu.Unlock() }}
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = a.c.serve(context.Background(), toPlugin, a.handle)
		pluginOut.Close()
	}()
	go func() { _ = n.c.serve(context.Background(), fromPlugin, n.serve) }()
	t.Cleanup(func() { pluginIn.Close(); <-done })
	return n, stderr
}

func (n *fakeNode) serve(_ context.Context, method string, params json.RawMessage) (any, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	var p struct {
		Key, Prefix string
		Value       json.RawMessage
		Message     string
	}
	_ = json.Unmarshal(params, &p)
	switch method {
	case "db.get":
		return map[string]any{"value": n.db[p.Key]}, nil
	case "db.put":
		n.db[p.Key] = p.Value
		return map[string]any{}, nil
	case "db.delete":
		delete(n.db, p.Key)
		return map[string]any{}, nil
	case "db.list":
		out := []map[string]any{}
		for k, v := range n.db {
			if strings.HasPrefix(k, p.Prefix) {
				out = append(out, map[string]any{"key": k, "value": v})
			}
		}
		return out, nil
	case "log":
		n.logs = append(n.logs, p.Message)
		return map[string]any{}, nil
	}
	return nil, nil
}

func (n *fakeNode) call(method string, params, out any) error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return n.c.call(ctx, method, params, out)
}

func (n *fakeNode) http(method, path, body string) response {
	n.t.Helper()
	var r response
	if err := n.call("handle", request{Method: method, Path: path, Headers: map[string]string{"x-peerdns-peer": "me"}, Body: []byte(body)}, &r); err != nil {
		n.t.Fatalf("%s %s: %v", method, path, err)
	}
	return r
}

func TestNotes(t *testing.T) {
	n, stderr := startPlugin(t)
	if err := n.call("init", map[string]any{"domain": "notes.p2p", "peerId": "abc", "settings": map[string]any{"greeting": "hi"}}, nil); err != nil {
		t.Fatal(err)
	}
	if r := n.http("GET", "/api/hello", ""); r.Status != 200 || !strings.Contains(string(r.Body), `"greeting":"hi"`) || !strings.Contains(string(r.Body), `"peerId":"abc"`) {
		t.Fatalf("hello: %d %s", r.Status, r.Body)
	}
	// Two requests in flight at once, each making db round trips.
	var wg sync.WaitGroup
	for _, text := range []string{"one", "two"} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if r := n.http("POST", "/api/notes", `{"text":"`+text+`"}`); r.Status != 201 || !strings.Contains(string(r.Body), `"by":"me"`) {
				t.Errorf("post %s: %d %s", text, r.Status, r.Body)
			}
		}()
	}
	wg.Wait()
	var notes []note
	r := n.http("GET", "/api/notes", "")
	if err := json.Unmarshal(r.Body, &notes); err != nil || len(notes) != 2 {
		t.Fatalf("list: %s %v", r.Body, err)
	}
	if r := n.http("DELETE", "/api/notes/"+notes[0].ID, ""); r.Status != 204 {
		t.Fatalf("delete: %d", r.Status)
	}
	var count map[string]int
	if err := n.call("action", map[string]any{"name": "count"}, &count); err != nil || count["notes"] != 1 {
		t.Fatalf("count: %v %v", count, err)
	}
	if r := n.http("POST", "/api/notes", `{}`); r.Status != 400 {
		t.Fatalf("empty note: %d", r.Status)
	}
	if r := n.http("GET", "/nope", ""); r.Status != 404 {
		t.Fatalf("unknown path: %d", r.Status)
	}
	if err := n.c.notify("settings.changed", map[string]any{"settings": map[string]any{"greeting": "hey"}}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for !strings.Contains(string(n.http("GET", "/api/hello", "").Body), `"greeting":"hey"`) {
		if time.Now().After(deadline) {
			t.Fatal("settings.changed not applied")
		}
	}
	// A garbage line from the node is reported and skipped.
	if _, err := io.WriteString(n.in, "not json\n"); err != nil {
		t.Fatal(err)
	}
	if r := n.http("GET", "/api/hello", ""); r.Status != 200 {
		t.Fatalf("after garbage: %d", r.Status)
	}
	if !strings.Contains(stderr.String(), "not JSON-RPC") {
		t.Fatalf("garbage not reported: %q", stderr.String())
	}
	if err := n.call("action", map[string]any{"name": "crash"}, nil); err != nil {
		t.Fatal(err)
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.crash != 3 || len(n.logs) == 0 {
		t.Fatalf("crash exit %d, logs %v", n.crash, n.logs)
	}
}
