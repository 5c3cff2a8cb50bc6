package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"peerdns/agent/rpc"
	"peerdns/agent/store"
	"peerdns/transport/identity"
)

// TestAgentAllowAndCall runs a real agent process, allows the operator's
// key with `peerdns agent allow`, calls it with `peerdns agent call`, then
// denies the key and sees the call refused.
func TestAgentAllowAndCall(t *testing.T) {
	dir := t.TempDir()
	cmd := exec.Command(os.Args[0], "agent", "--data", dir)
	cmd.Env = append(os.Environ(), "PEERDNS_TEST_AS_MAIN=1", "AGENT_REST_PORT=0", "AGENT_PEER_ADDR=127.0.0.1:0")
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	re := regexp.MustCompile(`agent peer RPC listening on (\S+) key ([0-9a-f]{64})`)
	found := make(chan []string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			if m := re.FindStringSubmatch(sc.Text()); m != nil {
				found <- m
			}
		}
	}()
	var target string
	select {
	case m := <-found:
		target = m[2] + "@" + m[1]
	case <-time.After(30 * time.Second):
		t.Fatal("agent did not announce its peer RPC address")
	}

	peerdns := func(args ...string) (int, string, string) {
		var out, errb bytes.Buffer
		code := run(append(args, "--data", dir), func(string) string { return "" }, &out, &errb)
		return code, out.String(), errb.String()
	}
	code, out, _ := peerdns("agent", "key")
	m := regexp.MustCompile(`operator ([0-9a-f]{64})`).FindStringSubmatch(out)
	if code != 0 || m == nil {
		t.Fatalf("agent key: %d %q", code, out)
	}
	opKey := m[1]
	if code, out, errs := peerdns("agent", "call", target, "info"); code != 1 || !strings.Contains(errs, "403") {
		t.Fatalf("call before allow: %d %q %q, want exit 1 and 403", code, out, errs)
	}
	if code, _, errs := peerdns("agent", "allow", opKey, "admin"); code != 0 {
		t.Fatalf("allow: %d %s", code, errs)
	}
	if code, out, _ := peerdns("agent", "peers"); code != 0 || !strings.Contains(out, opKey+" admin") {
		t.Fatalf("peers: %d %q", code, out)
	}
	code, out, errs := peerdns("agent", "call", target, "info")
	var info struct {
		Role string `json:"role"`
	}
	if code != 0 || json.Unmarshal([]byte(out), &info) != nil || info.Role != "admin" {
		t.Fatalf("call info: %d %q %q", code, out, errs)
	}
	code, out, errs = peerdns("agent", "call", target, "get", "/api/v3/tunnel")
	if code != 0 || !strings.Contains(out, `"status": "listening"`) {
		t.Fatalf("call get tunnel: %d %q %q", code, out, errs)
	}
	if code, _, errs := peerdns("agent", "call", target, "prune", "before=nope"); code != 2 || !strings.Contains(errs, "not a number") {
		t.Fatalf("bad prune args: %d %q", code, errs)
	}
	if code, _, errs := peerdns("agent", "deny", opKey); code != 0 {
		t.Fatalf("deny: %d %s", code, errs)
	}
	if code, _, errs := peerdns("agent", "call", target, "info"); code != 1 || !strings.Contains(errs, "403") {
		t.Fatalf("call after deny: %d %q, want 403", code, errs)
	}
	if code, _, _ := peerdns("agent", "allow", "zz", "admin"); code != 1 {
		t.Fatalf("allow of a bad key: exit %d, want 1", code)
	}
}

// The allowlist commands take a fixed number of words: one more is a
// usage error (exit 2), and the allowlist is left as it was.
func TestAgentAdminStrayArguments(t *testing.T) {
	dir := t.TempDir()
	key := strings.Repeat("ab", 32)
	for _, args := range [][]string{
		{"agent", "peers", "extra"},
		{"agent", "key", "extra"},
		{"agent", "allow", key, "admin", "extra"},
		{"agent", "deny", key, "extra"},
	} {
		var out, errb bytes.Buffer
		code := run(append(args, "--data", dir), noEnv, &out, &errb)
		if code != 2 || out.Len() != 0 || !strings.Contains(errb.String(), "usage: peerdns agent "+args[1]) {
			t.Errorf("peerdns %s: exit %d, stdout %q, stderr %q; want exit 2 and its usage", strings.Join(args, " "), code, out.String(), errb.String())
		}
	}
	var out, errb bytes.Buffer
	if code := run([]string{"agent", "peers", "--data", dir}, noEnv, &out, &errb); code != 0 || out.Len() != 0 {
		t.Errorf("agent peers after the refused commands: exit %d, %q %q; want an empty allowlist", code, out.String(), errb.String())
	}
}

// `agent call` with a malformed target, an unknown method or a bad
// method argument is a usage error (exit 2) naming it, found before any
// agent is dialled.
func TestAgentCallUsageErrors(t *testing.T) {
	dir := t.TempDir()
	target := strings.Repeat("ab", 32) + "@127.0.0.1:1"
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"bogus", "info"}, `"bogus": want <peer-key>@<host:port>`},
		{[]string{"abc@127.0.0.1:1", "info"}, `"abc@127.0.0.1:1"`},
		{[]string{target, "nosuch"}, `unknown method "nosuch"`},
		{[]string{target, "prune", "before=nope"}, "not a number"},
		{[]string{target, "get"}, "get needs one /api/... path"},
	} {
		var out, errb bytes.Buffer
		code := run(append([]string{"agent", "call", "--data", dir}, tt.args...), noEnv, &out, &errb)
		if code != 2 || out.Len() != 0 || strings.Count(errb.String(), "\n") != 1 || !strings.Contains(errb.String(), tt.want) {
			t.Errorf("agent call %s: exit %d, stdout %q, stderr %q; want exit 2 and one line with %q", strings.Join(tt.args, " "), code, out.String(), errb.String(), tt.want)
		}
	}
}

// agent call prints another host's reply: an escape sequence, a C1
// control or a bidi override in it, JSON or not, reaches the terminal as
// its Go escape, and so does one in the agent's error message.
func TestAgentCallEscapesReply(t *testing.T) {
	agentDir, data := t.TempDir(), t.TempDir()
	db, err := store.Open(store.Config{Dir: agentDir, Tier0Retention: time.Hour, Tier1Retention: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	id, err := identity.LoadOrCreate(filepath.Join(agentDir, "identity.key"))
	if err != nil {
		t.Fatal(err)
	}
	replies := map[string]struct {
		status int
		body   string
	}{
		"/api/json": {200, "{\"name\": \"a\u202eb\u009b2J\x7f\"}"},
		"/api/text": {200, "plain \x1b]0;owned\x07 \x1b[2J\u202e\nsecond line"},
		"/api/fail": {500, "broken \x1b[2J\u202e"},
	}
	srv, err := rpc.Listen(rpc.Config{Identity: id, ListenAddr: "127.0.0.1:0", Dir: agentDir, DB: db,
		API: func(c *fasthttp.RequestCtx) {
			r := replies[string(c.Path())]
			c.SetStatusCode(r.status)
			c.SetBodyString(r.body)
		}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	op, err := identity.LoadOrCreate(filepath.Join(data, "operator.key"))
	if err != nil {
		t.Fatal(err)
	}
	if err := rpc.Allow(agentDir, op.ID(), "admin"); err != nil {
		t.Fatal(err)
	}
	target := id.ID() + "@" + srv.Addr().String()
	for path, want := range map[string]string{
		"/api/json": `"name": "a\u202eb\u009b2J\x7f"`,
		"/api/text": "plain \\x1b]0;owned\\a \\x1b[2J\\u202e\nsecond line\n",
		"/api/fail": `broken \x1b[2J\u202e`,
	} {
		var out, errb bytes.Buffer
		code := run([]string{"agent", "call", target, "get", path, "--data", data}, func(string) string { return "" }, &out, &errb)
		got := out.String() + errb.String()
		if path == "/api/fail" && code != 1 || path != "/api/fail" && code != 0 {
			t.Errorf("%s: exit %d\n%s", path, code, got)
		}
		if strings.ContainsAny(got, "\x1b\x07\x7f\u202e\u009b") {
			t.Errorf("%s: the reply's controls reached the terminal: %q", path, got)
		}
		if !strings.Contains(got, want) {
			t.Errorf("%s: output %q does not show %q", path, got, want)
		}
	}
}
