//go:build linux

package plugin

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"peerdns/internal/testutil"
	"peerdns/messages"
	"peerdns/transport"
	"peerdns/transport/identity"
)

// reviewNodeEnv makes this test binary, run as a helper, a node that
// runs the plugins of the folder it names until it is killed.
const reviewNodeEnv = "PEERDNS_REVIEW_NODE"

// A node that dies without stopping its plugins (SIGKILL, the OOM
// killer, a crash) takes their handlers with it: a handler that does not
// read its input, so never sees the end of it, must not run on with no
// node (and beside the handler of the node started again).
func TestPluginHandlerEndsWithNode(t *testing.T) {
	if dir := os.Getenv(reviewNodeEnv); dir != "" {
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
	node.Env = append(os.Environ(), reviewNodeEnv+"="+dir, "TMPDIR="+t.TempDir())
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

// A peer that opens plugin streams naming domains no plugin here has
// (each up to a frame's megabyte) adds no counters: the node would hold
// every name it was sent, for good, and list them all in the stats'
// peerChannels.
func TestPeerCallsToUnknownDomainsAddNoCounters(t *testing.T) {
	testutil.NoLeaks(t)
	network := transport.NewMemNetwork()
	a, _ := identity.Generate()
	b, _ := identity.Generate()
	node, hostile := network.Listen(a, nil), network.Listen(b, nil)
	t.Cleanup(func() { _ = node.Close(); _ = hostile.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	out, err := hostile.Dial(ctx, node.Addr().String(), node.ID())
	if err != nil {
		t.Fatal(err)
	}
	in, err := node.Accept(ctx)
	if err != nil {
		t.Fatal(err)
	}
	p := NewPeerCalls(connMesh{in}, &Table{}, 5*time.Second)
	for i := range 50 {
		s, err := out.OpenStream(ctx)
		if err != nil {
			t.Fatal(err)
		}
		ns, err := in.AcceptStream(ctx)
		if err != nil {
			t.Fatal(err)
		}
		served := make(chan struct{})
		go func() { defer close(served); p.serve(in, ns) }()
		domain := fmt.Sprintf("%d.%s.p2p", i, strings.Repeat("x", 60<<10))
		if err := messages.WriteFrame(s, &messages.PluginCall{Domain: domain, Method: "ping", Wait: true}, MaxPeerFrame); err != nil {
			t.Fatal(err)
		}
		_ = s.CloseWrite()
		var rep messages.PluginCallReply
		if err := messages.ReadFrame(s, &rep, MaxPeerFrame); err != nil || rep.Err == "" {
			t.Fatalf("call to a plugin not here: %+v %v", rep, err)
		}
		_ = s.Close()
		<-served
	}
	if st := p.Stats(); len(st) != 0 {
		t.Fatalf("%d counters for domains no plugin here has", len(st))
	}
}
