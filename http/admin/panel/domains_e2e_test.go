package panel_test

import (
	"testing"

	"peerdns/internal/testutil"
)

func TestPanelDomains(t *testing.T) {
	b := newBrowser(t)
	n := startNode(t, "")
	base := "http://" + n.AdminAddr()
	b.open(t, base, "domains")

	// Claim through the form: the row appears, driven by update-database.
	b.fill(t, `#tab-domains input[name=domain]`, "shop.p2p")
	b.fill(t, `#tab-domains input[name=hash]`, testutil.Hash('a'))
	b.click(t, `#tab-domains form button[type=submit]`)
	b.waitText(t, `#tab-domains tr[data-domain="shop.p2p"]`, "resolved")
	b.waitText(t, `#tab-domains tr[data-domain="shop.p2p"]`, "1/1 (min 1)")

	// A claim made through the API shows up too: only the hint can bring it.
	testutil.AddDomain(t, base, "api.p2p", testutil.Hash('b'))
	b.waitText(t, `#tab-domains tr[data-domain="api.p2p"]`, "owner")

	// An API error is shown as the API wrote it.
	b.fill(t, `#tab-domains input[name=domain]`, "admin.p2p")
	b.fill(t, `#tab-domains input[name=hash]`, testutil.Hash('c'))
	b.click(t, `#tab-domains form button[type=submit]`)
	_, body := testutil.Call(t, "POST", base+"/api/add-domain", `{"domain":"admin.p2p","hash":"`+testutil.Hash('c')+`"}`)
	b.waitText(t, `#tab-domains .out.error`, body)

	b.screenshot(t, "domains")

	// Remove: the row goes away.
	b.clickText(t, `#tab-domains tr[data-domain="api.p2p"]`, "Remove")
	b.waitJS(t, `!document.querySelector('#tab-domains tr[data-domain="api.p2p"]')`)
	b.noReload(t)
	b.checkErrors(t)
}
