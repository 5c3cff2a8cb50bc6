package main

import (
	"bufio"
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// A second agent started on the data folder of a running one (on other
// ports, or failing on the same ones later) refuses to start before it
// writes there: it would share the running agent's stores and write
// "agent started" and "agent stopped" into its audit log.
func TestSecondAgentOnSameData(t *testing.T) {
	dir := t.TempDir()
	env := append(os.Environ(), "PEERDNS_TEST_AS_MAIN=1", "AGENT_REST_PORT=0", "AGENT_PEER_ADDR=127.0.0.1:0")
	first := exec.Command(os.Args[0], "agent", "--data", dir)
	first.Env = env
	stderr, err := first.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := first.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = first.Process.Kill(); _ = first.Wait() })
	up := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			if strings.Contains(sc.Text(), "agent listening on") {
				close(up)
				break
			}
		}
		for sc.Scan() {
		}
	}()
	select {
	case <-up:
	case <-time.After(30 * time.Second):
		t.Fatal("the first agent did not start")
	}
	audit := filepath.Join(dir, "agent", "audit.log")
	before, err := os.ReadFile(audit)
	if err != nil {
		t.Fatal(err)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	second := exec.CommandContext(ctx, os.Args[0], "agent", "--data", dir)
	second.Env = env
	var errOut bytes.Buffer
	second.Stderr = &errOut
	err = second.Run()
	if ctx.Err() != nil {
		t.Fatalf("a second agent on the same data folder was still running after 20 s; stderr:\n%s", errOut.String())
	}
	if code := second.ProcessState.ExitCode(); code != 1 || !strings.Contains(errOut.String(), "in use by another running peerdns agent") {
		t.Errorf("second agent: exit %d (%v), stderr %q; want exit 1 and the folder in use", code, err, errOut.String())
	}
	if after, _ := os.ReadFile(audit); !bytes.Equal(after[:min(len(after), len(before))], before) || bytes.Count(after, []byte("agent started")) != 1 {
		t.Errorf("the running agent's audit log changed:\n%s", after)
	}
}
