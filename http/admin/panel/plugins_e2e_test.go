package panel_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"peerdns/internal/testutil"
)

// installNotes builds examples/plugins/notes into DATA/plugins/notes.
func installNotes(t *testing.T, dataDir string) {
	t.Helper()
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("the go tool is not on PATH (needed to build examples/plugins/notes)")
	}
	dst := filepath.Join(dataDir, "plugins", "notes")
	if err := os.MkdirAll(filepath.Join(dst, "www"), 0o755); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(goTool, "build", "-o", filepath.Join(dst, "notes"), "peerdns/examples/plugins/notes").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v: %s", err, out)
	}
	src := filepath.Join("..", "..", "..", "examples", "plugins", "notes")
	for _, f := range []string{"plugin.json", filepath.Join("www", "index.html")} {
		b, err := os.ReadFile(filepath.Join(src, f))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dst, f), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func TestPanelPluginsAndDiagnostics(t *testing.T) {
	b := newBrowser(t)
	dir := t.TempDir()
	installNotes(t, dir)
	n := startNodeIn(t, dir, "")
	base := "http://" + n.AdminAddr()
	b.open(t, base, "settings")
	pl := `#tab-settings article[data-plugin="notes.p2p"] `
	b.waitText(t, pl+`h3`, "loaded")

	// An action: its result is shown.
	testutil.Eventually(t, 15*time.Second, func() error {
		b.clickText(t, pl, "Count notes")
		b.waitJS(t, `!document.querySelector('`+pl+`button[title="How many notes are stored."]').disabled`)
		if txt := eval[string](t, b, `document.querySelector('`+pl+`.out').innerText`); !strings.Contains(txt, "Action count done") {
			return fmt.Errorf("action: %q", txt)
		}
		return nil
	})
	b.waitJS(t, `!document.querySelector('`+pl+`pre').hidden`)

	// A plugin setting, saved through the API.
	b.fill(t, pl+`input[name=greeting]`, "bonjour")
	b.click(t, pl+`button[type=submit]`)
	b.waitJS(t, `document.querySelector('#tab-settings article[data-plugin="notes.p2p"] input[name=greeting]')?.value === 'bonjour'`)
	testutil.Eventually(t, 10*time.Second, func() error {
		var p struct {
			Settings map[string]struct{ Value any }
		}
		testutil.MustJSON(t, "GET", base+"/api/plugins/notes.p2p", "", 200, &p)
		if p.Settings["greeting"].Value != "bonjour" {
			return fmt.Errorf("greeting = %v", p.Settings["greeting"].Value)
		}
		return nil
	})

	// Stop and start: the status follows update-plugins.
	b.clickText(t, pl, "Stop")
	b.waitText(t, pl+`h3`, "stopped")
	b.clickText(t, pl, "Start")
	b.waitText(t, pl+`h3`, "loaded")

	// Diagnostics: a connection test answers in the page; ping streams its
	// output, or the API's error when ping is not installed.
	testutil.AddDomain(t, base, "diag.p2p", testutil.Hash('a'))
	dg := `#tab-settings section[aria-label="Diagnostics"] `
	b.fill(t, dg+`input[name=domain]`, "diag.p2p")
	b.fill(t, dg+`input[name=port]`, "1")
	b.clickText(t, dg, "Test connection")
	b.waitText(t, dg, "Failed (127.77.0.")
	b.fill(t, dg+`input[name=target]`, "127.0.0.1")
	b.fill(t, dg+`input[name=count]`, "1")
	b.clickText(t, dg, "Ping")
	b.waitJS(t, `document.querySelector('#diag-output').innerText.includes('[exit') || document.querySelector('`+dg+`.out.error')?.innerText.includes('ping')`)
	b.exec(t, `document.querySelector('`+pl+`').scrollIntoView()`)
	b.noReload(t)
	b.checkErrors(t)
}

// TestPanelRestoreReloads: restoring a backup from the settings tab
// (confirmed) resets the node; system-reset reloads the page once the
// node is back, and the page shows the restored state.
func TestPanelRestoreReloads(t *testing.T) {
	b := newBrowser(t)
	n := startNode(t, "")
	base := "http://" + n.AdminAddr()
	b.open(t, base, "settings")
	bk := `#tab-settings section[aria-label="Backups"] `
	b.clickText(t, bk, "Create backup")
	b.waitJS(t, `document.querySelector('`+bk+`table tbody tr')`)
	name := eval[string](t, b, `document.querySelector('`+bk+`table tbody tr td').innerText`)
	testutil.AddDomain(t, base, "after.p2p", testutil.Hash('a'))

	b.clickText(t, bk+`table`, "Restore")
	// The reload: the marker is gone and the page is live again.
	b.waitJS(t, `window.__noReload === undefined && document.querySelector('#conn')?.dataset.state === 'open'`)
	testutil.Eventually(t, 20*time.Second, func() error {
		var ds []struct{ Domain string }
		testutil.MustJSON(t, "GET", base+"/api/resolved-domains", "", 200, &ds)
		for _, d := range ds {
			if d.Domain == "after.p2p" {
				return fmt.Errorf("after.p2p still there after restoring %s", name)
			}
		}
		return nil
	})
	// A full load of the domains tab (a query makes it a new document: a
	// hash-only change stays in the reloaded page, and in CI once its
	// refresh never came).
	b.do(t, chromedp.Navigate(base+"/?after-restore#domains"))
	b.waitJS(t, `(document.body.dataset.refreshed || '').startsWith('domains:')`)
	if eval[bool](t, b, `document.querySelector('#tab-domains').innerText.includes('after.p2p')`) {
		t.Fatal("the panel still lists after.p2p")
	}
	b.checkErrors(t)
}
