//go:build linux

package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

type testWriter struct{ t *testing.T }

func (w testWriter) Write(b []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(b), "\n"))
	return len(b), nil
}

// TestFleetReduced is the fleet run in small: eight `peerdns node`
// processes in namespaces of their own, joined by invites from random
// joined nodes; 3 × 4 claims resolved alike on all eight; one node killed
// with SIGKILL while a claim is made, restarted on its data; a 3 | 5
// partition on the bridge with claims and two conflicting domains on
// both sides; the heal, after which all eight hold every claim alike. It
// needs root, ip and nft (as CI runs it); it skips naming what is
// missing.
func TestFleetReduced(t *testing.T) {
	if why := available(); why != "" {
		t.Skip(why)
	}
	if testing.Short() {
		t.Skip("-short: eight node processes, a kill and a partition (about half a minute)")
	}
	dir := t.TempDir()
	bin := filepath.Join(dir, "peerdns")
	if out, err := exec.Command("go", "build", "-o", bin, "peerdns/cmd/peerdns").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v: %s", err, out)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	cfg := Config{
		Binary: bin, Prefix: fmt.Sprintf("f50-t%d", os.Getpid()%100000), Work: dir, Out: testWriter{t}, Seed: 7,
		Nodes: 8, Wave: 3, MinPeers: 3, Claimers: 3, ClaimsEach: 4, Clients: 2, Rounds: 1,
		Kills: 1, Partition: true, SideClaims: 3, Conflicts: 2,
		// Bounds for a machine far busier than CI's: the run takes
		// 10-60 s at load 2-40 (plus the build).
		Settle: 60 * time.Second, JoinWithin: 90 * time.Second,
	}
	res, err := Run(ctx, cfg)
	if res != nil {
		t.Log(res.Table(cfg))
	}
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range res.Failures {
		t.Error(f)
	}
	// The run did every step it was asked for.
	var steps []string
	for _, row := range res.Rows {
		steps = append(steps, row[0])
	}
	for _, want := range []string{"join", "mesh", "burst 1", "kill -9", "partition", "heal"} {
		if !strings.Contains(" "+strings.Join(steps, " | ")+" ", " "+want+" ") {
			t.Errorf("step %q missing from %v", want, steps)
		}
	}
	if len(res.Bursts) != 1 || res.Bursts[0].Claims != 12 {
		t.Errorf("bursts %+v, want one of 12 claims", res.Bursts)
	}
	// Nothing is left behind: no namespace of the run's prefix.
	out, err := exec.Command("ip", "netns", "list").Output()
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(out), cfg.Prefix+"-") {
		t.Errorf("namespaces left: %s", out)
	}
}

// The checker itself, on views made by hand: a claim missing, a claim
// resolved to another hash, a conflict seen differently on two nodes.
func TestChecker(t *testing.T) {
	cs := &claims{}
	cs.add("a.p2p", claim{node: 0, id: "A", hash: "hs://1"})
	cs.add("x.p2p", claim{node: 0, id: "A", hash: "hs://2"})
	cs.add("x.p2p", claim{node: 1, id: "B", hash: "hs://3"})
	good := map[string]seen{"a.p2p": {"resolved", "hs://1", "A"}, "x.p2p": {"resolved", "hs://3", "B"}}
	if err := cs.check(good); err != nil {
		t.Fatal(err)
	}
	tie := map[string]seen{"a.p2p": {"resolved", "hs://1", "A"}, "x.p2p": {Status: "tie"}}
	if err := cs.check(tie); err != nil {
		t.Fatalf("a tie between two claims is an outcome: %v", err)
	}
	for name, v := range map[string]map[string]seen{
		"missing":      {"x.p2p": {"resolved", "hs://3", "B"}},
		"quorum":       {"a.p2p": {Status: "insufficient_quorum"}, "x.p2p": {"resolved", "hs://3", "B"}},
		"other hash":   {"a.p2p": {"resolved", "hs://9", "A"}, "x.p2p": {"resolved", "hs://3", "B"}},
		"other writer": {"a.p2p": {"resolved", "hs://1", "B"}, "x.p2p": {"resolved", "hs://3", "B"}},
		"mixed claim":  {"a.p2p": {"resolved", "hs://1", "A"}, "x.p2p": {"resolved", "hs://3", "A"}},
	} {
		if err := cs.check(v); err == nil {
			t.Errorf("%s: check passed %v", name, v)
		}
	}
	if err := cs.alike(map[int]map[string]seen{0: good, 1: good}); err != nil {
		t.Fatal(err)
	}
	if err := cs.alike(map[int]map[string]seen{0: good, 1: tie}); err == nil {
		t.Error("alike passed a conflict resolved on one node and tied on another")
	}
}
