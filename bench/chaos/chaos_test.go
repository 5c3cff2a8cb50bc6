//go:build linux

package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

type testWriter struct{ t *testing.T }

func (w testWriter) Write(b []byte) (int, error) {
	w.t.Log(string(b[:len(b)-1]))
	return len(b), nil
}

// The short chaos run: one minute of nemesis with a fixed seed, five
// node processes built from this tree. It needs root (namespaces), ip,
// nft and tc.
func TestChaosShort(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: the chaos run takes about a minute and a half")
	}
	if os.Geteuid() != 0 {
		t.Skip("needs root to make network namespaces (run as root with iproute2, nftables and tc)")
	}
	for _, tool := range []string{"ip", "nft", "tc"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("needs %s (apt-get install iproute2 nftables)", tool)
		}
	}
	dir := t.TempDir()
	bin := filepath.Join(dir, "peerdns")
	if out, err := exec.Command("go", "build", "-o", bin, "peerdns/cmd/peerdns").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v: %s", err, out)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	sum, err := Run(ctx, Config{
		Binary: bin, Nodes: 5, Duration: time.Minute, Seed: 1, Converge: 30 * time.Second,
		Prefix: fmt.Sprintf("pft-ct%d-", os.Getpid()%100000), Work: dir, Out: testWriter{t},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Log("\n" + sum.String())
	if len(sum.Failures) > 0 {
		t.Fatalf("the chaos run failed (seed %d)", sum.Seed)
	}
	if sum.Acked == 0 {
		t.Fatal("no claim was acknowledged: the workload did not run")
	}
}
