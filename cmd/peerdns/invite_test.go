package main

import (
	"bytes"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"
	"unicode/utf8"

	"peerdns/internal/testutil"
)

// `peerdns invite` against a node that answers garbage or an error full
// of control characters: exit 1 and one short printable line on
// stderr, nothing on stdout.
func TestInviteNodeGarbage(t *testing.T) {
	for _, tt := range []struct {
		name   string
		status int
		body   string
	}{
		{"error with controls and lines", 500, "boom\x1b[2J\nsecond line\r\n\x1b]0;owned\x07"},
		{"error cut in a character", 500, "x" + strings.Repeat("é", 400)},
		{"binary answer", 200, "\x00\xff\x1b[31m" + strings.Repeat("garbage ", 100000)},
		{"invite with controls", 200, `{"invite":"\u001b[2J","expiresAt":1}`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			node := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Server", "peerdns")
				w.WriteHeader(tt.status)
				_, _ = w.Write([]byte(tt.body))
			}))
			defer node.Close()
			var out, errOut strings.Builder
			code := run([]string{"invite", "--admin-addr", strings.TrimPrefix(node.URL, "http://")}, func(string) string { return "" }, &out, &errOut)
			line := strings.TrimSuffix(errOut.String(), "\n")
			bad := strings.ContainsFunc(line, func(c rune) bool { return c < ' ' || c == 0x7f }) || !utf8.ValidString(line) ||
				utf8.ValidString(tt.body) && strings.ContainsRune(line, utf8.RuneError) // a cut inside a character
			if code != 1 || out.Len() != 0 || strings.Contains(line, "\n") || bad || len(line) > 400 {
				t.Fatalf("invite: exit %d, stdout %q, stderr %q (%d bytes); want exit 1 and one short printable line", code, out.String(), trim(line), len(line))
			}
		})
	}
}

func trim(s string) string {
	if len(s) > 600 {
		return s[:600] + "..."
	}
	return s
}

// `peerdns invite` takes --admin-addr as a URL (http://host:port), as
// the other commands that speak to a node do.
func TestInviteAdminAddrWithScheme(t *testing.T) {
	_, addr := startProcess(t, t.TempDir())
	testutil.Eventually(t, 10*time.Second, func() error {
		if code, body := testutil.Call(t, "GET", "http://"+addr+"/api/health?probe=readiness", ""); code != 200 {
			return fmt.Errorf("readiness %d %s", code, body)
		}
		return nil
	})
	var out, errOut strings.Builder
	if code := run([]string{"invite", "--admin-addr", "http://" + addr + "/"}, func(string) string { return "" }, &out, &errOut); code != 0 || strings.TrimSpace(out.String()) == "" {
		t.Fatalf("invite --admin-addr http://%s/: exit %d, stdout %q, stderr %q", addr, code, out.String(), errOut.String())
	}
}

// silentNode is an address that accepts connections and answers
// nothing; accepted gets one value a connection.
func silentNode(t *testing.T) (addr string, accepted chan struct{}) {
	hold := make(chan struct{})
	t.Cleanup(func() { close(hold) })
	accepted = make(chan struct{}, 4)
	return testutil.ServeTCP(t, func(c net.Conn) {
		accepted <- struct{}{}
		<-hold
	}).String(), accepted
}

// Ctrl-C (SIGINT) while `peerdns invite` waits for a node that accepted
// the connection and answers nothing ends it at once with exit 130 and
// one line on stderr, not after its 10 s timeout.
func TestInviteInterrupted(t *testing.T) {
	addr, accepted := silentNode(t)
	cmd := exec.Command(os.Args[0], "invite", "--admin-addr", addr)
	cmd.Env = append(os.Environ(), "PEERDNS_TEST_AS_MAIN=1")
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill() })
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case <-accepted:
	case <-done:
		t.Fatalf("invite ended before it connected: %s", errOut.String())
	case <-time.After(30 * time.Second):
		t.Fatal("invite did not connect")
	}
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	select {
	case <-done:
		if code := cmd.ProcessState.ExitCode(); code != 130 || out.Len() != 0 || strings.Count(errOut.String(), "\n") != 1 {
			t.Errorf("invite interrupted: exit %d, stdout %q, stderr %q; want exit 130 and one line", code, out.String(), errOut.String())
		}
	case <-time.After(5 * time.Second):
		t.Fatal("invite still waits 5 s after SIGINT")
	}
}

// --timeout bounds how long `peerdns invite` waits for the node, as in
// the other commands that speak to one.
func TestInviteTimeout(t *testing.T) {
	addr, _ := silentNode(t)
	done := make(chan int, 1)
	var out, errOut strings.Builder
	go func() {
		done <- run([]string{"invite", "--admin-addr", addr, "--timeout", "300ms"}, func(string) string { return "" }, &out, &errOut)
	}()
	select {
	case code := <-done:
		if code != 1 || !strings.Contains(errOut.String(), "Timeout") {
			t.Errorf("invite --timeout 300ms: exit %d, stderr %q; want exit 1 and a timeout", code, errOut.String())
		}
	case <-time.After(5 * time.Second):
		t.Fatal("invite --timeout 300ms still waits after 5 s")
	}
}
