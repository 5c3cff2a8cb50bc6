package main

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"
)

// TestMain lets the test binary act as the peerdns command, so the kill -9
// test runs a real node process without a separate build.
func TestMain(m *testing.M) {
	if os.Getenv("PEERDNS_TEST_AS_MAIN") == "1" {
		os.Exit(run(os.Args[1:], os.Getenv, os.Stdout, os.Stderr))
	}
	os.Exit(m.Run())
}

const (
	hashA = "hs://aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
	hashB = "hs://bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"
)

// testConfig is a node config on free loopback ports in dir.
func testConfig(dir string) nodeConfig {
	return nodeConfig{
		Data: dir, AdminAddr: "127.0.0.1:0", DNSAddr: "127.0.0.1:0", HTTPAddr: "127.0.0.1:0",
		HTTPSAddr: "127.0.0.1:0", P2PAddr: "127.0.0.1:0", AdminDomain: "admin.p2p", LogLevel: "info",
		Upstream: []string{"127.0.0.1:1"},
	}
}

// newTestNode starts a node in dir and stops it at cleanup.
func newTestNode(t testing.TB, dir string) *node {
	t.Helper()
	n, err := startNode(testConfig(dir), io.Discard)
	if err != nil {
		t.Fatalf("startNode: %v", err)
	}
	t.Cleanup(n.stop)
	return n
}

var client = &http.Client{Timeout: 10 * time.Second}

// call does one request and returns status and body.
func call(t testing.TB, method, url, body string) (int, string) {
	t.Helper()
	var r io.Reader
	if body != "" {
		r = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, url, r)
	if err != nil {
		t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// mustJSON does a request that must answer want and decodes its body.
func mustJSON(t testing.TB, method, url, body string, want int, v any) {
	t.Helper()
	code, got := call(t, method, url, body)
	if code != want {
		t.Fatalf("%s %s = %d %q, want %d", method, url, code, got, want)
	}
	if v != nil {
		if err := json.NewDecoder(bytes.NewReader([]byte(got))).Decode(v); err != nil {
			t.Fatalf("%s %s: decode %q: %v", method, url, got, err)
		}
	}
}

func addDomain(t testing.TB, base, domain, hash string) {
	t.Helper()
	code, body := call(t, "POST", base+"/api/add-domain", `{"domain":"`+domain+`","hash":"`+hash+`"}`)
	if code != 200 || body != "OK" {
		t.Fatalf("add-domain %s = %d %q", domain, code, body)
	}
}

// newNoRedirect is a client that returns redirects instead of following.
func newNoRedirect() (*http.Client, error) {
	return &http.Client{Timeout: 10 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error {
		return http.ErrUseLastResponse
	}}, nil
}
