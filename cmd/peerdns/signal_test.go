package main

import (
	"bufio"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"
)

// A node whose clean stop is held up (here by a client that sent half a
// request) stops at once on a second SIGTERM, as an operator pressing
// Ctrl-C again expects, instead of ignoring it until the stop is done.
func TestSecondSignalStopsAtOnce(t *testing.T) {
	cmd := exec.Command(os.Args[0], "node", "--data", t.TempDir(), "--admin-addr", "127.0.0.1:0",
		"--dns-addr", "127.0.0.1:0", "--http-addr", "127.0.0.1:0", "--https-addr", "127.0.0.1:0",
		"--p2p-addr", "127.0.0.1:0", "--upstream", "127.0.0.1:1")
	cmd.Env = append(os.Environ(), "PEERDNS_TEST_AS_MAIN=1")
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill() })
	listening, stopping := make(chan string, 1), make(chan struct{})
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			if a, ok := strings.CutPrefix(sc.Text(), "admin listening on "); ok {
				listening <- a
			}
			if strings.Contains(sc.Text(), `msg="shutting down"`) {
				close(stopping)
			}
		}
	}()
	var addr string
	select {
	case addr = <-listening:
	case <-time.After(30 * time.Second):
		t.Fatal("the node did not announce its admin address")
	}
	// One answered request first, so the connection is being served,
	// then half of the next one.
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fmt.Fprintf(c, "GET /api/health HTTP/1.1\r\nHost: %s\r\n\r\n", addr)
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	fmt.Fprintf(c, "POST /api/add-domain HTTP/1.1\r\nHost: %s\r\nContent-Length: 1000\r\n\r\n{", addr)

	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-stopping:
	case <-time.After(10 * time.Second):
		t.Fatal("the node did not begin to stop on SIGTERM")
	}
	select {
	case err := <-done:
		t.Skipf("the node stopped before a second signal could be sent (%v): nothing held its stop", err)
	default:
	}
	second := time.Now()
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-done:
		ws, _ := cmd.ProcessState.Sys().(syscall.WaitStatus)
		if !ws.Signaled() || ws.Signal() != syscall.SIGTERM {
			t.Errorf("after a second SIGTERM the node ended with %v after %v; want it killed by that signal", cmd.ProcessState, time.Since(second).Round(time.Millisecond))
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the node still runs 20 s after a second SIGTERM")
	}
}
