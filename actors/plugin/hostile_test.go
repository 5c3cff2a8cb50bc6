package plugin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"peerdns/internal/testutil"
	"peerdns/messages"
)

// writeShellPlugin makes a plugin folder whose handler is the shell
// script body (after "#!/bin/sh").
func writeShellPlugin(t testing.TB, dir, folder, domain, body string) string {
	t.Helper()
	p := writePlugin(t, dir, folder, domain, "ok", nil)
	if err := os.WriteFile(filepath.Join(p, "run.sh"), []byte("#!/bin/sh\n"+body), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

// initThenDeaf answers init and never reads its input again.
const initThenDeaf = `read line
printf '{"jsonrpc":"2.0","id":1,"result":{}}\n'
exec sleep 600
`

// A handler that stops reading its input: calls to it end at their
// deadline, and the supervisor saves settings without waiting for it
// (settings.changed waits on the session's own goroutine).
func TestPluginNotReadingItsInput(t *testing.T) {
	testutil.NoLeaks(t)
	dir := t.TempDir()
	writeShellPlugin(t, dir, "deaf", "deaf.p2p", initThenDeaf)
	h := newHarness(t, dir, nil)
	rt := h.waitRunning("deaf.p2p")
	first := rt.sess.Load()

	body := []byte(strings.Repeat("x", 256<<10))
	var wg sync.WaitGroup
	errs := make(chan error, 2*maxQueued)
	for range 2 * maxQueued {
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
			defer cancel()
			_, err := rt.Handle(ctx, &HandleRequest{Method: "POST", Path: "/", Body: body})
			errs <- err
		})
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("calls to a handler that does not read its input outlived their deadline by 10 s")
	}
	close(errs)
	for err := range errs {
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("call: %v, want the deadline", err)
		}
	}

	began := time.Now()
	for _, v := range []string{`"new"`, `"newer"`} {
		r := ask[*messages.SetPluginSettingsReply](t, h, &messages.SetPluginSettings{Domain: "deaf.p2p",
			Values: map[string]json.RawMessage{"greeting": json.RawMessage(v)}})
		if r.Err != nil || len(r.Errors) > 0 {
			t.Fatalf("settings: %+v", r)
		}
	}
	if d := time.Since(began); d > 2*time.Second {
		t.Fatalf("the supervisor took %s to save settings for a handler that does not read", d)
	}
	if rt.sess.Load() != first {
		t.Fatal("the handler was restarted")
	}
}

// ignoresTerm answers init, ignores SIGTERM and reads its input until
// killed.
const ignoresTerm = `trap '' TERM
read line
printf '{"jsonrpc":"2.0","id":1,"result":{}}\n'
while read line; do :; done
`

// Stopping a handler that ignores SIGTERM (killed 2 s later) does not
// hold the supervisor: the stop is answered at once, and a start asked
// while the old process is still exiting runs the new handler once it
// is gone.
func TestPluginStopDoesNotBlockSupervisor(t *testing.T) {
	testutil.NoLeaks(t)
	dir := t.TempDir()
	writeShellPlugin(t, dir, "stubborn", "stubborn.p2p", ignoresTerm)
	writePlugin(t, dir, "echo", "echo.p2p", "ok", nil)
	h := newHarness(t, dir, nil)
	first := h.waitRunning("stubborn.p2p").sess.Load()
	h.waitRunning("echo.p2p")

	began := time.Now()
	if r := ask[*messages.ControlPluginReply](t, h, &messages.ControlPlugin{Domain: "stubborn.p2p", Op: "stop"}); r.Err != nil {
		t.Fatalf("stop: %v", r.Err)
	}
	if d := time.Since(began); d > time.Second {
		t.Fatalf("stopping a handler that ignores SIGTERM held the supervisor %s", d)
	}
	if p := h.plugin("stubborn.p2p"); p.Status != messages.PluginStopped {
		t.Fatalf("after stop: %s", p.Status)
	}
	if r := ask[*messages.ControlPluginReply](t, h, &messages.ControlPlugin{Domain: "stubborn.p2p", Op: "start"}); r.Err != nil {
		t.Fatalf("start while the old handler exits: %v", r.Err)
	}
	if d := time.Since(began); d > time.Second {
		t.Fatalf("stop and start took the supervisor %s", d)
	}
	// The other plugin and the list answer meanwhile.
	handle(t, h.waitRunning("echo.p2p"), "/meanwhile")
	if len(ask[*messages.GetPluginsReply](t, h, &messages.GetPlugins{}).Plugins) != 3 {
		t.Fatal("list")
	}
	rt := h.waitRunning("stubborn.p2p")
	if rt.sess.Load() == first {
		t.Fatal("the first handler's session is back")
	}
	// The stop of a plugin with a database, then a reload at once: the
	// new handler finds the data the old one wrote.
	handle(t, h.waitRunning("echo.p2p"), "/before")
	ask[*messages.ControlPluginReply](t, h, &messages.ControlPlugin{Domain: "echo.p2p", Op: "stop"})
	ask[*messages.ControlPluginReply](t, h, &messages.ControlPlugin{Domain: "echo.p2p", Op: "start"})
	rt = h.waitRunning("echo.p2p")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := rt.Handle(ctx, &HandleRequest{Method: "GET", Path: "/after"})
	if err != nil || resp.Status != 200 {
		t.Fatalf("after restart: %v %v", resp, err)
	}
}

// A log call with a 1 MiB component and message reaches the channel and
// the plugin-log hint cut, not whole.
func TestPluginLogCallIsCut(t *testing.T) {
	testutil.NoLeaks(t)
	dir := t.TempDir()
	writePlugin(t, dir, "big", "big.p2p", "biglog", nil)
	hints := make(chan *messages.Hint, 16)
	h := newHarness(t, dir, func(d *Deps) {
		d.Events = func(m *messages.Hint) {
			if m.Data["level"] != "warn" {
				return
			}
			select {
			case hints <- m:
			default:
			}
		}
	})
	h.waitRunning("big.p2p")
	var warn map[string]any
	testutil.Eventually(t, 10*time.Second, func() error {
		for {
			select {
			case m := <-hints:
				if d := m.Data; d["level"] == "warn" {
					warn = d
					return nil
				}
			default:
				return errors.New("no warn hint yet")
			}
		}
	})
	if c, m := warn["component"].(string), warn["message"].(string); len(c) > 100 || len(m) > 300 {
		t.Fatalf("hint: component of %d bytes, message of %d", len(c), len(m))
	}
	testutil.Eventually(t, 5*time.Second, func() error {
		if !strings.Contains(h.log.String(), "level=WARN") {
			return errors.New("the warn line is not in the channel yet")
		}
		return nil
	})
	if n := len(h.log.String()); n > 64<<10 {
		t.Fatalf("the channel holds %d bytes after one log call", n)
	}
}

// A log call's long component is cut at a character, not in the middle
// of one.
func TestPluginLogComponentIsCutAtACharacter(t *testing.T) {
	testutil.NoLeaks(t)
	dir := t.TempDir()
	writePlugin(t, dir, "rune", "rune.p2p", "runelog", nil)
	hints := make(chan *messages.Hint, 16)
	h := newHarness(t, dir, func(d *Deps) {
		d.Events = func(m *messages.Hint) {
			if m.Data["level"] != "warn" {
				return
			}
			select {
			case hints <- m:
			default:
			}
		}
	})
	h.waitRunning("rune.p2p")
	var got any
	testutil.Eventually(t, 10*time.Second, func() error {
		select {
		case m := <-hints:
			got = m.Data["component"]
			return nil
		default:
			return errors.New("no warn hint yet")
		}
	})
	if want := strings.Repeat("c", 63) + "…"; got != want {
		t.Fatalf("component = %q, want %q", got, want)
	}
}

// A handler logging in a loop puts at most channelLogRate lines a
// second in the plugins channel.
func TestPluginLogFloodIsLimited(t *testing.T) {
	testutil.NoLeaks(t)
	dir := t.TempDir()
	writePlugin(t, dir, "loud", "loud.p2p", "logflood", nil)
	h := newHarness(t, dir, nil)
	began := time.Now()
	// init is answered after its 5000 log calls, which the node reads
	// (and logs) before the answer.
	h.waitRunning("loud.p2p")
	secs := int(time.Since(began)/time.Second) + 2
	n := strings.Count(h.log.String(), "flood line")
	if n < channelLogRate/2 || n > secs*channelLogRate {
		t.Fatalf("%d of 5000 flood lines in the channel within %d s, want %d..%d", n, secs, channelLogRate/2, secs*channelLogRate)
	}
}

// A manifest is one JSON object: a second object, or anything else
// after the first, is refused with the reason rather than ignored; one
// too large or nested too deep is refused too.
func TestManifestIsOneObject(t *testing.T) {
	dir := t.TempDir()
	p := writePlugin(t, dir, "two", "two.p2p", "ok", nil)
	good, err := os.ReadFile(filepath.Join(p, ManifestName))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := LoadFolder(p); err != nil {
		t.Fatalf("the manifest alone: %v", err)
	}
	if err := os.WriteFile(filepath.Join(p, ManifestName), append(good, "\n\t \n"...), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadFolder(p); err != nil {
		t.Fatalf("the manifest and white space: %v", err)
	}
	for name, tail := range map[string]string{
		"second object": `{"domain":"evil.p2p"}`,
		"garbage":       `garbage`,
		"deep":          strings.Repeat("[", 20000),
	} {
		body := append(append([]byte(nil), good...), tail...)
		if name == "deep" {
			body = []byte(tail)
		}
		if err := os.WriteFile(filepath.Join(p, ManifestName), body, 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := LoadFolder(p); err == nil {
			t.Errorf("%s after the manifest: loaded", name)
		}
	}
	if err := os.WriteFile(filepath.Join(p, ManifestName), []byte(`{"description":"`+strings.Repeat("x", maxManifest)+`"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadFolder(p); err == nil || !strings.Contains(err.Error(), "1 MiB") {
		t.Errorf("a manifest over 1 MiB: %v", err)
	}
}

// Many calls to a plugin that does not answer hold neither another
// plugin, nor the supervisor, nor the stop of that plugin, which fails
// them all at once.
func TestSlowPluginHoldsNobodyElse(t *testing.T) {
	testutil.NoLeaks(t)
	dir := t.TempDir()
	writePlugin(t, dir, "slow", "slow.p2p", "ok", nil)
	writePlugin(t, dir, "echo", "echo.p2p", "ok", nil)
	h := newHarness(t, dir, nil)
	slow := h.waitRunning("slow.p2p")
	echo := h.waitRunning("echo.p2p")

	const n = 200
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	errs := make(chan error, n)
	for range n {
		go func() {
			_, err := slow.Action(ctx, "slow", json.RawMessage(`{"pad":"`+strings.Repeat("p", 4<<10)+`"}`))
			errs <- err
		}()
	}
	testutil.Eventually(t, 10*time.Second, func() error {
		if got := slow.Calls.Load(); got < n {
			return errors.New("calls not made yet")
		}
		return nil
	})
	began := time.Now()
	handle(t, echo, "/meanwhile")
	ask[*messages.GetPluginsReply](t, h, &messages.GetPlugins{})
	if d := time.Since(began); d > 2*time.Second {
		t.Fatalf("another plugin and the list took %s while %d calls waited", d, n)
	}
	if r := ask[*messages.ControlPluginReply](t, h, &messages.ControlPlugin{Domain: "slow.p2p", Op: "stop"}); r.Err != nil {
		t.Fatal(r.Err)
	}
	for range n {
		select {
		case err := <-errs:
			if !errors.Is(err, ErrSessionClosed) {
				t.Fatalf("a call to the stopped plugin: %v", err)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("calls to a stopped plugin still wait after 10 s")
		}
	}
}

// A stderr line over 64 KiB is cut, and the lines after it still reach
// the channel.
func TestPluginLongStderrLine(t *testing.T) {
	testutil.NoLeaks(t)
	dir := t.TempDir()
	writeShellPlugin(t, dir, "long", "long.p2p", `head -c 200000 /dev/zero | tr '\0' x >&2
echo >&2
echo "after the long line" >&2
read line
printf '{"jsonrpc":"2.0","id":1,"result":{}}\n'
exec sleep 600
`)
	h := newHarness(t, dir, nil)
	h.waitRunning("long.p2p")
	testutil.Eventually(t, 10*time.Second, func() error {
		if !strings.Contains(h.log.String(), "after the long line") {
			return errors.New("the line after the long one is not in the channel")
		}
		return nil
	})
	if s := h.log.String(); !strings.Contains(s, strings.Repeat("x", 1000)) || strings.Contains(s, strings.Repeat("x", 65<<10)) {
		t.Fatalf("the long line is not there, cut to 64 KiB (%d bytes logged)", len(s))
	}
}

// An error answer with a 1 MiB message fails the call with the message
// cut.
func TestPluginHugeErrorMessage(t *testing.T) {
	testutil.NoLeaks(t)
	dir := t.TempDir()
	writeShellPlugin(t, dir, "err", "err.p2p", `read line
printf '{"jsonrpc":"2.0","id":1,"result":{}}\n'
msg=$(head -c 1000000 /dev/zero | tr '\0' e)
read line
printf '{"jsonrpc":"2.0","id":2,"error":{"code":1,"message":"%s"}}\n' "$msg"
exec sleep 600
`)
	h := newHarness(t, dir, nil)
	rt := h.waitRunning("err.p2p")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := rt.Handle(ctx, &HandleRequest{Method: "GET", Path: "/"})
	var re *rpcError
	if !errors.As(err, &re) {
		t.Fatalf("handle: %v, want the plugin's error", err)
	}
	if n := len(err.Error()); n > 1024 {
		t.Fatalf("the error is %d bytes", n)
	}
}

// Two folders claiming one domain (in any case, with a trailing dot):
// the first by folder name runs, the other is listed stopped with the
// reason; a folder claiming the built-in plugin's domain is stopped; once
// the first folder is gone a rescan runs the other, with its own data.
func TestPluginDomainCollisions(t *testing.T) {
	testutil.NoLeaks(t)
	dir := t.TempDir()
	writePlugin(t, dir, "a", "dup.p2p", "ok", nil)
	writePlugin(t, dir, "b", "DUP.p2p.", "ok", nil)
	writePlugin(t, dir, "c", "Profile.P2P", "ok", nil)
	h := newHarness(t, dir, nil)
	rt := h.waitRunning("dup.p2p")
	handle(t, rt, "/from-a")
	byName := map[string]messages.Plugin{}
	for _, p := range ask[*messages.GetPluginsReply](t, h, &messages.GetPlugins{}).Plugins {
		byName[p.Name] = p
	}
	if p := byName["b"]; p.Status != messages.PluginStopped || !strings.Contains(p.Error, "folder a") {
		t.Fatalf("b: %+v", p)
	}
	if p := byName["c"]; p.Status != messages.PluginStopped || !strings.Contains(p.Error, "built-in") {
		t.Fatalf("c: %+v", p)
	}
	if p := byName["profile"]; p.Status != messages.PluginStatic {
		t.Fatalf("profile: %+v", p)
	}
	if err := os.RemoveAll(filepath.Join(dir, "a")); err != nil {
		t.Fatal(err)
	}
	ask[*messages.GetPluginsReply](t, h, &messages.RescanPlugins{})
	testutil.Eventually(t, 10*time.Second, func() error {
		if p := h.plugin("dup.p2p"); p.Name != "b" || p.Status != messages.PluginLoaded {
			return fmt.Errorf("dup.p2p is %s (%s)", p.Name, p.Status)
		}
		return nil
	})
	out := handle(t, h.waitRunning("dup.p2p"), "/from-b")
	if fmt.Sprint(out["stored"]) != "map[value:/from-b]" {
		t.Fatalf("b: %v", out)
	}
}

// Settings saved in a row reach the handler, the last one last.
func TestPluginSettingsInARow(t *testing.T) {
	testutil.NoLeaks(t)
	dir := t.TempDir()
	writePlugin(t, dir, "s", "s.p2p", "ok", nil)
	h := newHarness(t, dir, nil)
	rt := h.waitRunning("s.p2p")
	for i := range 30 {
		r := ask[*messages.SetPluginSettingsReply](t, h, &messages.SetPluginSettings{Domain: "s.p2p",
			Values: map[string]json.RawMessage{"greeting": json.RawMessage(fmt.Sprintf(`"v%d"`, i))}})
		if r.Err != nil || len(r.Errors) > 0 {
			t.Fatalf("settings: %+v", r)
		}
	}
	testutil.Eventually(t, 5*time.Second, func() error {
		res, err := rt.Action(context.Background(), "settings", nil)
		if err != nil || !strings.Contains(string(res), `"v29"`) {
			return fmt.Errorf("handler has settings %s (%v)", res, err)
		}
		return nil
	})
}
