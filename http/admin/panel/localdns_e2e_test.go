package panel_test

import (
	"testing"
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
