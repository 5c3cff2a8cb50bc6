package panel_test

import (
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"peerdns/internal/testutil"
)

// TestPanelTwoNodes: a claim made in one node's panel shows up in the
// other node's panel, carried by the ledger and that node's WebSocket.
func TestPanelTwoNodes(t *testing.T) {
	b := newBrowser(t)
	a := startNode(t, "")
	baseA := "http://" + a.AdminAddr()
	var inv struct{ Invite string }
	testutil.MustJSON(t, "POST", baseA+"/api/invites", "", 200, &inv)
	bn := startNode(t, inv.Invite)
	baseB := "http://" + bn.AdminAddr()
	// Joined and a writer on both sides before claiming.
	testutil.Eventually(t, 30*time.Second, func() error {
		for _, base := range []string{baseA, baseB} {
			var m struct{ Sidecar struct{ Writable bool } }
			testutil.MustJSON(t, "GET", base+"/api/consensus/metrics", "", 200, &m)
			var peers []string
			testutil.MustJSON(t, "GET", base+"/api/peers", "", 200, &peers)
			if !m.Sidecar.Writable || len(peers) != 1 {
				return fmt.Errorf("%s: writable %v, %d peers", base, m.Sidecar.Writable, len(peers))
			}
		}
		return nil
	})

	b.open(t, baseB, "domains")
	other := b.newTab(t)
	other.open(t, baseA, "domains")

	// Claim in A's panel.
	other.fill(t, `#tab-domains input[name=domain]`, "shared.p2p")
	other.fill(t, `#tab-domains input[name=hash]`, testutil.Hash('e'))
	other.click(t, `#tab-domains form button[type=submit]`)
	other.waitText(t, `#tab-domains tr[data-domain="shared.p2p"]`, "owner")

	// B's panel shows it resolved to A, with both votes, without a reload.
	row := `#tab-domains tr[data-domain="shared.p2p"]`
	b.waitText(t, row, "resolved")
	b.waitText(t, row, "2/2 (min 2)")
	if got := eval[string](t, b, `document.querySelector('`+row+`').innerText`); strings.Contains(got, "owner") {
		t.Fatalf("B's row says B owns it: %q", got)
	}
	b.exec(t, `document.querySelector('`+row+` button').click()`) // Details
	b.waitText(t, `#domain-details`, a.ID())
	b.screenshot(t, "domains-two-nodes")
	b.noReload(t)
	other.noReload(t)
	b.checkErrors(t)
	other.checkErrors(t)
}

// TestPanelThroughEdge opens the panel at the admin domain through the
// edge proxy (Chromium maps admin.p2p to loopback): files, API and the
// WebSocket all pass the proxy.
func TestPanelThroughEdge(t *testing.T) {
	b := newBrowser(t, chromedp.Flag("host-resolver-rules", "MAP admin.p2p 127.0.0.1"))
	n := startNode(t, "")
	httpAddr, _ := n.EdgeAddrs()
	_, port, err := net.SplitHostPort(httpAddr)
	if err != nil {
		t.Fatal(err)
	}
	base := "http://admin.p2p:" + port
	b.open(t, base, "domains")
	b.fill(t, `#tab-domains input[name=domain]`, "edge.p2p")
	b.fill(t, `#tab-domains input[name=hash]`, testutil.Hash('f'))
	b.click(t, `#tab-domains form button[type=submit]`)
	b.waitText(t, `#tab-domains tr[data-domain="edge.p2p"]`, "resolved")
	b.noReload(t)
	b.checkErrors(t)
}
