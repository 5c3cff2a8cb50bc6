package panel_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	cdpbrowser "github.com/chromedp/cdproto/browser"
	"github.com/chromedp/chromedp"

	"peerdns/internal/testutil"
)

func TestPanelEntries(t *testing.T) {
	b := newBrowser(t)
	n := startNode(t, "")
	base := "http://" + n.AdminAddr()
	b.open(t, base, "entries")
	tab := `#tab-entries`
	testutil.AddDomain(t, base, "ledger.p2p", testutil.Hash('a'))
	b.waitText(t, tab+` table`, "claim:ledger.p2p:"+n.ID())
	b.waitText(t, tab+` table`, "vote:ledger.p2p:")

	// The kind picker and the filter.
	b.choose(t, tab+` select[name=kind]`, "claim")
	b.waitJS(t, `!document.querySelector('#tab-entries table').innerText.includes('vote:')`)
	b.choose(t, tab+` select[name=kind]`, "")
	testutil.AddDomain(t, base, "other.p2p", testutil.Hash('b'))
	b.waitText(t, tab+` table`, "other.p2p")
	b.fill(t, tab+` input[name=filter]`, "other")
	b.waitJS(t, `!document.querySelector('#tab-entries table').innerText.includes('ledger.p2p')`)
	b.screenshot(t, "entries")
	b.noReload(t)
	b.checkErrors(t)
}

func TestPanelPeers(t *testing.T) {
	b := newBrowser(t)
	n := startNode(t, "")
	base := "http://" + n.AdminAddr()
	b.open(t, base, "peers")
	tab := `#tab-peers `
	b.waitText(t, tab, "master")
	b.waitText(t, tab, "Recommendations")
	b.clickText(t, tab, "Create invite")
	b.waitJS(t, `document.querySelector('#invite-text')?.value.length > 40`)
	invite := eval[string](t, b, `document.querySelector('#invite-text').value`)
	b.waitText(t, tab, "One use; expires")

	// The copy button puts the invite on the clipboard (granted to the
	// page, as a user's click would).
	for _, perm := range []string{"clipboard-write", "clipboard-read"} {
		if _, err := chromedp.CallBrowser(b.ctx, cdpbrowser.SetPermission, cdpbrowser.SetPermissionParams{
			Permission: &cdpbrowser.PermissionDescriptor{Name: perm, AllowWithoutSanitization: true}, Setting: cdpbrowser.PermissionSettingGranted, Origin: base,
		}); err != nil {
			t.Fatalf("grant %s: %v", perm, err)
		}
	}
	b.click(t, `#copy-invite`)
	b.waitText(t, tab+`section[aria-label="Invite a node"]`, "Copied to the clipboard")
	if got := evalAwait[string](t, b, `navigator.clipboard.readText()`); got != invite {
		t.Fatalf("clipboard = %q, want the invite", got)
	}
	b.screenshot(t, "peers")

	// The invite works: a node joins with it and shows up in the list,
	// driven by update-peers.
	other := startNode(t, invite)
	b.waitText(t, tab+`section[aria-label="Connected peers"]`, other.ID())
	b.noReload(t)
	b.checkErrors(t)
}

func TestPanelCerts(t *testing.T) {
	trust := t.TempDir()
	t.Setenv("PEERDNS_CA_TRUST_DIR", trust)
	b := newBrowser(t)
	t.Setenv("HOME", t.TempDir()) // install-ca also fills NSS stores under HOME: none of the machine's
	n := startNode(t, "")
	base := "http://" + n.AdminAddr()
	b.open(t, base, "certs")
	tab := `#tab-certs `
	testutil.AddDomain(t, base, "secure.p2p", testutil.Hash('a'))
	b.fill(t, tab+`input[name=domain]`, "secure.p2p")
	b.click(t, tab+`form button[type=submit]`)
	b.waitText(t, tab+`table`, "secure.p2p")
	b.clickText(t, tab+`table`, "Details")
	b.waitText(t, tab+`pre`, "BEGIN CERTIFICATE")
	b.waitText(t, tab, "Trusting this root allows: only names under p2p")

	// The root download link serves the root certificate.
	href := eval[string](t, b, `document.querySelector('#tab-certs a[download]').href`)
	code, pem := testutil.Call(t, "GET", href, "")
	if code != 200 || !strings.HasPrefix(pem, "-----BEGIN CERTIFICATE-----") || pem != string(n.CA().RootPEM()) {
		t.Fatalf("GET %s = %d %.60q", href, code, pem)
	}
	b.screenshot(t, "certs")

	// A new root: every certificate is re-issued under it, and the
	// download serves the new one.
	b.clickText(t, tab, "Regenerate root CA")
	b.waitText(t, tab+`section[aria-label="Root CA"] .out.ok`, "OK")
	if _, pem2 := testutil.Call(t, "GET", href, ""); pem2 == pem || !strings.HasPrefix(pem2, "-----BEGIN CERTIFICATE-----") {
		t.Fatal("the root download did not change with a new root")
	}
	// Installing the root: into a folder of the test's (the node honours
	// PEERDNS_CA_TRUST_DIR), never the machine's own trust store.
	b.clickText(t, tab, "Install root (system store and browsers)")
	b.waitText(t, tab+`section[aria-label="Root CA"] .out.ok`, "OK")
	if got, err := os.ReadFile(filepath.Join(trust, "peerdns-root.crt")); err != nil || string(got) != string(n.CA().RootPEM()) {
		t.Fatalf("installed root: %v", err)
	}

	// Delete (confirm accepted): the list empties through update-certs.
	b.clickText(t, tab+`table`, "Delete")
	b.waitText(t, tab, "No certificates yet")
	b.noReload(t)
	b.checkErrors(t)
}

func TestPanelInterfaces(t *testing.T) {
	b := newBrowser(t)
	n := startNode(t, "")
	base := "http://" + n.AdminAddr()
	b.open(t, base, "interfaces")
	tab := `#tab-interfaces `
	testutil.AddDomain(t, base, "ip.p2p", testutil.Hash('a'))
	b.waitText(t, tab+`table`, "ip.p2p")
	b.waitText(t, tab+`table`, "127.77.0.")

	// A bad subnet: the error is shown next to that subnet.
	b.clickText(t, tab, "Add subnet")
	b.fill(t, tab+`fieldset.subnet:nth-child(2) input[name=base]`, "198.51.100.0")
	b.fill(t, tab+`fieldset.subnet:nth-child(2) input[name=cidr]`, "40")
	b.click(t, `#subnets-form button[type=submit]`)
	b.waitText(t, tab+`fieldset.subnet:nth-child(2) .field-error`, "subnets[1].cidr 40 must be between 1 and 32")
	b.waitJS(t, `document.querySelector('#tab-interfaces fieldset.subnet:nth-child(2) input[name=cidr]').getAttribute('aria-invalid') === 'true'`)
	if got := eval[string](t, b, `document.querySelector('#tab-interfaces fieldset.subnet:nth-child(1) .field-error').innerText`); got != "" {
		t.Fatalf("error shown on the first subnet: %q", got)
	}
	// Fixed: saved, with the restart notice.
	b.fill(t, tab+`fieldset.subnet:nth-child(2) input[name=cidr]`, "24")
	b.click(t, `#subnets-form button[type=submit]`)
	b.waitText(t, tab+`.notice`, "restart the node")
	var sn struct{ Subnets []struct{ Base string } }
	testutil.MustJSON(t, "GET", base+"/api/subnets", "", 200, &sn)
	if len(sn.Subnets) != 2 || sn.Subnets[1].Base != "198.51.100.0" {
		t.Fatalf("subnets = %+v", sn)
	}
	b.screenshot(t, "interfaces")
	b.noReload(t)
	b.checkErrors(t)
}
