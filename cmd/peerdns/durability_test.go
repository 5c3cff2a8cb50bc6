package main

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"peerdns/internal/testutil"
)

// startProcess runs the test binary as `peerdns node` on dir and returns
// the process and its admin address once it announced it.
func startProcess(t *testing.T, dir string, extra ...string) (*exec.Cmd, string) {
	t.Helper()
	return startProcessWrapped(t, nil, dir, extra...)
}

// stopProcess stops a node process as a user would (SIGTERM: a clean
// stop, which also writes PEERDNS_CPUPROFILE's profile), and kills it
// when it is still there after 10 s. A process that already exited (the
// kill -9 tests) is only reaped.
func stopProcess(cmd *exec.Cmd) {
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	_ = cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		_ = cmd.Process.Kill()
		<-done
	}
}

// startProcessWrapped is startProcess run through wrap (a command and its
// arguments that end by running the rest, such as setpriv), if any.
func startProcessWrapped(t *testing.T, wrap []string, dir string, extra ...string) (*exec.Cmd, string) {
	t.Helper()
	args := append([]string{"node", "--data", dir, "--admin-addr", "127.0.0.1:0",
		"--dns-addr", "127.0.0.1:0", "--http-addr", "127.0.0.1:0", "--https-addr", "127.0.0.1:0",
		"--p2p-addr", "127.0.0.1:0", "--upstream", "127.0.0.1:1"}, extra...)
	argv := append(append(append([]string(nil), wrap...), os.Args[0]), args...)
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = append(os.Environ(), "PEERDNS_TEST_AS_MAIN=1")
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// A failing test shows the last lines each node logged.
	tail := &logTail{}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("--- node %s, last lines logged:\n%s", dir, tail.String())
		}
	})
	t.Cleanup(func() { stopProcess(cmd) })
	re := regexp.MustCompile(`^admin listening on (\S+)`)
	addr := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			tail.add(sc.Text())
			if m := re.FindStringSubmatch(sc.Text()); m != nil {
				addr <- m[1]
			}
		}
	}()
	select {
	case a := <-addr:
		return cmd, a
	case <-time.After(30 * time.Second):
		t.Fatal("node process did not announce its admin address")
	}
	return nil, ""
}

// logTail keeps a process's last lines.
type logTail struct {
	mu    sync.Mutex
	lines []string
}

const logTailLines = 80

func (l *logTail) add(line string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.lines) == logTailLines {
		l.lines = append(l.lines[:0], l.lines[1:]...)
	}
	l.lines = append(l.lines, line)
}

func (l *logTail) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Join(l.lines, "\n")
}

func TestKill9KeepsAcknowledgedWrites(t *testing.T) {
	dir := t.TempDir()
	cmd, addr := startProcess(t, dir)
	base := "http://" + addr
	const n = 20
	for i := 0; i < n; i++ {
		testutil.AddDomain(t, base, fmt.Sprintf("k%d.p2p", i), testutil.Hash('a'))
	}
	// No graceful anything: the process dies right after the last OK.
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()

	_, addr = startProcess(t, dir)
	var ds []struct {
		Domain          string `json:"domain"`
		ConsensusStatus string `json:"consensusStatus"`
	}
	testutil.MustJSON(t, "GET", "http://"+addr+"/api/resolved-domains", "", 200, &ds)
	got := map[string]string{}
	for _, d := range ds {
		got[d.Domain] = d.ConsensusStatus
	}
	for i := 0; i < n; i++ {
		name := fmt.Sprintf("k%d.p2p", i)
		if got[name] != "resolved" {
			t.Fatalf("after kill -9, %s = %q (all: %v)", name, got[name], got)
		}
	}
}

func TestSignalStopsCleanly(t *testing.T) {
	cmd, addr := startProcess(t, t.TempDir())
	testutil.AddDomain(t, "http://"+addr, "bye.p2p", testutil.Hash('a'))
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("exit after SIGTERM: %v", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("node did not exit after SIGTERM")
	}
	if cmd.ProcessState.ExitCode() != 0 {
		t.Fatalf("exit code %d", cmd.ProcessState.ExitCode())
	}
}

func TestVersionAndFlags(t *testing.T) {
	var out strings.Builder
	if code := run([]string{"version"}, func(string) string { return "" }, &out, &out); code != 0 || !strings.HasPrefix(out.String(), "peerdns ") {
		t.Fatalf("version = %d %q", code, out.String())
	}
	env := map[string]string{"PEERDNS_ADMIN_ADDR": "127.0.0.1:9999", "PEERDNS_BOOTSTRAP": "a:1, b:2"}
	cfg, err := parseNodeFlags([]string{"--dns-addr", "127.0.0.1:5353"}, func(k string) string { return env[k] }, &out)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.AdminAddr != "127.0.0.1:9999" || cfg.DNSAddr != "127.0.0.1:5353" || len(cfg.Bootstrap) != 2 || cfg.Data != "./peerdns-data" {
		t.Fatalf("config = %+v", cfg)
	}
	cfg, err = parseNodeFlags([]string{"--admin-addr", "127.0.0.1:1"}, func(k string) string { return env[k] }, &out)
	if err != nil || cfg.AdminAddr != "127.0.0.1:1" {
		t.Fatalf("flag did not win over env: %+v %v", cfg, err)
	}
	cfg, _ = parseNodeFlags([]string{"--system"}, func(string) string { return "" }, &out)
	if cfg.DNSAddr != "0.0.0.0:53" || cfg.HTTPAddr != "0.0.0.0:80" || cfg.HTTPSAddr != "0.0.0.0:443" {
		t.Fatalf("--system = %+v", cfg)
	}
	if _, err := parseNodeFlags([]string{"--nope"}, func(string) string { return "" }, &out); err == nil {
		t.Fatal("unknown flag accepted")
	}
	if code := run([]string{"bogus"}, func(string) string { return "" }, &out, &out); code != 2 {
		t.Fatalf("unknown command exit = %d", code)
	}
}

// A second node joins the first with an invite printed by `peerdns
// invite`, and a claim made on the first resolves on the second.
func TestInviteCommandJoinsANode(t *testing.T) {
	_, addrA := startProcess(t, t.TempDir())
	testutil.Eventually(t, 10*time.Second, func() error {
		if code, body := testutil.Call(t, "GET", "http://"+addrA+"/api/health?probe=readiness", ""); code != 200 {
			return fmt.Errorf("readiness %d %s", code, body)
		}
		return nil
	})
	var out, errOut strings.Builder
	if code := run([]string{"invite", "--admin-addr", addrA}, func(string) string { return "" }, &out, &errOut); code != 0 {
		t.Fatalf("invite exit %d: %s", code, errOut.String())
	}
	invite := strings.TrimSpace(out.String())
	if invite == "" {
		t.Fatal("no invite printed")
	}
	_, addrB := startProcess(t, t.TempDir(), "--join", invite)
	testutil.AddDomain(t, "http://"+addrA, "joined.p2p", testutil.Hash('e'))
	testutil.Eventually(t, 30*time.Second, func() error {
		for _, n := range []struct{ name, addr string }{{"A", addrA}, {"B", addrB}} {
			var cs struct {
				Status string `json:"status"`
			}
			testutil.MustJSON(t, "GET", "http://"+n.addr+"/api/consensus/joined.p2p", "", 200, &cs)
			if cs.Status != "resolved" {
				return fmt.Errorf("joined.p2p on %s = %s", n.name, cs.Status)
			}
		}
		return nil
	})
	// B's vote names A, the claimant, by a short id that A, in a process
	// of its own, must resolve: a vote it cannot is dropped and counted,
	// and comes back seconds later by repair.
	var d struct {
		Summary struct {
			Overlay struct {
				IDsUnknown int64 `json:"idsUnknown"`
			} `json:"overlay"`
		} `json:"summary"`
	}
	testutil.MustJSON(t, "GET", "http://"+addrA+"/api/diagnostics/invites", "", 200, &d)
	if n := d.Summary.Overlay.IDsUnknown; n != 0 {
		t.Fatalf("the claimant could not resolve %d short ids", n)
	}
	if code := run([]string{"invite", "--admin-addr", "127.0.0.1:1"}, func(string) string { return "" }, &out, &errOut); code != 1 {
		t.Fatalf("invite against no node exit = %d", code)
	}
}
