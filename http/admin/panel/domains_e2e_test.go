package panel_test

import (
	"fmt"
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

	// Paging: 60 more domains make two pages of 50; the filter narrows.
	for i := range 60 {
		testutil.AddDomain(t, base, fmt.Sprintf("page%02d.p2p", i), testutil.Hash('d'))
	}
	pager := `#tab-domains section[aria-label="Resolved domains"] .pager`
	b.waitText(t, pager, "1–50 of 64")
	if got := eval[int](t, b, `document.querySelectorAll('#tab-domains section[aria-label="Resolved domains"] tbody tr').length`); got != 50 {
		t.Fatalf("rows on page 1 = %d", got)
	}
	b.clickText(t, pager, "Next ›")
	b.waitText(t, pager, "51–64 of 64")
	b.fill(t, pager+` input[name=filter]`, "page5")
	b.waitText(t, pager, "1–10 of 10 (filtered from 64)")

	// Remove: the row goes away.
	b.fill(t, pager+` input[name=filter]`, "api.p2p")
	b.clickText(t, `#tab-domains tr[data-domain="api.p2p"]`, "Remove")
	b.waitJS(t, `!document.querySelector('#tab-domains tr[data-domain="api.p2p"]')`)
	b.noReload(t)
	b.checkErrors(t)
}
