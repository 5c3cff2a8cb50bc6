package node

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"peerdns/internal/testutil"
)

// A node whose data folder is a small tmpfs that fills up: every write
// request on the admin API (a claim in ledger.db, a setting in node.db, a
// certificate, a backup) fails with 507 and a message that says the disk
// is full; reads go on; once space is back the same requests succeed; and
// nothing acknowledged is lost, also across a restart.
func TestDiskFullNode(t *testing.T) {
	disk := testutil.SmallDisk(t, "24m")
	cfg := testConfig(disk.Dir)
	n := startConfig(t, cfg)
	base := "http://" + n.AdminAddr()
	var acked []string
	for i := 0; i < 5; i++ {
		d := fmt.Sprintf("before%d.p2p", i)
		addDomain(t, base, d, hashA)
		acked = append(acked, d)
	}
	mustJSON(t, "POST", base+"/api/generate-cert", `{"domain":"before0.p2p"}`, 200, nil)
	mustJSON(t, "POST", base+"/api/backups/create", "", 200, nil)

	filled := disk.Fill()
	t.Logf("filler: %d bytes", filled)
	// Claims until one is refused (a write may still fit in a page the
	// file already has).
	var code int
	var body string
	for i := 0; i < 500; i++ {
		d := fmt.Sprintf("full%03d.p2p", i)
		code, body = call(t, "POST", base+"/api/add-domain", `{"domain":"`+d+`","hash":"`+hashA+`"}`)
		if code != 200 {
			break
		}
		acked = append(acked, d)
	}
	want507 := func(what string, code int, body string) {
		t.Helper()
		if code != 507 || !strings.Contains(body, "disk is full") {
			t.Fatalf("%s on a full disk: %d %q, want 507 naming the full disk", what, code, body)
		}
	}
	want507("add-domain", code, body)
	code, body = call(t, "POST", base+"/api/add-domain", `{"domain":"again.p2p","hash":"`+hashA+`"}`)
	want507("add-domain again", code, body)
	// Each store may still have room in the last page of its file: a
	// few writes may go through before one is refused.
	untilRefused := func(what string, req func(i int) (int, string)) {
		t.Helper()
		for i := 0; i < 200; i++ {
			code, body := req(i)
			if code != 200 {
				want507(what, code, body)
				return
			}
		}
		t.Fatalf("%s: 200 writes on a full disk, none refused", what)
	}
	untilRefused("update-settings", func(i int) (int, string) {
		return call(t, "POST", base+"/api/update-settings", fmt.Sprintf(`{"settings":{"LOG_LEVEL":%q}}`, []string{"warn", "info"}[i%2]))
	})
	untilRefused("generate-cert", func(i int) (int, string) {
		return call(t, "POST", base+"/api/generate-cert", `{"domain":"before1.p2p"}`)
	})
	untilRefused("backups/create", func(i int) (int, string) {
		return call(t, "POST", base+"/api/backups/create", "")
	})

	// Reads go on.
	if got := resolvedNames(t, base); !containsAll(got, acked) {
		t.Fatalf("on a full disk resolved-domains lacks acknowledged claims: %v", got)
	}
	if code, body := call(t, "GET", base+"/api/settings", ""); code != 200 {
		t.Fatalf("settings read on a full disk: %d %s", code, body)
	}

	disk.Free()
	addDomain(t, base, "after.p2p", hashA)
	acked = append(acked, "after.p2p")
	mustJSON(t, "POST", base+"/api/update-settings", `{"settings":{"LOG_LEVEL":"warn"}}`, 200, nil)
	mustJSON(t, "POST", base+"/api/generate-cert", `{"domain":"before1.p2p"}`, 200, nil)
	mustJSON(t, "POST", base+"/api/backups/create", "", 200, nil)
	testutil.Eventually(t, 10e9, func() error {
		if got := resolvedNames(t, base); !containsAll(got, acked) {
			return fmt.Errorf("resolved: %v", got)
		}
		return nil
	})

	n.Stop()
	n = startConfig(t, cfg)
	base = "http://" + n.AdminAddr()
	testutil.Eventually(t, 10e9, func() error {
		if got := resolvedNames(t, base); !containsAll(got, acked) {
			return fmt.Errorf("after a restart %d resolved, %d acknowledged", len(got), len(acked))
		}
		return nil
	})
	t.Logf("%d acknowledged claims (%d taken on the filling disk), all there after a restart", len(acked), len(acked)-6)
}

func containsAll(have, want []string) bool {
	set := map[string]bool{}
	for _, h := range have {
		set[h] = true
	}
	for _, w := range want {
		if !set[w] {
			return false
		}
	}
	return true
}

// A node whose disk is full while its peer writes: the peer's ops cannot
// be stored, the node keeps answering reads, and once space is back it
// fetches what it missed and agrees with the writer.
func TestDiskFullPeerOps(t *testing.T) {
	disk := testutil.SmallDisk(t, "24m")
	master := newTestNode(t, t.TempDir())
	full := joinNode(t, master, func(c *Config) { c.Data = disk.Dir })
	mb, fb := "http://"+master.AdminAddr(), "http://"+full.AdminAddr()
	addDomain(t, mb, "first.p2p", hashA)
	testutil.Eventually(t, 10e9, func() error {
		if got := resolvedNames(t, fb); !containsAll(got, []string{"first.p2p"}) {
			return fmt.Errorf("resolved on the joiner: %v", got)
		}
		return nil
	})
	disk.Fill()
	var want []string
	readFailures, reads := 0, 0
	for i := 0; i < 30; i++ {
		d := fmt.Sprintf("while-full%02d.p2p", i)
		addDomain(t, mb, d, hashA)
		want = append(want, d)
		for j := 0; j < 3; j++ {
			reads++
			if code, _ := call(t, "GET", fb+"/api/resolved-domains", ""); code != 200 {
				readFailures++
			}
		}
	}
	if readFailures > 0 {
		t.Errorf("%d of %d reads on the node with the full disk failed", readFailures, reads)
	}
	disk.Free()
	freed := time.Now()
	testutil.Eventually(t, 30e9, func() error {
		if got := resolvedNames(t, fb); !containsAll(got, want) {
			return fmt.Errorf("after space is back the joiner has %d of %d", len(got), len(want)+1)
		}
		return nil
	})
	t.Logf("the joiner had every claim %v after space was back", time.Since(freed).Round(time.Millisecond))
}
