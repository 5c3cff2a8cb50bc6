package panel_test

import (
	"fmt"
	"net"
	"strconv"
	"testing"
	"time"

	"peerdns/internal/testutil"
)

func TestPanelHost(t *testing.T) {
	b := newBrowser(t)
	n := startNode(t, "")
	base := "http://" + n.AdminAddr()
	b.open(t, base, "host")

	// Live stats come over the WebSocket (subscribe-stats, update-stats):
	// the request counter moves while the page stays put.
	b.waitJS(t, `document.querySelector('#live-requests')`)
	first := eval[string](t, b, `document.querySelector('#live-requests').innerText`)
	for range 3 {
		testutil.Call(t, "GET", base+"/api/status", "")
	}
	b.waitJS(t, `document.querySelector('#live-requests').innerText !== `+strconv.Quote(first))
	b.waitText(t, `#tab-host`, "healthy")
	// The history: the node keeps a sample a minute, the first at start.
	b.waitText(t, `#tab-host section[aria-label="History"]`, "samples (one a minute)")
	b.choose(t, `#tab-host select[name=minutes]`, "1440")
	b.waitText(t, `#tab-host section[aria-label="History"]`, "last 1440 minutes")

	// Create a tunnel server through the form: it appears running.
	sf := `#tab-host section[aria-label="Tunnel servers"] `
	b.fill(t, sf+`input[name=name]`, "web")
	b.fill(t, sf+`input[name=port]`, "18080")
	b.click(t, sf+`button[type=submit]`)
	b.waitText(t, sf+`.out`, "Created ")
	b.waitText(t, sf+`table`, "running")
	b.waitText(t, sf+`table`, "127.0.0.1:18080")
	key := eval[string](t, b, `document.querySelector('`+sf+`table .hash').title`)

	// A client for a domain of ours, through the form.
	testutil.AddDomain(t, base, "web.p2p", key)
	cf := `#tab-host section[aria-label="Tunnel clients"] `
	b.fill(t, cf+`input[name=domain]`, "web.p2p")
	b.fill(t, cf+`input[name=key]`, key)
	b.fill(t, cf+`input[name=port]`, strconv.Itoa(freePort(t, base, "web.p2p")))
	b.fill(t, cf+`input[name=serviceName]`, "www")
	b.click(t, cf+`button[type=submit]`)
	b.waitText(t, cf+`table`, "web.p2p_www")
	// Restart: the update-tunnel-clients hint redraws the row (a marked
	// row is replaced), running again.
	row := cf + `tr[data-id="web.p2p_www"]`
	b.exec(t, `document.querySelector('`+row+`').dataset.old = '1'`)
	b.clickText(t, row, "Restart")
	b.waitJS(t, `document.querySelector('`+row+`') && !document.querySelector('`+row+`').dataset.old`)
	b.waitText(t, row, "running")
	// The tunnel children table and chart follow the live stats.
	b.waitText(t, `#tab-host section[aria-label="Tunnel children"]`, "web.p2p_www")
	b.screenshot(t, "host")

	// Delete the server (confirm accepted): its row goes.
	b.clickText(t, sf+`table`, "Delete")
	b.waitText(t, sf, "No tunnel servers")
	b.noReload(t)
	b.checkErrors(t)
}

// freePort is a TCP port free right now on domain's local IP (other
// packages' tests run at the same time on the same loopback range).
func freePort(t *testing.T, base, domain string) int {
	t.Helper()
	var ip string
	testutil.Eventually(t, 10*time.Second, func() error {
		var maps []struct{ Domain, IP string }
		testutil.MustJSON(t, "GET", base+"/api/interfaces", "", 200, &maps)
		for _, m := range maps {
			if m.Domain == domain {
				ip = m.IP
				return nil
			}
		}
		return fmt.Errorf("%s has no IP yet", domain)
	})
	ln, err := net.Listen("tcp", net.JoinHostPort(ip, "0"))
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}
