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

	"peerdns/transport"
)

// needLab skips a test that needs root, ip, nft and tc, naming them.
func needLab(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root to make network namespaces (run as root with iproute2, nftables and tc)")
	}
	for _, tool := range []string{"ip", "nft", "tc"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("needs %s (apt-get install iproute2 nftables)", tool)
		}
	}
}

// buildNode builds the peerdns binary from this tree into dir.
func buildNode(t *testing.T, dir string) string {
	t.Helper()
	bin := filepath.Join(dir, "peerdns")
	if out, err := exec.Command("go", "build", "-o", bin, "peerdns/cmd/peerdns").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v: %s", err, out)
	}
	return bin
}

// cut partitions side from the rest (nftables in every namespace);
// heal undoes it.
func (c *cluster) cut(side map[int]bool) {
	for a := range c.nodes {
		var ips []string
		for b := range c.nodes {
			if side[a] != side[b] {
				ips = append(ips, c.lab.ip(b))
			}
		}
		_ = c.lab.nsRun(a, "nft", "add element inet chaos cut { "+strings.Join(ips, ", ")+" }")
	}
}

func (c *cluster) heal() {
	for a := range c.nodes {
		_ = c.lab.nsRun(a, "nft", "flush set inet chaos cut")
	}
}

// A node cut off from the two others for longer than its dialers' first
// backoff steps (every dial in the meantime fails), with a claim made on
// each side during the cut: once the cut heals, every node has its two
// sessions again and both claims are resolved on every node within the
// chaos run's convergence goal (10 s). This is the nemesis's partition
// alone, where a reconnect backoff that outlived the cut would show.
func TestPartitionHealReconnects(t *testing.T) {
	needLab(t)
	dir := t.TempDir()
	bin := buildNode(t, dir)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	c, err := startCluster(ctx, fmt.Sprintf("ch-h%d-", os.Getpid()%100000), dir, bin, 3)
	if err != nil {
		t.Fatal(err)
	}
	defer c.close()
	c.cut(map[int]bool{2: true})
	if err := waitFor(ctx, 30*time.Second, func() string {
		if p := c.nodes[2].peers(); p != 0 {
			return fmt.Sprintf("node 2 still has %d sessions", p)
		}
		return ""
	}); err != nil {
		t.Fatal(err)
	}
	for _, i := range []int{2, 0} {
		d := fmt.Sprintf("cut%d.p2p", i)
		if code, body, err := c.nodes[i].call("POST", "/api/add-domain", `{"domain":"`+d+`","hash":"hs://`+strings.Repeat("ab", 32)+`"}`); err != nil || code != 200 {
			t.Fatalf("add-domain %s on node %d: %d %s %v", d, i, code, body, err)
		}
	}
	// Long enough for several failed dials on both sides (the QUIC
	// handshake gives up after its timeout, then the backoff grows).
	transport.Wait(ctx, 10*time.Second)
	c.heal()
	healed := time.Now()
	err = waitFor(ctx, 10*time.Second, func() string {
		var bad []string
		for _, n := range c.nodes {
			if p := n.peers(); p != 2 {
				bad = append(bad, fmt.Sprintf("node %d has %d sessions", n.i, p))
			}
			v, err := n.resolved()
			if err != nil {
				bad = append(bad, fmt.Sprintf("node %d: %v", n.i, err))
				continue
			}
			for _, d := range []string{"cut0.p2p", "cut2.p2p"} {
				if !v[d] {
					bad = append(bad, fmt.Sprintf("%s not resolved on node %d", d, n.i))
				}
			}
		}
		return strings.Join(bad, "; ")
	})
	if err != nil {
		t.Fatalf("after the cut healed: %v", err)
	}
	t.Logf("sessions back and both claims resolved everywhere %.1fs after the cut healed", time.Since(healed).Seconds())
}
