//go:build linux

package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"peerdns/bench/procstat"
)

// node is one `peerdns node` process in its namespace, started again on
// the same data folder after a kill.
type node struct {
	i      int
	lab    *lab
	bin    string
	dir    string
	http   *http.Client
	mu     sync.Mutex // guards cmd, paused
	cmd    *exec.Cmd
	exited chan struct{}
	paused bool
	// clockOffset, when set, starts the process with its ledger clock
	// shifted (PEERDNS_TEST_CLOCK_OFFSET).
	clockOffset time.Duration
	// ctx ends the wait for readiness early (Ctrl-C); nil: never.
	ctx context.Context
}

// startTimeout bounds a node's start until readiness. A restart loads
// and verifies every op of the ledger again (about a second for 10,000
// ops on an idle core); on this shared 2-core machine at load 100 that
// took 30 s, and the readiness after it longer.
const startTimeout = 120 * time.Second

const (
	adminAddr = "127.0.0.1:7710"
	dnsAddr   = "127.0.0.1:7753"
)

func (n *node) base() string { return "http://" + adminAddr }

// start starts the process (join: an invite, for the first start of a
// joining node) and waits until it answers readiness.
func (n *node) start(join string) error {
	args := []string{"netns", "exec", n.lab.ns(n.i), n.bin, "node",
		"--data", filepath.Join(n.dir, "data"), "--admin-addr", adminAddr, "--dns-addr", "127.0.0.1:7753",
		"--http-addr", "127.0.0.1:7780", "--https-addr", "127.0.0.1:7743",
		"--p2p-addr", n.lab.ip(n.i) + ":7740", "--upstream", "127.0.0.1:1"}
	if join != "" {
		args = append(args, "--join", join)
	}
	logf, err := os.OpenFile(filepath.Join(n.dir, "stderr.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	cmd := exec.Command("ip", args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.Env = os.Environ()
	if n.clockOffset != 0 {
		cmd.Env = append(cmd.Env, "PEERDNS_TEST_CLOCK_OFFSET="+n.clockOffset.String())
	}
	if err := cmd.Start(); err != nil {
		logf.Close()
		return err
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); logf.Close(); close(exited) }()
	n.mu.Lock()
	n.cmd, n.exited, n.paused = cmd, exited, false
	n.mu.Unlock()
	deadline := time.Now().Add(startTimeout)
	for {
		code, body, err := n.call("GET", "/api/health?probe=readiness", "")
		if err == nil && code == 200 {
			return nil
		}
		var done <-chan struct{}
		if n.ctx != nil {
			done = n.ctx.Done()
		}
		select {
		case <-exited:
			return fmt.Errorf("node %d exited while starting; its log ends: %s", n.i, n.logTail(5))
		case <-done:
			return fmt.Errorf("node %d: %w while starting", n.i, n.ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("node %d not ready after %v: %d %s %v; the lab: %s; its log ends: %s", n.i, startTimeout, code, body, err, n.lab.diagnose(n.i), n.logTail(5))
		}
	}
}

// kill sends SIGKILL and waits for the exit.
func (n *node) kill() { n.end(syscall.SIGKILL, 0) }

// quitDump has the process write every goroutine's stack to its
// stderr.log (SIGQUIT; the process then exits) and waits for it to end.
func (n *node) quitDump() { n.end(syscall.SIGQUIT, 10*time.Second) }

// end sends sig (after SIGCONT, so a paused process gets it too) and
// waits for the exit; past grace (0: no limit) it kills the process.
func (n *node) end(sig syscall.Signal, grace time.Duration) {
	n.mu.Lock()
	cmd, exited := n.cmd, n.exited
	n.mu.Unlock()
	if cmd == nil {
		return
	}
	_ = cmd.Process.Signal(syscall.SIGCONT)
	_ = cmd.Process.Signal(sig)
	if grace <= 0 {
		<-exited
		return
	}
	select {
	case <-exited:
	case <-time.After(grace):
		n.end(syscall.SIGKILL, 0)
	}
}

func (n *node) signal(s syscall.Signal) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.cmd != nil {
		_ = n.cmd.Process.Signal(s)
		n.paused = s == syscall.SIGSTOP
	}
}

func (n *node) pid() int {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.cmd == nil {
		return 0
	}
	return n.cmd.Process.Pid
}

func (n *node) call(method, path, body string) (int, string, error) {
	return n.callWith(n.http, method, path, body)
}

// viewTimeout bounds one read of a node's full listing: thousands of
// domains with their consensus state (1-2 MB of JSON) on a loaded
// machine take longer than the workload's 5 s.
const viewTimeout = 20 * time.Second

func (n *node) callWith(cl *http.Client, method, path, body string) (int, string, error) {
	var r io.Reader
	if body != "" {
		r = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, n.base()+path, r)
	if err != nil {
		return 0, "", err
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := cl.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), err
}

func (n *node) invite() (string, error) {
	code, body, err := n.call("POST", "/api/invites", "")
	if err != nil {
		return "", err
	}
	var r struct{ Invite string }
	if code != 200 || json.Unmarshal([]byte(body), &r) != nil || r.Invite == "" {
		return "", fmt.Errorf("invite: %d %s", code, body)
	}
	return r.Invite, nil
}

// listing is the node's /api/resolved-domains, read with cl.
func (n *node) listing(cl *http.Client) ([]listed, error) {
	code, body, err := n.callWith(cl, "GET", "/api/resolved-domains", "")
	if err != nil {
		return nil, err
	}
	if code != 200 {
		return nil, fmt.Errorf("resolved-domains: %d", code)
	}
	var list []listed
	if err := json.Unmarshal([]byte(body), &list); err != nil {
		return nil, err
	}
	return list, nil
}

// listed is one domain of the listing, the fields the checker reads.
type listed struct {
	Domain          string `json:"domain"`
	Hash            string `json:"hash"`
	ConsensusStatus string `json:"consensusStatus"`
}

// decided is whether consensus picked a hash (a conflict has one too).
func (d listed) decided() bool {
	return d.ConsensusStatus == "resolved" || d.ConsensusStatus == "conflict"
}

// view is the node's resolved workload domains: domain → hash.
func (n *node) view() (map[string]string, error) {
	list, err := n.listing(&http.Client{Transport: n.http.Transport, Timeout: viewTimeout})
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	for _, d := range list {
		if strings.HasPrefix(d.Domain, "w") && d.decided() {
			out[d.Domain] = d.Hash
		}
	}
	return out, nil
}

// resolved is the set of domains the node resolves (any name).
func (n *node) resolved() (map[string]bool, error) {
	list, err := n.listing(n.http)
	if err != nil {
		return nil, err
	}
	out := map[string]bool{}
	for _, d := range list {
		if d.decided() {
			out[d.Domain] = true
		}
	}
	return out, nil
}

// rssKB is the process's resident memory (VmRSS), 0 when unknown.
func (n *node) rssKB() int { return procstat.RSSKB(n.pid()) }

// logTail is the last k lines of the node's stderr.
func (n *node) logTail(k int) string {
	b, _ := os.ReadFile(filepath.Join(n.dir, "stderr.log"))
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) > k {
		lines = lines[len(lines)-k:]
	}
	return strings.Join(lines, " | ")
}

// panics returns the lines of the node's stderr that report a panic or
// a fatal runtime error.
func (n *node) panics() []string {
	b, _ := os.ReadFile(filepath.Join(n.dir, "stderr.log"))
	var out []string
	for _, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(l, "panic:") || strings.HasPrefix(l, "fatal error:") {
			out = append(out, l)
		}
	}
	return out
}

// fill writes a filler file into the node's data folder (a tmpfs) until
// it is full and returns its size.
func (n *node) fill() (int64, error) {
	f, err := os.OpenFile(filepath.Join(n.dir, "data", "chaos-filler"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	buf := make([]byte, 64<<10)
	for _, size := range []int{len(buf), 1} {
		for {
			if _, err := f.Write(buf[:size]); err != nil {
				if !errors.Is(err, syscall.ENOSPC) {
					return 0, err
				}
				break
			}
		}
	}
	st, err := f.Stat()
	if err != nil {
		return 0, err
	}
	return st.Size(), nil
}

func (n *node) free() { _ = os.Remove(filepath.Join(n.dir, "data", "chaos-filler")) }
