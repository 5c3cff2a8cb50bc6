package plugin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"peerdns/internal/store"
	"peerdns/internal/testutil"
	"peerdns/messages"
	"peerdns/transport"
)

type harness struct {
	t     testing.TB
	sys   *actor.ActorSystem
	pid   *actor.PID
	table *Table
	log   *testutil.LogBuffer
	deps  Deps
}

func newHarness(t testing.TB, dir string, tune func(*Deps)) *harness {
	t.Helper()
	db, err := store.Open(filepath.Join(t.TempDir(), "node.db"), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	h := &harness{t: t, table: &Table{}, log: &testutil.LogBuffer{}}
	h.sys = actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return slog.New(slog.DiscardHandler) }))
	t.Cleanup(h.sys.Shutdown)
	h.deps = Deps{Dir: dir, DataDir: filepath.Join(t.TempDir(), "data"), Store: db, PeerID: "self", Table: h.table,
		Log:     slog.New(slog.NewTextHandler(h.log, &slog.HandlerOptions{Level: slog.LevelDebug})),
		Backoff: transport.Backoff{Min: 10 * time.Millisecond, Max: 50 * time.Millisecond}, CallTimeout: 10 * time.Second,
		Static: []Static{{Manifest: Manifest{Name: "profile", Version: "1", Domain: "profile.p2p"},
			Handle: func(context.Context, *HandleRequest) (*HandleResponse, error) {
				return &HandleResponse{Status: 200, Body: []byte("static")}, nil
			}}},
	}
	if tune != nil {
		tune(&h.deps)
	}
	h.start()
	return h
}

func (h *harness) start() {
	pid, err := h.sys.Root.SpawnNamed(Props(h.deps), fmt.Sprintf("plugins-%d", time.Now().UnixNano()))
	if err != nil {
		h.t.Fatal(err)
	}
	h.pid = pid
	h.t.Cleanup(func() { _ = h.sys.Root.StopFuture(pid).Wait() })
}

func ask[R any](t testing.TB, h *harness, req any) R {
	t.Helper()
	res, err := h.sys.Root.RequestFuture(h.pid, req, 15*time.Second).Result()
	if err != nil {
		t.Fatalf("ask %T: %v", req, err)
	}
	return res.(R)
}

func (h *harness) plugin(domain string) messages.Plugin {
	h.t.Helper()
	r := ask[*messages.GetPluginReply](h.t, h, &messages.GetPlugin{Domain: domain})
	if r.Err != nil {
		h.t.Fatal(r.Err)
	}
	return r.Plugin
}

// waitRunning waits until the domain's handler answers.
func (h *harness) waitRunning(domain string) *Runtime {
	h.t.Helper()
	var rt *Runtime
	testutil.Eventually(h.t, 10*time.Second, func() error {
		if rt = h.table.Lookup(domain); rt == nil {
			return errors.New("handler not running yet")
		}
		// One load: the session can end and be cleared between two.
		if s := rt.sess.Load(); s == nil || s.Err() != nil {
			return errors.New("handler not running yet")
		}
		return nil
	})
	return rt
}

func handle(t *testing.T, rt *Runtime, path string) map[string]any {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := rt.Handle(ctx, &HandleRequest{Method: "POST", Path: path, Query: "a=1", Headers: map[string]string{"X-Peerdns-Peer": "self"}, Body: []byte("hi")})
	if err != nil {
		t.Fatalf("handle %s: %v", path, err)
	}
	var out map[string]any
	if resp.Status != 200 || json.Unmarshal(resp.Body, &out) != nil {
		t.Fatalf("handle %s: %d %s", path, resp.Status, resp.Body)
	}
	return out
}

// A real handler process: listed with its fields, requests with db round
// trips, actions, settings saved and sent, stop/start/reload, a bad
// manifest listed as stopped, and the static plugin.
func TestPluginLifecycle(t *testing.T) {
	testutil.NoLeaks(t)
	dir := t.TempDir()
	writePlugin(t, dir, "echo", "echo.p2p", "ok", nil)
	writePlugin(t, dir, "broken", "broken.p2p", "ok", map[string]any{"version": nil})
	h := newHarness(t, dir, nil)
	rt := h.waitRunning("echo.p2p")

	list := ask[*messages.GetPluginsReply](t, h, &messages.GetPlugins{}).Plugins
	if len(list) != 3 {
		t.Fatalf("plugins: %+v", list)
	}
	byName := map[string]messages.Plugin{}
	for _, p := range list {
		byName[p.Name] = p
	}
	if b := byName["broken"]; b.Status != messages.PluginStopped || !strings.Contains(b.Error, "missing version") {
		t.Fatalf("broken: %+v", b)
	}
	if p := byName["profile"]; p.Status != messages.PluginStatic || p.Domain != "profile.p2p" {
		t.Fatalf("static: %+v", p)
	}
	e := byName["echo"]
	if e.Status != messages.PluginLoaded || !e.HasHandler || !e.HasWww || !e.HasDatabase || len(e.Actions) != 4 ||
		e.Settings["greeting"].Value != "hello" || e.Settings["limit"].Value != float64(3) {
		t.Fatalf("echo: %+v", e)
	}
	if !strings.Contains(h.log.String(), "fake plugin up") {
		t.Fatalf("the handler's log call did not reach the channel:\n%s", h.log)
	}

	out := handle(t, rt, "/notes")
	if out["method"] != "POST" || out["path"] != "/notes" || out["query"] != "a=1" || out["peer"] != "self" || out["body"] != "hi" ||
		fmt.Sprint(out["stored"]) != "map[value:/notes]" {
		t.Fatalf("handle: %v", out)
	}
	res, err := rt.Action(context.Background(), "echo", json.RawMessage(`{"x":1}`))
	if err != nil || string(res) != `{"x":1}` {
		t.Fatalf("echo action: %s %v", res, err)
	}

	// Settings: validated, saved, sent to the running handler.
	bad := ask[*messages.SetPluginSettingsReply](t, h, &messages.SetPluginSettings{Domain: "echo.p2p",
		Values: map[string]json.RawMessage{"greeting": json.RawMessage(`5`), "nope": json.RawMessage(`1`)}})
	if len(bad.Errors) != 2 {
		t.Fatalf("bad settings: %+v", bad)
	}
	ok := ask[*messages.SetPluginSettingsReply](t, h, &messages.SetPluginSettings{Domain: "echo.p2p",
		Values: map[string]json.RawMessage{"greeting": json.RawMessage(`"hi there"`)}})
	if ok.Err != nil || len(ok.Errors) != 0 {
		t.Fatalf("settings: %+v", ok)
	}
	testutil.Eventually(t, 5*time.Second, func() error {
		res, err := rt.Action(context.Background(), "settings", nil)
		if err != nil || !strings.Contains(string(res), "hi there") {
			return fmt.Errorf("handler has settings %s (%v)", res, err)
		}
		return nil
	})

	// Stop, start, reload.
	for _, op := range []string{"stop", "start", "reload"} {
		r := ask[*messages.ControlPluginReply](t, h, &messages.ControlPlugin{Domain: "echo.p2p", Op: op})
		if r.Err != nil {
			t.Fatalf("%s: %v", op, r.Err)
		}
		want := messages.PluginLoaded
		if op == "stop" {
			want = messages.PluginStopped
			if h.table.Lookup("echo.p2p") != nil {
				t.Fatal("a stopped plugin is still in the table")
			}
		}
		if got := h.plugin("echo.p2p").Status; got != want {
			t.Fatalf("after %s: %s", op, got)
		}
	}
	rt = h.waitRunning("echo.p2p")
	if out := handle(t, rt, "/again"); fmt.Sprint(out["stored"]) != "map[value:/again]" {
		t.Fatalf("after reload: %v", out)
	}
	if r := ask[*messages.ControlPluginReply](t, h, &messages.ControlPlugin{Domain: "nope.p2p", Op: "start"}); !errors.Is(r.Err, messages.ErrUnknownPlugin) {
		t.Fatalf("unknown plugin: %v", r.Err)
	}
	if r := ask[*messages.ControlPluginReply](t, h, &messages.ControlPlugin{Domain: "profile.p2p", Op: "stop"}); !errors.Is(r.Err, messages.ErrBadPlugin) {
		t.Fatalf("stopping the static plugin: %v", r.Err)
	}
}

// A stop by request and the settings last across a restart of the
// supervisor; a folder added later is found by a rescan.
func TestPluginStateSurvivesRestart(t *testing.T) {
	testutil.NoLeaks(t)
	dir := t.TempDir()
	writePlugin(t, dir, "a", "a.p2p", "ok", nil)
	h := newHarness(t, dir, nil)
	h.waitRunning("a.p2p")
	ask[*messages.SetPluginSettingsReply](t, h, &messages.SetPluginSettings{Domain: "a.p2p", Values: map[string]json.RawMessage{"limit": json.RawMessage(`7`)}})
	ask[*messages.ControlPluginReply](t, h, &messages.ControlPlugin{Domain: "a.p2p", Op: "stop"})
	_ = h.sys.Root.StopFuture(h.pid).Wait()

	h.start()
	p := h.plugin("a.p2p")
	if p.Status != messages.PluginStopped || p.Settings["limit"].Value != float64(7) {
		t.Fatalf("after restart: %+v", p)
	}
	writePlugin(t, dir, "b", "b.p2p", "ok", nil)
	list := ask[*messages.GetPluginsReply](t, h, &messages.RescanPlugins{}).Plugins
	if len(list) != 3 {
		t.Fatalf("after rescan: %+v", list)
	}
	h.waitRunning("b.p2p")
}

// A handler that exits at once is restarted with backoff and, after
// CrashLoop exits within the window, stopped with the reason.
func TestPluginCrashLoop(t *testing.T) {
	testutil.NoLeaks(t)
	dir := t.TempDir()
	writePlugin(t, dir, "crash", "crash.p2p", "crash", nil)
	h := newHarness(t, dir, func(d *Deps) { d.CrashLoop = 3 })
	testutil.Eventually(t, 10*time.Second, func() error {
		if p := h.plugin("crash.p2p"); p.Status != messages.PluginStopped || !strings.Contains(p.Error, "3 times") {
			return fmt.Errorf("%s %q", p.Status, p.Error)
		}
		return nil
	})
	if !strings.Contains(h.log.String(), "crashing on purpose") {
		t.Fatalf("stderr not logged:\n%s", h.log)
	}
}

// Garbage lines are logged and skipped; a handler that never answers
// costs its caller a timeout; one that floods a line is restarted; one
// that exits mid-call fails the call at once and comes back.
func TestPluginMisbehaviour(t *testing.T) {
	testutil.NoLeaks(t)
	dir := t.TempDir()
	writePlugin(t, dir, "g", "g.p2p", "garbage", nil)
	writePlugin(t, dir, "f", "f.p2p", "flood", nil)
	h := newHarness(t, dir, nil)
	g := h.waitRunning("g.p2p")
	handle(t, g, "/fine")
	if !strings.Contains(h.log.String(), "not JSON-RPC") {
		t.Fatalf("garbage not logged:\n%s", h.log)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	_, err := g.Action(ctx, "slow", nil)
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("slow action: %v", err)
	}
	if _, err := g.Action(context.Background(), "exit", nil); !errors.Is(err, ErrSessionClosed) {
		t.Fatalf("exit action: %v", err)
	}
	g = h.waitRunning("g.p2p")
	handle(t, g, "/back")

	f := h.waitRunning("f.p2p")
	ctx, cancel = context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := f.Handle(ctx, &HandleRequest{Method: "GET", Path: "/"}); !errors.Is(err, ErrSessionClosed) {
		t.Fatalf("flood: %v", err)
	}
	testutil.Eventually(t, 5*time.Second, func() error {
		if !strings.Contains(h.log.String(), "longer than") {
			return errors.New("flood not logged")
		}
		return nil
	})
}

// Manifests that are wrong or reach outside the folder are refused with
// the reason.
func TestManifestRefusals(t *testing.T) {
	dir := t.TempDir()
	outside := t.TempDir()
	if err := os.WriteFile(filepath.Join(outside, "evil.sh"), []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	for name, tc := range map[string]struct {
		extra map[string]any
		want  string
	}{
		"missing name":      {map[string]any{"name": ""}, "missing name"},
		"bad domain":        {map[string]any{"domain": "not a domain"}, "not a domain name"},
		"one label":         {map[string]any{"domain": "localhost"}, "not a domain name"},
		"action slash":      {map[string]any{"actions": []map[string]string{{"name": "a/b"}}}, "action name"},
		"action dots":       {map[string]any{"actions": []map[string]string{{"name": ".."}}}, "action name"},
		"handler escapes":   {map[string]any{"handler": "../x.sh"}, "leaves the plugin folder"},
		"handler absolute":  {map[string]any{"handler": filepath.Join(outside, "evil.sh")}, "leaves the plugin folder"},
		"www missing":       {map[string]any{"www": "nowhere"}, "www"},
		"setting type":      {map[string]any{"settings": map[string]any{"x": map[string]any{"type": "date"}}}, "type"},
		"setting default":   {map[string]any{"settings": map[string]any{"x": map[string]any{"type": "number", "default": "3"}}}, "default"},
		"handler symlinked": {map[string]any{"handler": "link.sh"}, "outside the plugin folder"},
	} {
		t.Run(name, func(t *testing.T) {
			p := writePlugin(t, dir, strings.ReplaceAll(name, " ", "-"), "x.p2p", "ok", tc.extra)
			_ = os.Symlink(filepath.Join(outside, "evil.sh"), filepath.Join(p, "link.sh"))
			if _, err := LoadFolder(p); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want %q", err, tc.want)
			}
		})
	}
}
