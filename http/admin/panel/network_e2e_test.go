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

	// A gives a domain a service; B subscribes to it from its panel.
	var srv struct{ ID string }
	testutil.MustJSON(t, "POST", baseA+"/api/tunnel-create", `{"name":"svc","port":18095}`, 200, &srv)
	// The key is known once the server runs.
	var key string
	testutil.Eventually(t, 10*time.Second, func() error {
		var servers []struct {
			ID   string
			Info struct{ URL string }
		}
		testutil.MustJSON(t, "GET", baseA+"/api/tunnel-servers", "", 200, &servers)
		if len(servers) != 1 || servers[0].Info.URL == "" {
			return fmt.Errorf("servers = %+v", servers)
		}
		key = servers[0].Info.URL
		return nil
	})
	testutil.AddDomain(t, baseA, "svc.p2p", key)
	svcRow := `#tab-domains tr[data-domain="svc.p2p"]`
	b.waitText(t, svcRow, "resolved")
	testutil.MustJSON(t, "POST", baseA+"/api/tunnel-client-create", `{"domain":"svc.p2p","key":"`+key+`","port":18096,"serviceName":"web"}`, 200, nil)
	b.exec(t, `document.querySelector('`+svcRow+` button').click()`) // Details
	b.waitText(t, `#domain-details`, "web")
	b.clickText(t, `#domain-details table`, "Subscribe")
	subs := `#tab-domains section[aria-label="Service subscriptions"] `
	b.waitText(t, subs+`table`, "svc.p2p")
	b.waitText(t, `#domain-details`, "Unsubscribe")
	var got []struct{ Domain, ServiceName string }
	testutil.MustJSON(t, "GET", baseB+"/api/service-subscriptions", "", 200, &got)
	if len(got) != 1 || got[0].ServiceName != "web" {
		t.Fatalf("B's subscriptions = %+v", got)
	}
	// Subscribe-all for the domain, then off again.
	b.clickText(t, `#domain-details`, "Subscribe all")
	b.waitText(t, `#domain-details`, "Unsubscribe all")
	b.waitText(t, `#domain-details`, "Unsubscribe all")
	var all []string
	testutil.MustJSON(t, "GET", baseB+"/api/subscribe-all-domains", "", 200, &all)
	if len(all) != 1 || all[0] != "svc.p2p" {
		t.Fatalf("subscribe-all domains = %q", all)
	}
	b.clickText(t, `#domain-details`, "Unsubscribe all")
	b.waitText(t, subs, "No subscriptions")

	// B claims it too, with another hash: B's panel shows the conflict,
	// and B chooses its own claim for itself.
	b.fill(t, `#tab-domains input[name=domain]`, "shared.p2p")
	b.fill(t, `#tab-domains input[name=hash]`, testutil.Hash('f'))
	b.click(t, `#tab-domains form button[type=submit]`)
	b.waitText(t, row, "conflict")
	conflicts := `#tab-domains section[aria-label="P2P conflicts"] `
	b.waitText(t, conflicts+`table`, "shared.p2p")
	b.choose(t, conflicts+`select[name=preference]`, "local")
	testutil.Eventually(t, 10*time.Second, func() error {
		var c struct {
			Conflicts []struct{ Domain, HashPreference string }
		}
		testutil.MustJSON(t, "GET", baseB+"/api/p2p-domain-conflicts", "", 200, &c)
		if len(c.Conflicts) != 1 || c.Conflicts[0].HashPreference != "local" {
			return fmt.Errorf("conflicts = %+v", c.Conflicts)
		}
		return nil
	})
	// The hint (update-local-dns) re-renders the table with the choice.
	b.waitJS(t, `document.querySelector('`+conflicts+`select[name=preference]').value === 'local'`)
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
