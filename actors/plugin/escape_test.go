package plugin

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"peerdns/internal/testutil"
	"peerdns/messages"
)

// A handler that starts a child in a session of its own, out of reach of
// the kill of its process group, which keeps the handler's stdout and
// stderr open: stopping the plugin still ends within the kill's grace
// periods, and the handler is reaped.
func TestPluginStopWithEscapedChild(t *testing.T) {
	testutil.NoLeaks(t)
	dir := t.TempDir()
	p := writePlugin(t, dir, "esc", "esc.p2p", "ok", nil)
	script := fmt.Sprintf("#!/bin/sh\nsetsid sleep 300 &\necho $! > escaped.pid\nPEERDNS_FAKE_PLUGIN=ok exec '%s' -test.run=^$\n", os.Args[0])
	if err := os.WriteFile(filepath.Join(p, "run.sh"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	h := newHarness(t, dir, nil)
	// Registered after the harness, so it runs before the harness stops:
	// the escaped child must not outlive the test whatever happens.
	t.Cleanup(func() {
		if b, err := os.ReadFile(filepath.Join(p, "escaped.pid")); err == nil {
			if pid, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil {
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
		}
	})
	h.waitRunning("esc.p2p")
	began := time.Now()
	r := ask[*messages.ControlPluginReply](t, h, &messages.ControlPlugin{Domain: "esc.p2p", Op: "stop"})
	if r.Err != nil {
		t.Fatalf("stop: %v", r.Err)
	}
	if p := h.plugin("esc.p2p"); p.Status != messages.PluginStopped {
		t.Fatalf("status %s after stop", p.Status)
	}
	if d := time.Since(began); d > 8*time.Second {
		t.Fatalf("stop took %v", d)
	}
	// The handler itself is gone, not a zombie: the escaped child is the
	// only process left of the plugin.
	b, err := os.ReadFile(filepath.Join(p, "escaped.pid"))
	if err != nil {
		t.Fatal(err)
	}
	pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	if syscall.Kill(pid, 0) != nil {
		t.Fatalf("escaped child %d already gone: the test proves nothing", pid)
	}
}

// The same handler exiting by itself while its escaped child keeps the
// pipes open: the call in flight fails at once, and the handler is
// reaped and started again.
func TestPluginExitWithEscapedChild(t *testing.T) {
	testutil.NoLeaks(t)
	dir := t.TempDir()
	p := writePlugin(t, dir, "esc", "esc.p2p", "ok", nil)
	script := fmt.Sprintf("#!/bin/sh\nsetsid sleep 300 &\necho $! >> escaped.pid\nPEERDNS_FAKE_PLUGIN=ok exec '%s' -test.run=^$\n", os.Args[0])
	if err := os.WriteFile(filepath.Join(p, "run.sh"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	h := newHarness(t, dir, nil)
	t.Cleanup(func() {
		b, _ := os.ReadFile(filepath.Join(p, "escaped.pid"))
		for _, f := range strings.Fields(string(b)) {
			if pid, err := strconv.Atoi(f); err == nil {
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
		}
	})
	rt := h.waitRunning("esc.p2p")
	first := rt.sess.Load()
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Second)
	defer cancel()
	if _, err := rt.Action(ctx, "exit", nil); !errors.Is(err, ErrSessionClosed) {
		t.Fatalf("exit action: %v", err)
	}
	testutil.Eventually(t, 10*time.Second, func() error {
		if s := h.waitRunning("esc.p2p").sess.Load(); s == first {
			return errors.New("still the first session")
		}
		return nil
	})
	handle(t, h.waitRunning("esc.p2p"), "/back")
}
