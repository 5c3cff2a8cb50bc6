package plugin

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"peerdns/internal/testutil"
)

// nodeHelperEnv makes this test binary, run as a helper, a node that
// runs the plugins of the folder it names until it is killed.
const nodeHelperEnv = "PEERDNS_PLUGIN_TEST_NODE"

// A node that dies without stopping its plugins (SIGKILL, the OOM
// killer, a crash) takes their handlers with it: a handler that does not
// read its input, so never sees the end of it, must not run on with no
// node (and beside the handler of the node started again).
func TestPluginHandlerEndsWithNode(t *testing.T) {
	if dir := os.Getenv(nodeHelperEnv); dir != "" {
		h := newHarness(t, dir, nil)
		h.waitRunning("deaf.p2p")
		if err := os.WriteFile(filepath.Join(dir, "node.up"), nil, 0o644); err != nil {
			t.Fatal(err)
		}
		select {} // until the test kills this node
	}
	dir := t.TempDir()
	p := writeShellPlugin(t, dir, "deaf", "deaf.p2p", hostPid+initThenDeaf)
	node := exec.Command(os.Args[0], "-test.run=^TestPluginHandlerEndsWithNode$")
	// The helper's temporary folders, left by its kill, go with this
	// test's.
	node.Env = append(os.Environ(), nodeHelperEnv+"="+dir, "TMPDIR="+t.TempDir())
	if err := node.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = node.Process.Kill(); _ = node.Wait() })
	pid := handlerPid(t, p)
	t.Cleanup(func() {
		if running(pid) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	})
	testutil.Eventually(t, 10*time.Second, func() error {
		_, err := os.Stat(filepath.Join(dir, "node.up"))
		return err
	})

	if err := node.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = node.Wait()
	testutil.Eventually(t, 5*time.Second, func() error {
		if running(pid) {
			return errors.New("the handler still runs after its node was killed")
		}
		return nil
	})
}
