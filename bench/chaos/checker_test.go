//go:build linux

package main

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"
)

// The checker against three real nodes, with records that say more than
// the nodes hold: every kind of finding it exists for must show.
func TestCheckerSeesWhatIsWrong(t *testing.T) {
	needLab(t)
	dir := t.TempDir()
	bin := buildNode(t, dir)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	c, err := startCluster(ctx, fmt.Sprintf("ch-k%d-", os.Getpid()%100000), dir, bin, 3)
	if err != nil {
		t.Fatal(err)
	}
	defer c.close()
	n := c.nodes[0]
	hash := "hs://" + strings.Repeat("cd", 32)
	for _, d := range []string{"w0-kept.p2p", "w0-back.p2p"} {
		if code, body, err := n.call("POST", "/api/add-domain", `{"domain":"`+d+`","hash":"`+hash+`"}`); err != nil || code != 200 {
			t.Fatalf("add-domain %s: %d %s %v", d, code, body, err)
		}
	}
	if code, body, err := n.call("POST", "/api/add-local-dns", `{"name":"l0-a.chaos.lan","type":"A","ttl":30,"data":"198.51.100.7"}`); err != nil || code != 200 {
		t.Fatalf("add-local-dns: %d %s %v", code, body, err)
	}
	if err := waitFor(ctx, 30*time.Second, func() string {
		return strings.Join(check(c.nodes, map[string]string{"w0-kept.p2p": hash, "w0-back.p2p": hash}, nil), "; ")
	}); err != nil {
		t.Fatalf("the true record: %v", err)
	}

	// Claims: one acknowledged that no node holds, one held with another
	// hash, one removal acknowledged that every node still holds.
	found := strings.Join(check(c.nodes, map[string]string{
		"w0-kept.p2p": "hs://" + strings.Repeat("ef", 32), "w0-never.p2p": hash,
	}, map[string]bool{"w0-back.p2p": true}), "\n")
	for _, want := range []string{"acknowledged claims lost", "claims with another hash", "acknowledged removals undone"} {
		if strings.Count(found, want) != 3 {
			t.Errorf("check should find %q on each of the 3 nodes; it found:\n%s", want, found)
		}
	}

	// Local records: one acknowledged with another value, one acknowledged
	// that is not there, one deleted that is.
	rec := newRecord(3)
	rec.local[0]["l0-a.chaos.lan"] = &localRec{values: map[string]bool{"198.51.100.8": true}, acked: "198.51.100.8", ackedAny: true}
	rec.local[0]["l0-gone.chaos.lan"] = &localRec{values: map[string]bool{"198.51.100.9": true}, acked: "198.51.100.9", ackedAny: true}
	found = strings.Join(checkLocal(c.nodes, rec), "\n")
	for _, want := range []string{"1 local records with an older value", "1 acknowledged local records lost"} {
		if !strings.Contains(found, want) {
			t.Errorf("checkLocal should find %q; it found:\n%s", want, found)
		}
	}
	rec.local[0]["l0-a.chaos.lan"] = &localRec{values: map[string]bool{"198.51.100.7": true}, ackedAny: true}
	delete(rec.local[0], "l0-gone.chaos.lan")
	if found := strings.Join(checkLocal(c.nodes, rec), "\n"); !strings.Contains(found, "acknowledged local record deletes undone") {
		t.Errorf("checkLocal should find the undone delete; it found:\n%s", found)
	}

	// DNS: the local name's answer is not a value the record has; a name
	// the record says nobody claimed answers; the p2p name's address is
	// the one /api/interfaces gives it (no finding), until the record is
	// told another name.
	cl := &dns.Client{Timeout: 2 * time.Second}
	ask := func(name string) []string {
		ips, err := n.queryA(ctx, cl, name)
		if err != nil || len(ips) == 0 {
			t.Fatalf("DNS %s: %v %v", name, ips, err)
		}
		return ips
	}
	rec.local[0]["l0-a.chaos.lan"] = &localRec{values: map[string]bool{"198.51.100.8": true}}
	if w := judgeDNS(n, rec, "l0-a.chaos.lan", "local", ask("l0-a.chaos.lan")); len(w) != 1 || w[0] != "198.51.100.7" {
		t.Errorf("a local answer never written should be found: %v", w)
	}
	if w := judgeDNS(n, rec, "w0-kept.p2p", "never", ask("w0-kept.p2p")); len(w) != 1 {
		t.Errorf("an answer for a name nobody claimed should be found: %v", w)
	}
	if w := judgeDNS(n, rec, "w0-kept.p2p", "p2p", ask("w0-kept.p2p")); len(w) != 0 {
		t.Errorf("the p2p answer is the domain's address; found: %v", w)
	}
	if w := judgeDNS(n, rec, "w0-back.p2p", "p2p", ask("w0-kept.p2p")); len(w) != 1 {
		t.Errorf("another domain's address should be found: %v", w)
	}
}

// The level bounds as stated in the package doc.
func TestLevelBounds(t *testing.T) {
	before := []levels{{Goroutines: 80}, {Goroutines: 80}}
	if ex := goroutinesExceed(before, []levels{{Goroutines: 130}, {Goroutines: 131}}); len(ex) != 1 || !strings.HasPrefix(ex[0], "node 1:") {
		t.Errorf("goroutines: 80 before allows 130 (1.25x + 30), not 131: %v", ex)
	}
	if ex := goroutinesExceed(before, []levels{{}, {Goroutines: 80}}); len(ex) != 1 {
		t.Errorf("a node without a count is a finding: %v", ex)
	}
	fresh := levels{LiveKB: 20 << 10}
	if ex := heapExceeds([]levels{{LiveKB: 46 << 10}, {LiveKB: 46<<10 + 1}}, fresh); len(ex) != 1 || !strings.HasPrefix(ex[0], "node 1:") {
		t.Errorf("heap: a fresh 20 MiB allows 46 MiB (1.5x + 16), not more: %v", ex)
	}
}
