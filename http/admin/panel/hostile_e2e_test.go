package panel_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
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
		"name": "evil" + hostile, "version": "1" + hostile, "description": "desc" + hostile,
		"author": hostile, "homepage": "javascript:window.__pwn=1", "license": hostile,
		"domain": "hostile.p2p", "www": "www",
		"actions": []map[string]string{{"name": "act", "label": "label" + hostile, "description": "tip" + hostile, "icon": hostile}},
		"settings": map[string]any{
			"greet": map[string]any{"type": "string", "label": "L" + hostile, "description": "D" + hostile, "default": hostile},
			"flag":  map[string]any{"type": "boolean", "label": "B" + hostile, "default": true},
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
	b.checkErrors(t)
}
