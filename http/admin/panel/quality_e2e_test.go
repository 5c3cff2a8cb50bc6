package panel_test

import (
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"peerdns/cmd/peerdns/node"
	"peerdns/http/admin/panel"
	"peerdns/internal/testutil"
)

// TestPanelLabelsAndPhone: on every tab each control has a label, every
// control is reachable by keyboard (no negative tabindex), and at phone
// width nothing forces the page to scroll sideways.
func TestPanelLabelsAndPhone(t *testing.T) {
	b := newBrowser(t)
	n := startNode(t, "")
	base := "http://" + n.AdminAddr()
	testutil.AddDomain(t, base, "phone.p2p", testutil.Hash('a'))
	b.do(t, chromedp.EmulateViewport(390, 844, chromedp.EmulateScale(2)))
	for _, tab := range panel.Tabs {
		b.open(t, base, tab)
		unlabelled := eval[[]string](t, b, `[...document.querySelectorAll('#tab-`+tab+` input, #tab-`+tab+` select, #tab-`+tab+` textarea, #tab-`+tab+` button')]
			.filter((el) => !(el.labels && el.labels.length) && !el.getAttribute('aria-label') && !(el.textContent || '').trim() && el.type !== 'hidden')
			.map((el) => el.outerHTML.slice(0, 80))`)
		if len(unlabelled) > 0 {
			t.Errorf("%s: controls without a label: %q", tab, unlabelled)
		}
		if got := eval[int](t, b, `document.querySelectorAll('#tab-`+tab+` [tabindex^="-"]').length`); got != 0 {
			t.Errorf("%s: %d controls out of the keyboard order", tab, got)
		}
		over := eval[int](t, b, `document.documentElement.scrollWidth - window.innerWidth`)
		if over > 0 {
			t.Errorf("%s: page is %d px wider than a phone screen", tab, over)
		}
	}
	b.open(t, base, "domains")
	b.screenshot(t, "phone-domains")
	b.checkErrors(t)
}

// TestPanelReconnects: when the node goes away the page says so and
// retries; when it is back the page is live again and current.
func TestPanelReconnects(t *testing.T) {
	b := newBrowser(t)
	dir := t.TempDir()
	cfg := node.Config{
		Data: dir, AdminAddr: "127.0.0.1:0", DNSAddr: "127.0.0.1:0", HTTPAddr: "127.0.0.1:0",
		HTTPSAddr: "127.0.0.1:0", P2PAddr: "127.0.0.1:0", AdminDomain: "admin.p2p", LogLevel: "info",
		Upstream: []string{"127.0.0.1:1"},
	}
	n, err := node.Start(cfg, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	addr := n.AdminAddr()
	base := "http://" + addr
	b.open(t, base, "domains")
	n.Stop()
	b.waitText(t, `#conn`, "reconnecting in")

	// The same node back on the same address, with a domain claimed while
	// the page was away.
	cfg.AdminAddr = addr
	var n2 *node.Node
	testutil.Eventually(t, 10*time.Second, func() error {
		var err error
		n2, err = node.Start(cfg, io.Discard)
		return err
	})
	t.Cleanup(n2.Stop)
	testutil.Eventually(t, 10*time.Second, func() error {
		if code, body := testutil.Call(t, "GET", base+"/api/health?probe=readiness", ""); code != 200 {
			return fmt.Errorf("not ready: %s", body)
		}
		return nil
	})
	testutil.AddDomain(t, base, "back.p2p", testutil.Hash('d'))
	// Backoff reaches at most 30 s; the first retries come within seconds.
	b.waitJS(t, `document.querySelector('#conn').dataset.state === 'open'`)
	b.waitText(t, `#tab-domains`, "back.p2p")
	b.noReload(t)
}

// TestPanelCSPEnforced: the browser applies the panel's CSP: an inline
// script added at run time does not run, and the violation is reported
// (so the other tests, which fail on any reported violation, would see
// one of the panel's own).
func TestPanelCSPEnforced(t *testing.T) {
	b := newBrowser(t)
	n := startNode(t, "")
	b.open(t, "http://"+n.AdminAddr(), "domains")
	b.checkErrors(t)
	ran := eval[bool](t, b, `(() => { const s = document.createElement('script'); s.textContent = 'window.__inline = true'; document.body.append(s); return window.__inline === true; })()`)
	if ran {
		t.Fatal("an inline script ran under the panel's CSP")
	}
	testutil.Eventually(t, 10*time.Second, func() error {
		b.mu.Lock()
		defer b.mu.Unlock()
		for _, e := range b.errors {
			if strings.Contains(e, "Content Security Policy") {
				return nil
			}
		}
		return fmt.Errorf("no CSP violation reported: %q", b.errors)
	})
}
