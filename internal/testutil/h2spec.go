package testutil

import (
	"context"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// H2Spec runs h2spec (github.com/summerwind/h2spec v2.2.1, the HTTP/2
// conformance suite) over TLS against addr and fails t unless every case
// passes. h2spec is built from its module in a temporary folder (never
// vendored), or taken from PEERDNS_H2SPEC (a path to a built h2spec) when
// set; in -short without PEERDNS_H2SPEC, and when the build fails, the
// test is skipped with the reason and the way to give it a binary.
func H2Spec(t *testing.T, addr string) {
	t.Helper()
	bin := os.Getenv("PEERDNS_H2SPEC")
	if bin == "" {
		if testing.Short() {
			t.Skip("h2spec: skipped in -short (it builds h2spec from its module; or set PEERDNS_H2SPEC to a built h2spec)")
		}
		dir := t.TempDir()
		ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, "go", "install", "github.com/summerwind/h2spec/cmd/h2spec@v2.2.1+incompatible")
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GOBIN="+dir, "GOFLAGS=-mod=mod")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Skipf("h2spec not run: building github.com/summerwind/h2spec failed (set PEERDNS_H2SPEC to a built h2spec): %v\n%s", err, out)
		}
		bin = filepath.Join(dir, "h2spec")
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatalf("h2spec: address %q: %v", addr, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, bin, "-h", host, "-p", port, "-t", "-k", "-o", "3", "-j", filepath.Join(t.TempDir(), "report.xml")).CombinedOutput()
	summary := string(out)
	if i := strings.LastIndex(summary, "tests,"); i >= 0 {
		if j := strings.LastIndex(summary[:i], "\n"); j >= 0 {
			summary = summary[j+1:]
		}
	}
	t.Logf("h2spec: %s", strings.TrimSpace(summary))
	if err != nil {
		t.Fatalf("h2spec failed: %v\n%s", err, out)
	}
}
