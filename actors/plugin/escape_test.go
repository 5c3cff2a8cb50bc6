package plugin

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"peerdns/internal/testutil"
	"peerdns/messages"
)

// escapingScript is a handler that first starts a child in a session of
// its own (out of reach of a kill of its process group, holding the
// handler's stdout and stderr open), which appends its pid as the host
// sees it (read from /proc/self/stat by the shell itself: /proc is the
// host's) to escaped.pid, and then runs the fake plugin.
func escapingScript() string {
	return fmt.Sprintf("#!/bin/sh\nsetsid sh -c 'read pid rest < /proc/self/stat; echo $pid >> escaped.pid; exec sleep 300' &\nPEERDNS_FAKE_PLUGIN=ok exec '%s' -test.run=^$\n", os.Args[0])
}

// escapedPids reads the pids the escaped children wrote, waiting for
// want of them.
func escapedPids(t *testing.T, dir string, want int) []int {
	t.Helper()
	var pids []int
	testutil.Eventually(t, 10*time.Second, func() error {
		pids = pids[:0]
		b, _ := os.ReadFile(filepath.Join(dir, "escaped.pid"))
		for _, f := range strings.Fields(string(b)) {
			if pid, err := strconv.Atoi(f); err == nil {
				pids = append(pids, pid)
			}
		}
		if len(pids) < want {
			return fmt.Errorf("%d escaped children wrote their pid, want %d", len(pids), want)
		}
		return nil
	})
	return pids
}

// needContainment skips a test of contained handlers where the host
// refuses the namespaces, naming what is missing.
func needContainment(t *testing.T) {
	t.Helper()
	attr, contained := handlerAttr()
	if !contained {
		t.Skip("handlers are not contained on this system: PID namespaces are Linux's")
	}
	cmd := exec.Command("true")
	cmd.SysProcAttr = attr
	if err := cmd.Run(); err != nil {
		t.Skipf("the host refuses a PID namespace (with a user namespace when not root): %v; run as root, or allow unprivileged user namespaces (sysctl kernel.unprivileged_userns_clone=1, or a container without a seccomp profile that blocks them)", err)
	}
}

// killOnCleanup kills what the escaped children left, whatever the test
// found: none must outlive it.
func killOnCleanup(t *testing.T, dir string) {
	t.Cleanup(func() {
		b, _ := os.ReadFile(filepath.Join(dir, "escaped.pid"))
		for _, f := range strings.Fields(string(b)) {
			if pid, err := strconv.Atoi(f); err == nil && isSleeper(pid) {
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
		}
	})
}

// isSleeper reports whether pid is still an escaped child (a sleep), so
// that a cleanup never signals a process that took its pid since.
func isSleeper(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	return err == nil && strings.HasPrefix(string(b), "sleep\x00300")
}

// gone waits until none of pids is an escaped child still running.
func gone(t *testing.T, pids []int, what string) {
	t.Helper()
	testutil.Eventually(t, 10*time.Second, func() error {
		for _, pid := range pids {
			if isSleeper(pid) {
				return fmt.Errorf("escaped child %d still runs %s", pid, what)
			}
		}
		return nil
	})
}

// A handler that starts a child in a session of its own: stopping the
// plugin ends within the kill's grace periods, the handler is reaped,
// and the child ends with it (the handler's PID namespace goes).
func TestPluginStopWithEscapedChild(t *testing.T) {
	testutil.NoLeaks(t)
	needContainment(t)
	dir := t.TempDir()
	p := writePlugin(t, dir, "esc", "esc.p2p", "ok", nil)
	if err := os.WriteFile(filepath.Join(p, "run.sh"), []byte(escapingScript()), 0o755); err != nil {
		t.Fatal(err)
	}
	h := newHarness(t, dir, nil)
	// Registered after the harness, so it runs before the harness stops.
	killOnCleanup(t, p)
	h.waitRunning("esc.p2p")
	pids := escapedPids(t, p, 1)
	if !isSleeper(pids[0]) {
		t.Fatalf("escaped child %d is not running before the stop: the test proves nothing", pids[0])
	}
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
	gone(t, pids, "after its plugin stopped")
}

// The same handler exiting by itself: the call in flight fails at once,
// the handler's escaped child ends with it, and the handler is reaped
// and started again.
func TestPluginExitWithEscapedChild(t *testing.T) {
	testutil.NoLeaks(t)
	needContainment(t)
	dir := t.TempDir()
	p := writePlugin(t, dir, "esc", "esc.p2p", "ok", nil)
	if err := os.WriteFile(filepath.Join(p, "run.sh"), []byte(escapingScript()), 0o755); err != nil {
		t.Fatal(err)
	}
	h := newHarness(t, dir, nil)
	killOnCleanup(t, p)
	rt := h.waitRunning("esc.p2p")
	first := rt.sess.Load()
	pids := escapedPids(t, p, 1)
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
	gone(t, pids[:1], "after its handler exited")
	handle(t, h.waitRunning("esc.p2p"), "/back")
}
