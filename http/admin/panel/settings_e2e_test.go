package panel_test

import (
	"testing"

	"peerdns/internal/testutil"
)

func TestPanelSettings(t *testing.T) {
	b := newBrowser(t)
	n := startNode(t, "")
	base := "http://" + n.AdminAddr()
	b.open(t, base, "settings")
	form := `#settings-form `

	// Every whitelisted setting, grouped by category, with its metadata.
	b.waitText(t, form, "Log level (LOG_LEVEL)")
	b.waitText(t, form, "Least severe level written")
	if got := eval[int](t, b, `document.querySelectorAll('#settings-form fieldset').length`); got < 3 {
		t.Fatalf("categories = %d", got)
	}

	// A change applied live.
	b.choose(t, form+`select[name=LOG_LEVEL]`, "debug")
	b.click(t, form+`button[type=submit]`)
	b.waitText(t, `#tab-settings .out.ok`, "Settings saved and applied")
	var s struct{ Settings map[string]string }
	testutil.MustJSON(t, "GET", base+"/api/settings", "", 200, &s)
	if s.Settings["LOG_LEVEL"] != "debug" {
		t.Fatalf("LOG_LEVEL = %q", s.Settings["LOG_LEVEL"])
	}

	// A bad value: the API's error next to the field.
	b.fill(t, form+`input[name=DNS_CACHE_SIZE]`, "-5")
	b.click(t, form+`button[type=submit]`)
	b.waitText(t, `[data-error-for="DNS_CACHE_SIZE"]`, "DNS_CACHE_SIZE")

	// A change that needs a restart: the notice names it. The update-settings
	// hint re-renders the form from the API.
	b.fill(t, form+`input[name=DNS_CACHE_SIZE]`, "10000")
	b.fill(t, form+`input[name=WS_MAX_CLIENTS]`, "100")
	b.click(t, form+`button[type=submit]`)
	b.waitText(t, `#tab-settings .notice`, "WS_MAX_CLIENTS")

	// A change made elsewhere shows up.
	testutil.MustJSON(t, "POST", base+"/api/update-settings", `{"settings":{"LOG_LEVEL":"warn"}}`, 200, nil)
	b.waitJS(t, `document.querySelector('#settings-form select[name=LOG_LEVEL]').value === 'warn'`)

	// Backups: create, then the row is listed.
	bk := `#tab-settings section[aria-label="Backups"] `
	b.clickText(t, bk, "Create backup")
	b.waitText(t, bk+`.out.ok`, "Backup written to")
	b.waitJS(t, `document.querySelector('`+bk+`table tbody tr')`)
	b.clickText(t, bk+`table`, "Details")
	b.waitText(t, bk, "ledger.db")
	b.screenshot(t, "settings")

	// Delete the backup (confirmed): the list empties.
	b.clickText(t, bk+`table`, "Delete")
	b.waitText(t, bk, "No backups yet")
	var list []any
	testutil.MustJSON(t, "GET", base+"/api/backups", "", 200, &list)
	if len(list) != 0 {
		t.Fatalf("backups after delete = %v", list)
	}
	b.noReload(t)
	b.checkErrors(t)
}
