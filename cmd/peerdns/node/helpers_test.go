package node

import (
	"io"
	"net/http"
	"testing"
	"time"

	"peerdns/internal/testutil"
)

var (
	hashA = testutil.Hash('a')
	hashB = testutil.Hash('b')
)

// TestConfig is a node config on free loopback ports in dir, with an
// upstream that refuses at once.
func testConfig(dir string) Config {
	return Config{
		Data: dir, AdminAddr: "127.0.0.1:0", DNSAddr: "127.0.0.1:0", HTTPAddr: "127.0.0.1:0",
		HTTPSAddr: "127.0.0.1:0", P2PAddr: "127.0.0.1:0", AdminDomain: "admin.p2p", LogLevel: "info",
		Upstream: []string{"127.0.0.1:1"},
	}
}

// newTestNode starts a node in dir and stops it at cleanup.
func newTestNode(t testing.TB, dir string) *Node {
	t.Helper()
	return startConfig(t, testConfig(dir))
}

// startConfig starts a node with cfg and stops it when the test ends.
func startConfig(t testing.TB, cfg Config) *Node {
	t.Helper()
	n, err := Start(cfg, io.Discard)
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(n.Stop)
	return n
}

var (
	call      = testutil.Call
	mustJSON  = testutil.MustJSON
	addDomain = testutil.AddDomain
)

// newNoRedirect is a client that returns redirects instead of following.
func newNoRedirect() (*http.Client, error) {
	return &http.Client{Timeout: 10 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error {
		return http.ErrUseLastResponse
	}}, nil
}
