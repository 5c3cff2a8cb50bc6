package plugin

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"peerdns/internal/testutil"
	"peerdns/messages"
)

// hostPid is the beginning of a handler script that writes its pid as
// the host sees it to handler.pid (the shell reads /proc/self/stat
// itself: /proc is the host's).
const hostPid = "read pid rest < /proc/self/stat; echo $pid > handler.pid\n"

// handlerPid waits for the pid a hostPid script wrote in dir.
func handlerPid(t *testing.T, dir string) int {
	t.Helper()
	var pid int
	testutil.Eventually(t, 10*time.Second, func() error {
		b, _ := os.ReadFile(filepath.Join(dir, "handler.pid"))
		var err error
		pid, err = strconv.Atoi(strings.TrimSpace(string(b)))
		return err
	})
	return pid
}

// running reports whether pid is a live process (not gone, not a zombie).
func running(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	_, rest, _ := strings.Cut(string(b), ") ")
	return !strings.HasPrefix(rest, "Z") && !strings.HasPrefix(rest, "X")
}

// A contained handler that neither traps nor ignores SIGTERM is its
// namespace's first process, which the kernel does not let SIGTERM
// kill: with no children it is killed at once, as SIGTERM kills any
// other process, instead of after the grace period; with a child, the
// child (which got the SIGTERM) has the grace to act on it.
func TestPluginStopHandlerWithoutTrap(t *testing.T) {
	testutil.NoLeaks(t)
	needContainment(t)
	dir := t.TempDir()
	alone := writeShellPlugin(t, dir, "alone", "alone.p2p", hostPid+`read line
printf '{"jsonrpc":"2.0","id":1,"result":{}}\n'
while read line; do :; done
`)
	parent := writeShellPlugin(t, dir, "parent", "parent.p2p", hostPid+`sh -c 'trap "echo done > cleaned; exit 0" TERM; echo > trapped; while :; do sleep 0.05; done' &
read line
printf '{"jsonrpc":"2.0","id":1,"result":{}}\n'
while read line; do :; done
`)
	h := newHarness(t, dir, nil)
	h.waitRunning("alone.p2p")
	h.waitRunning("parent.p2p")

	pid := handlerPid(t, alone)
	began := time.Now()
	if r := ask[*messages.ControlPluginReply](t, h, &messages.ControlPlugin{Domain: "alone.p2p", Op: "stop"}); r.Err != nil {
		t.Fatalf("stop: %v", r.Err)
	}
	testutil.Eventually(t, 10*time.Second, func() error {
		if running(pid) {
			return errors.New("the handler still runs")
		}
		return nil
	})
	// The grace period is 2 s; a kill at once ends it in milliseconds.
	if d := time.Since(began); d >= time.Second {
		t.Fatalf("a handler without a SIGTERM trap took %v to end", d)
	}

	handlerPid(t, parent)
	testutil.Eventually(t, 10*time.Second, func() error {
		_, err := os.Stat(filepath.Join(parent, "trapped"))
		return err // the child has its trap
	})
	if r := ask[*messages.ControlPluginReply](t, h, &messages.ControlPlugin{Domain: "parent.p2p", Op: "stop"}); r.Err != nil {
		t.Fatalf("stop: %v", r.Err)
	}
	testutil.Eventually(t, 10*time.Second, func() error {
		b, _ := os.ReadFile(filepath.Join(parent, "cleaned"))
		if strings.TrimSpace(string(b)) != "done" {
			return errors.New("the handler's child did not act on its SIGTERM")
		}
		return nil
	})
}
