//go:build linux

package main

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"
)

type testWriter struct{ t *testing.T }

func (w testWriter) Write(b []byte) (int, error) {
	w.t.Log(string(b[:len(b)-1]))
	return len(b), nil
}

// The short chaos run: one minute of nemesis with a fixed seed, five
// node processes built from this tree, the whole workload (claims and
// removals, local records, tunnel traffic, WebSocket subscribers, DNS
// queries) and every check. It needs root (namespaces), ip, nft and tc.
func TestChaosShort(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: the chaos run takes about a minute and a half")
	}
	needLab(t)
	dir := t.TempDir()
	bin := buildNode(t, dir)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	sum, err := Run(ctx, Config{
		Binary: bin, Nodes: 5, Duration: time.Minute, Seed: 1, Converge: 30 * time.Second,
		Prefix: fmt.Sprintf("ch-t%d-", os.Getpid()%100000), Work: dir, Out: testWriter{t},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Log("\n" + sum.String())
	if len(sum.Failures) > 0 {
		t.Fatalf("the chaos run failed (seed %d)", sum.Seed)
	}
	// The workload ran in every part, so the checks had something to check.
	switch {
	case sum.Acked == 0:
		t.Fatal("no claim was acknowledged")
	case sum.LocalOps == 0:
		t.Fatal("no local record was written")
	case sum.TunnelOK == 0:
		t.Fatal("no tunnel round trip")
	case sum.WSMsgs == 0:
		t.Fatal("no WebSocket message")
	case sum.DNSAnswered == 0:
		t.Fatal("no DNS answer")
	case sum.ConvergedAfter == 0:
		t.Fatal("no convergence time")
	}
}
