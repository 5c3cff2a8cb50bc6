package main

import (
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	"peerdns/internal/testutil"
)

// A peer process that freezes (SIGSTOP: its connection stays open, it
// just stops answering) leaves the active peers the quorum counts within
// the failure-detection bound (peer.Deps.StaleAfter, 2.5 s)
// and is back soon after it resumes. The deadlines below leave room for
// a loaded CI machine; the times measured are logged.
func TestFrozenPeerLeavesQuorum(t *testing.T) {
	_, addrA := startProcess(t, t.TempDir())
	baseA := "http://" + addrA
	testutil.Eventually(t, 10*time.Second, func() error {
		if code, body := testutil.Call(t, "GET", baseA+"/api/health?probe=readiness", ""); code != 200 {
			return fmt.Errorf("readiness %d %s", code, body)
		}
		return nil
	})
	var out, errOut strings.Builder
	if code := run([]string{"invite", "--admin-addr", addrA}, func(string) string { return "" }, &out, &errOut); code != 0 {
		t.Fatalf("invite exit %d: %s", code, errOut.String())
	}
	cmdB, _ := startProcess(t, t.TempDir(), "--join", strings.TrimSpace(out.String()))
	testutil.AddDomain(t, baseA, "live.p2p", testutil.Hash('f'))
	active := func(want int) func() error {
		return func() error {
			var cs struct {
				ActivePeers int `json:"activePeers"`
			}
			testutil.MustJSON(t, "GET", baseA+"/api/consensus/live.p2p", "", 200, &cs)
			if cs.ActivePeers != want {
				return fmt.Errorf("active peers %d, want %d", cs.ActivePeers, want)
			}
			return nil
		}
	}
	testutil.Eventually(t, 30*time.Second, active(2))

	if err := cmdB.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmdB.Process.Signal(syscall.SIGCONT) }()
	frozen := time.Now()
	testutil.Eventually(t, 6*time.Second, active(1))
	t.Logf("frozen peer left the quorum after %v", time.Since(frozen).Round(10*time.Millisecond))

	if err := cmdB.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	resumed := time.Now()
	testutil.Eventually(t, 5*time.Second, active(2))
	t.Logf("resumed peer was back after %v", time.Since(resumed).Round(10*time.Millisecond))
}
