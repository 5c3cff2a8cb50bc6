package panel_test

import (
	"fmt"
	"testing"
	"time"

	"peerdns/cmd/peerdns/node"
	"peerdns/dns/dnstest"
	"peerdns/internal/testutil"
)

func TestPanelLocalDNS(t *testing.T) {
	b := newBrowser(t)
	n := startNode(t, "")
	base := "http://" + n.AdminAddr()
	b.open(t, base, "local-dns")
	ed := `#tab-local-dns section[aria-label="Record editor"] `
	recs := `#tab-local-dns section[aria-label="Records"]`

	// An A record through the form.
	b.fill(t, ed+`input[name=name]`, "printer.home")
	b.fill(t, ed+`input[name=data]`, "192.0.2.7")
	b.click(t, ed+`button[type=submit]`)
	b.waitText(t, recs, "printer.home")
	b.waitText(t, recs, "192.0.2.7")

	// MX has its own fields.
	b.choose(t, ed+`select[name=type]`, "MX")
	b.waitJS(t, `document.querySelector('`+ed+`input[name=exchange]') && !document.querySelector('`+ed+`input[name=data]')`)
	b.fill(t, ed+`input[name=name]`, "mail.home")
	b.fill(t, ed+`input[name=preference]`, "10")
	b.fill(t, ed+`input[name=exchange]`, "mx.home")
	b.click(t, ed+`button[type=submit]`)
	b.waitText(t, recs, "10 mx.home")

	// Edit the A record: the form fills in, Save updates the row.
	b.clickText(t, recs+` tr:nth-child(1)`, "Edit")
	b.waitText(t, ed+`h3`, "Edit record #0")
	b.fill(t, ed+`input[name=data]`, "192.0.2.8")
	b.click(t, ed+`button[type=submit]`)
	b.waitText(t, recs, "192.0.2.8")

	// A bad record: the API's message under the form.
	b.fill(t, ed+`input[name=name]`, "bad.home")
	b.fill(t, ed+`input[name=data]`, "not-an-ip")
	b.click(t, ed+`button[type=submit]`)
	b.waitJS(t, `document.querySelector('`+ed+`.out.error')?.innerText.length > 0`)
	b.exec(t, `document.querySelector('`+ed+`button[type=button]').click()`) // cancel edit mode if any

	// dns-lookup answers from the node's DNS.
	lk := `#tab-local-dns section[aria-label="DNS lookup"] `
	b.fill(t, lk+`input[name=domain]`, "printer.home")
	b.click(t, lk+`button[type=submit]`)
	b.waitText(t, lk+`pre`, "192.0.2.8")
	// Clear a domain's cached resolution.
	sc := `#tab-local-dns section[aria-label="Selector cache"] `
	b.fill(t, sc+`input[name=domain]`, "printer.home")
	b.click(t, sc+`button[type=submit]`)
	b.waitText(t, sc+`.out.ok`, "OK")
	b.screenshot(t, "local-dns")

	// Delete the MX record.
	b.clickText(t, recs+` tr:nth-child(2)`, "Delete")
	b.waitJS(t, `!document.querySelector('`+recs+`').innerText.includes('mx.home')`)
	b.noReload(t)
	b.checkErrors(t)
}

// TestPanelDNSConflict: a p2p domain that also exists in public DNS is a
// DNS conflict; the panel shows it and sets the version preference.
func TestPanelDNSConflict(t *testing.T) {
	up := dnstest.Start(t, map[string]string{"dual.p2p": "203.0.113.5"})
	b := newBrowser(t)
	n := startNodeIn(t, t.TempDir(), "", func(c *node.Config) { c.Upstream = []string{up.Addr} })
	base := "http://" + n.AdminAddr()
	b.open(t, base, "local-dns")
	testutil.AddDomain(t, base, "dual.p2p", testutil.Hash('a'))
	cf := `#tab-local-dns section[aria-label="DNS conflicts (p2p or public)"] `
	b.waitText(t, cf+`table`, "dual.p2p")
	b.waitText(t, cf+`table`, "203.0.113.5")
	b.choose(t, cf+`select[name=version]`, "public")
	testutil.Eventually(t, 10*time.Second, func() error {
		var ld struct {
			Conflicts []struct{ Domain, Version string }
		}
		testutil.MustJSON(t, "GET", base+"/api/local-dns", "", 200, &ld)
		if len(ld.Conflicts) != 1 || ld.Conflicts[0].Version != "public" {
			return fmt.Errorf("conflicts = %+v", ld.Conflicts)
		}
		return nil
	})
	// The tab shows the preference in the selector cache. Wait for it: the
	// refresh adds a row above the lookup form, and a click aimed before
	// that layout shift lands beside the button (seen in CI).
	b.waitText(t, `#tab-local-dns section[aria-label="Selector cache"] table`, "public")
	// The DNS lookup in the same tab now answers the public address.
	lk := `#tab-local-dns section[aria-label="DNS lookup"] `
	b.fill(t, lk+`input[name=domain]`, "dual.p2p")
	b.click(t, lk+`button[type=submit]`)
	b.waitText(t, lk+`pre`, "203.0.113.5")
	b.noReload(t)
	b.checkErrors(t)
}
