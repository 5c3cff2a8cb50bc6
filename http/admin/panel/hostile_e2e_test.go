package panel_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"peerdns/internal/testutil"
)

// hostile is markup a plugin author or a peer could put in any string the
// panel shows: it must appear as text, never as elements or script.
const hostile = `"><img src=x onerror="document.title='PWN'"><svg onload="window.__pwn=1"><style>*{display:none}</style><script>window.__pwn=1</script>`

// TestPanelHostileManifestIsText installs a plugin whose manifest carries
// markup in its name, version, description, action label and description,
// and settings labels, descriptions and default: the Settings tab shows
// each as text, no element comes from it, nothing runs, and the page logs
// no error (a CSP violation would be one).
func TestPanelHostileManifestIsText(t *testing.T) {
	b := newBrowser(t)
	dir := t.TempDir()
	pdir := filepath.Join(dir, "plugins", "hostile")
	if err := os.MkdirAll(filepath.Join(pdir, "www"), 0o755); err != nil {
		t.Fatal(err)
	}
	m := map[string]any{
		"name": "evil" + hostile, "version": "1" + hostile, "description": "desc" + hostile + strings.Repeat("d", 400),
		"author": hostile, "homepage": "javascript:window.__pwn=1", "license": hostile,
		"domain": "hostile.p2p", "www": "www",
		"actions": []map[string]string{
			{"name": "act", "label": "label" + hostile, "description": "tip" + hostile, "icon": hostile},
			{"name": "long", "label": strings.Repeat("l", 300)},
		},
		"settings": map[string]any{
			"greet": map[string]any{"type": "string", "label": "L" + hostile, "description": "D" + hostile, "default": hostile},
			"flag":  map[string]any{"type": "boolean", "label": "B" + hostile, "default": true},
			"long":  map[string]any{"type": "string", "label": strings.Repeat("s", 300), "description": strings.Repeat("t", 300), "default": strings.Repeat("v", 300)},
		},
	}
	js, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(pdir, "plugin.json"), js, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(pdir, "www", "index.html"), []byte("<p>hostile</p>"), 0o644); err != nil {
		t.Fatal(err)
	}
	n := startNodeIn(t, dir, "")
	base := "http://" + n.AdminAddr()
	b.open(t, base, "settings")
	pl := `#tab-settings article[data-plugin="hostile.p2p"] `
	b.waitText(t, pl+`h3`, "loaded")

	if got := eval[string](t, b, `document.querySelector('`+pl+`h3').textContent`); !strings.HasPrefix(got, "evil"+hostile+" 1"+hostile) {
		t.Errorf("name and version shown as %q", got)
	}

	if got := eval[string](t, b, `document.querySelector('`+pl+`p.help').textContent`); !strings.Contains(got, "desc"+hostile) {
		t.Errorf("description shown as %q", got)
	}
	btn := `[...document.querySelectorAll('` + pl + `button')].find((x) => x.textContent.startsWith('label'))`
	if got := eval[string](t, b, btn+`?.textContent ?? ''`); got != "label"+hostile {
		t.Errorf("action label shown as %q", got)
	}
	if got := eval[string](t, b, btn+`?.title ?? ''`); got != "tip"+hostile {
		t.Errorf("action description (title) is %q", got)
	}
	if got := eval[string](t, b, `document.querySelector('`+pl+`input[name=greet]').value`); got != hostile {
		t.Errorf("setting default shown as %q", got)
	}
	if got := eval[string](t, b, `document.querySelector('`+pl+`form').textContent`); !strings.Contains(got, "L"+hostile) || !strings.Contains(got, "D"+hostile) || !strings.Contains(got, "B"+hostile) {
		t.Errorf("settings labels and descriptions shown as %q", got)
	}
	if got := eval[string](t, b, `[...document.querySelectorAll('#main img, #main style, #main script, #main iframe, #main a[href^="javascript"], #main svg:not(.chart)')].map((e) => e.outerHTML).join(' | ')`); got != "" {
		t.Errorf("elements from the manifest: %s", got)
	}
	if got := eval[string](t, b, `document.title`); got != "Settings · peerdns admin" {
		t.Errorf("title = %q: script from the manifest ran", got)
	}
	if eval[bool](t, b, `window.__pwn === 1`) {
		t.Error("script from the manifest ran")
	}
	checkHostile(t, b, "settings")
}

// TestPanelHostileDataIsText puts markup, a bidi override and strings
// too long for a line (a 253-character domain name, a 300-character TXT
// record) into what the node's API accepts from a client or a peer: a
// domain claim (the ledger, entries and certificates), a TXT record, a
// tunnel server's name and a failed request's message in the core log.
// Each tab shows them as text: no element comes from them, nothing
// runs, the page logs no error, and no table is wider than its card (a
// long string wraps or ends in an ellipsis with the full text in the
// title).
func TestPanelHostileDataIsText(t *testing.T) {
	b := newBrowser(t)
	n := startNode(t, "")
	base := "http://" + n.AdminAddr()
	q := func(s string) string {
		js, err := json.Marshal(s)
		if err != nil {
			t.Fatal(err)
		}
		return string(js)
	}
	long := strings.Repeat("a", 63) + "." + strings.Repeat("b", 63) + "." + strings.Repeat("c", 63) + ".p2p"
	testutil.AddDomain(t, base, long, testutil.Hash('a'))
	txt := hostile + "\u202e" + strings.Repeat("x", 300)
	for _, c := range []struct{ path, body string }{
		{"/api/add-local-dns", `{"name":"` + long + `","type":"TXT","ttl":300,"class":"IN","data":` + q(txt) + `}`},
		{"/api/tunnel-create", `{"name":` + q(`"><img src=x onerror="window.__pwn=1"><svg onload="window.__pwn=1">`) + `,"port":1,"host":"127.0.0.1"}`},
		{"/api/generate-cert", `{"domain":"` + long + `"}`},
		{"/api/tunnel-client-create", `{"domain":"` + long + `","key":"` + testutil.Hash('d') + `","port":` + fmt.Sprint(freePort(t, base, long)) + `,"protocol":"tcp"}`},
		{"/api/subnets", `{"subnets":[{"name":` + q(hostile+strings.Repeat("s", 200)) + `,"base":"127.78.0.0","cidr":24,"startIndex":2}]}`},
	} {
		if code, body := testutil.Call(t, "POST", base+c.path, c.body); code != 200 && code != 201 {
			t.Fatalf("%s: %d %s", c.path, code, body)
		}
	}
	// Rejected, and logged with the request's text.
	testutil.Call(t, "POST", base+"/api/add-domain", `{"domain":`+q("log"+hostile)+`,"hash":"`+testutil.Hash('b')+`"}`)

	b.open(t, base, "domains")
	b.waitText(t, `#tab-domains`, long)
	checkHostile(t, b, "domains")
	// The API's error, which quotes the rejected name, under the form.
	b.fill(t, `#tab-domains input[name=domain]`, strings.Repeat("e", 300)+".p2p")
	b.fill(t, `#tab-domains input[name=hash]`, testutil.Hash('c'))
	b.click(t, `#tab-domains form button[type=submit]`)
	b.waitText(t, `#tab-domains .out.error`, strings.Repeat("e", 300))
	checkHostile(t, b, "domains")
	b.exec(t, `document.querySelector('#tab-domains tr[data-domain="`+long+`"] button').click()`) // Details
	b.waitText(t, `#domain-details`, "Resolved hash")
	checkHostile(t, b, "domains")

	b.open(t, base, "entries")
	b.waitText(t, `#tab-entries`, long)
	checkHostile(t, b, "entries")

	b.open(t, base, "local-dns")
	b.waitText(t, `#tab-local-dns`, strings.Repeat("x", 100))
	if got := eval[string](t, b, `[...document.querySelectorAll('#tab-local-dns td')].map((td) => td.textContent).find((s) => s.includes('xxxx')) ?? ''`); got != txt {
		t.Errorf("TXT data shown as %q", got)
	}
	checkHostile(t, b, "local-dns")

	b.open(t, base, "host")
	b.waitText(t, `#tab-host`, `onerror="window.__pwn=1"`)
	b.waitText(t, `#tab-host`, long)
	checkHostile(t, b, "host")

	b.open(t, base, "certs")
	b.waitText(t, `#tab-certs`, long)
	checkHostile(t, b, "certs")

	b.open(t, base, "interfaces")
	b.waitText(t, `#tab-interfaces legend`, hostile)
	if got := eval[string](t, b, `document.querySelector('#tab-interfaces input[name=name]').value`); got != hostile+strings.Repeat("s", 200) {
		t.Errorf("subnet name shown as %q", got)
	}
	checkHostile(t, b, "interfaces")

	b.open(t, base, "logs")
	b.waitText(t, `#log-view`, "<img src=x onerror=")
	checkHostile(t, b, "logs")

	// An edge client's Host with a right-to-left override: the access
	// log quotes it as \u202e (as slog writes a rune that is not
	// printable), and the panel shows no raw override, so nothing turns
	// the rest of the line (status, upstream) around.
	httpAddr, _ := n.EdgeAddrs()
	c, err := net.Dial("tcp", httpAddr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := fmt.Fprintf(c, "GET /%s HTTP/1.1\r\nHost: evil\u202e.p2p\r\nUser-Agent: %s\r\n\r\n", strings.Repeat("p", 300), hostile); err != nil {
		t.Fatal(err)
	}
	if _, err := bufio.NewReader(c).ReadString('\n'); err != nil {
		t.Fatal(err)
	}
	b.choose(t, `#tab-logs select[name=channel]`, "httpProxy")
	b.waitText(t, `#log-view`, `host="evil\u202e.p2p"`)
	if eval[bool](t, b, `document.querySelector('#log-view').textContent.includes('\u202e')`) {
		t.Error("a log line holds a raw right-to-left override")
	}
	checkHostile(t, b, "logs")
}

// checkHostile checks the shown tab of b: no element came from the data
// (markup, or a link off the panel's origin, javascript: included),
// nothing ran, the page is no wider than the window, no table is wider
// than its card, and the page logged no error.
func checkHostile(t *testing.T, b *browser, tab string) {
	t.Helper()
	if got := eval[string](t, b, `[...document.querySelectorAll('#main img, #main style, #main script, #main iframe, #main object, #main embed, #main svg:not(.chart)')].map((e) => e.outerHTML).join(' | ')`); got != "" {
		t.Errorf("%s: elements from the data: %s", tab, got)
	}
	if got := eval[string](t, b, `[...document.querySelectorAll('#main a[href]')].filter((a) => new URL(a.href).origin !== location.origin).map((a) => a.outerHTML).join(' | ')`); got != "" {
		t.Errorf("%s: links off the panel: %s", tab, got)
	}
	if eval[bool](t, b, `window.__pwn === 1 || document.title === 'PWN'`) {
		t.Errorf("%s: script from the data ran", tab)
	}
	if got := eval[string](t, b, `document.documentElement.scrollWidth + ' > ' + document.documentElement.clientWidth`); eval[bool](t, b, `document.documentElement.scrollWidth > document.documentElement.clientWidth`) {
		t.Errorf("%s: the page is wider than the window: %s", tab, got)
	}
	if got := eval[string](t, b, `[...document.querySelectorAll('#tab-`+tab+` .table-wrap')].filter((w) => w.offsetParent && w.scrollWidth > w.clientWidth + 1).map((w) => (w.closest('section.card')?.getAttribute('aria-label') ?? '?') + ': ' + w.scrollWidth + ' > ' + w.clientWidth).join('; ')`); got != "" {
		t.Errorf("%s: a table is wider than its card (scrolled sideways to reach its columns): %s", tab, got)
	}
	b.screenshot(t, "hostile-"+tab)
	b.checkErrors(t)
}

// TestPanelPeerDataFits: what a peer tells about itself (its id, its
// addresses, the invite diagnostics' details) fits the peers tab of the
// node it joined.
func TestPanelPeerDataFits(t *testing.T) {
	b := newBrowser(t)
	a := startNode(t, "")
	base := "http://" + a.AdminAddr()
	var inv struct{ Invite string }
	testutil.MustJSON(t, "POST", base+"/api/invites", "", 200, &inv)
	other := startNode(t, inv.Invite)
	b.open(t, base, "peers")
	b.waitText(t, `#tab-peers`, other.ID())
	b.waitJS(t, `document.querySelectorAll('#tab-peers section[aria-label="Invite diagnostics"] td').length > 0`)
	checkHostile(t, b, "peers")
}
