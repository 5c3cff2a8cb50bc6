package node

import (
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"peerdns/internal/testutil"
)

// A node started and stopped many times leaves no goroutine behind: every
// actor, ticker, server and per-domain worker goes with Stop.
func TestStartStopLeavesNothingRunning(t *testing.T) {
	testutil.NoLeaks(t)
	dir := t.TempDir()
	for i := 0; i < 5; i++ {
		n, err := Start(testConfig(dir), io.Discard)
		if err != nil {
			t.Fatalf("start %d: %v", i, err)
		}
		base := "http://" + n.AdminAddr()
		addDomain(t, base, fmt.Sprintf("round%d.p2p", i), hashA)
		if code, body := call(t, "GET", base+"/api/resolved-domains", ""); code != 200 || !strings.Contains(body, fmt.Sprintf("round%d.p2p", i)) {
			t.Fatalf("round %d: resolved-domains = %d %s", i, code, body)
		}
		// A WebSocket client still connected when the node stops is
		// disconnected by it, not left to a timeout.
		c := dialWS(t, n.AdminAddr(), 0)
		if err := c.WriteJSON(map[string]string{"type": "request-domains"}); err != nil {
			t.Fatal(err)
		}
		readUntil(t, c, ofType("domains-list"))
		n.Stop()
		_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
		for {
			_, _, err := c.ReadMessage()
			if err == nil {
				continue
			}
			if ne, ok := err.(net.Error); ok && ne.Timeout() {
				t.Fatalf("round %d: WebSocket client still connected after Stop", i)
			}
			break
		}
	}
	// Everything claimed in earlier rounds is still there.
	n, err := Start(testConfig(dir), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	_, body := call(t, "GET", "http://"+n.AdminAddr()+"/api/resolved-domains", "")
	n.Stop()
	for i := 0; i < 5; i++ {
		if !strings.Contains(body, fmt.Sprintf("round%d.p2p", i)) {
			t.Fatalf("round%d.p2p lost across restarts: %s", i, body)
		}
	}
}

// A start that fails part-way (here: the admin port is taken) returns an
// error naming the service and the address, stops what it started (no
// panic in Stop, no goroutine left) and releases the data folder.
func TestStartOnBusyPortFailsCleanly(t *testing.T) {
	testutil.NoLeaks(t)
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	dir := t.TempDir()
	cfg := testConfig(dir)
	cfg.AdminAddr = busy.Addr().String()
	_, err = Start(cfg, io.Discard)
	want := "admin: listen " + busy.Addr().String() + ": address already in use"
	if err == nil || err.Error() != want {
		t.Fatalf("Start on a busy port = %v, want %q", err, want)
	}
	// The folder is free again: a node starts on it.
	n, err := Start(testConfig(dir), io.Discard)
	if err != nil {
		t.Fatalf("start after the failed one: %v", err)
	}
	n.Stop()
}

func TestSecondNodeOnSameDataIsRefused(t *testing.T) {
	dir := t.TempDir()
	newTestNode(t, dir)
	_, err := Start(testConfig(dir), io.Discard)
	if err == nil || !strings.Contains(err.Error(), "in use by another running peerdns node") {
		t.Fatalf("second node on the same data = %v", err)
	}
}

func TestConfigMistakesStopAtStart(t *testing.T) {
	for _, tt := range []struct {
		name string
		edit func(*Config)
		want string
	}{
		{"subnet base not an address", func(c *Config) { c.SubnetBase = "not-an-ip" }, `SUBNET_BASE "not-an-ip"`},
		{"unknown log level", func(c *Config) { c.LogLevel = "loud" }, `LOG_LEVEL "loud"`},
		{"bad dns address", func(c *Config) { c.DNSAddr = "notanaddr" }, "notanaddr"},
		{"bad p2p address", func(c *Config) { c.P2PAddr = "notanaddr" }, "p2p: listen notanaddr"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cfg := testConfig(t.TempDir())
			tt.edit(&cfg)
			_, err := Start(cfg, io.Discard)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Start = %v, want an error containing %q", err, tt.want)
			}
		})
	}
}

func TestParseLevel(t *testing.T) {
	for in, ok := range map[string]bool{"": true, "debug": true, "INFO": true, "Warn": true, "warning": true, "error": true, "loud": false, "3": false} {
		if _, err := ParseLevel(in); (err == nil) != ok {
			t.Errorf("ParseLevel(%q) err = %v, want ok=%v", in, err, ok)
		}
	}
}

// An invite that can never work stops the node through Fatal instead of
// being retried forever.
func TestBadInviteIsFatal(t *testing.T) {
	cfg := testConfig(t.TempDir())
	cfg.Join = "this-is-not-an-invite"
	n, err := Start(cfg, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(n.Stop)
	select {
	case err := <-n.Fatal():
		if !strings.Contains(err.Error(), "join: invalid invite") {
			t.Fatalf("Fatal = %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("a malformed invite did not stop the node")
	}
}

// A damaged identity.key (cut short, or hand-edited) stops the start with
// an error that names the file, so the operator knows what to restore.
func TestDamagedIdentityNamesItsFile(t *testing.T) {
	for name, content := range map[string]string{"short": "abcd\n", "empty": "", "not hex": "zz\n"} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			if err := os.WriteFile(filepath.Join(dir, "identity.key"), []byte(content), 0o600); err != nil {
				t.Fatal(err)
			}
			_, err := Start(testConfig(dir), io.Discard)
			if err == nil || !strings.Contains(err.Error(), filepath.Join(dir, "identity.key")) {
				t.Fatalf("Start = %v, want an error naming %s", err, filepath.Join(dir, "identity.key"))
			}
		})
	}
}
