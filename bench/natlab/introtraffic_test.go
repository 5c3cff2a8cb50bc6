//go:build linux

package natlab

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestIntroTraffic measures what a pair that cannot punch spends on it:
// X and Y behind symmetric NATs, relayed through A, for
// NATLAB_INTRO_MINUTES (set it, e.g. 15, to run). Each minute it prints
// the punch dials X and Y started and the UDP X's router sent towards
// Y's router (the only traffic between the two that is not relayed).
// NATLAB_BIN names the binary (built from the tree without it);
// NATLAB_BIN_B a second one, run at the same time in a lab of its own,
// so two builds are compared over the same minutes.
func TestIntroTraffic(t *testing.T) {
	minutes, bin := benchSetup(t, "NATLAB_INTRO_MINUTES", "(e.g. 15) to measure a symmetric pair's introduction traffic")
	bins := map[string]string{"a": bin}
	if b := os.Getenv("NATLAB_BIN_B"); b != "" {
		bins["b"] = b
	}
	type row struct {
		minute         int
		punches        int64
		packets, bytes int64
		path, label    string
	}
	var mu sync.Mutex
	var rows []row
	var wg sync.WaitGroup
	for label, bin := range bins {
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := introTraffic(bin, fmt.Sprintf("%s-it%s", benchPrefix(), label), t.TempDir(), minutes, func(m int, punches, packets, bytes int64, path string) {
				mu.Lock()
				rows = append(rows, row{minute: m, punches: punches, packets: packets, bytes: bytes, path: path, label: label})
				mu.Unlock()
			})
			if err != nil {
				t.Errorf("%s: %v", label, err)
			}
		}()
	}
	wg.Wait()
	for _, r := range rows {
		t.Logf("| %s | minute %d | punch dials %d | towards Y's router %d packets, %d bytes | path %s |", r.label, r.minute, r.punches, r.packets, r.bytes, r.path)
	}
}

// introTraffic runs one lab for minutes and reports each minute's
// cumulative figures.
func introTraffic(bin, prefix, dir string, minutes int, report func(minute int, punches, packets, bytes int64, path string)) error {
	lab, err := New(prefix)
	if err != nil {
		return err
	}
	defer lab.Close()
	var nodes []*Node
	defer func() {
		for _, n := range nodes {
			n.Stop()
		}
	}()
	pa, err := lab.Add(Public)
	if err != nil {
		return err
	}
	px, err := lab.Add(Sym)
	if err != nil {
		return err
	}
	py, err := lab.Add(Sym)
	if err != nil {
		return err
	}
	router := strings.Replace(px.NS, "-n", "-r", 1)
	if err := nft(router, fmt.Sprintf("table ip count {\n  chain c { type filter hook forward priority -5; policy accept; oifname \"wan\" ip daddr %s meta l4proto udp counter; }\n}\n", py.WAN)); err != nil {
		return err
	}
	a, err := Start(bin, "A", pa, filepath.Join(dir, "A"), "")
	if err != nil {
		return err
	}
	nodes = append(nodes, a)
	inv, err := pollInvite(a)
	if err != nil {
		return err
	}
	x, err := Start(bin, "X", px, filepath.Join(dir, "X"), inv)
	if err != nil {
		return err
	}
	nodes = append(nodes, x)
	if inv, err = pollInvite(a); err != nil {
		return err
	}
	y, err := Start(bin, "Y", py, filepath.Join(dir, "Y"), inv)
	if err != nil {
		return err
	}
	nodes = append(nodes, y)
	if err := Poll(60*time.Second, 100*time.Millisecond, func() error { _, err := y.PeerTo(x.ID); return err }); err != nil {
		return fmt.Errorf("X and Y never connected: %w", err)
	}
	tick := time.NewTicker(time.Minute) // the readings' schedule
	defer tick.Stop()
	for m := 1; m <= minutes; m++ {
		<-tick.C
		out, err := exec.Command("ip", "netns", "exec", router, "nft", "list", "table", "ip", "count").CombinedOutput()
		if err != nil {
			return fmt.Errorf("nft list: %v: %s", err, out)
		}
		mm := regexp.MustCompile(`counter packets (\d+) bytes (\d+)`).FindStringSubmatch(string(out))
		if mm == nil {
			return fmt.Errorf("no counter in %s", out)
		}
		packets, _ := strconv.ParseInt(mm[1], 10, 64)
		bytes, _ := strconv.ParseInt(mm[2], 10, 64)
		path := "none"
		if pv, err := y.PeerTo(x.ID); err == nil {
			path = pv.Path
		}
		report(m, punches(x)+punches(y), packets, bytes, path)
	}
	return nil
}
