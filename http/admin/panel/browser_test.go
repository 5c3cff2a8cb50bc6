package panel_test

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	cdplog "github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"

	"peerdns/cmd/peerdns/node"
	"peerdns/internal/testutil"
)

// The end-to-end tests drive the real panel in headless Chromium against
// real nodes started in this process.

// chromiumPath finds Debian's chromium (or another Chrome).
func chromiumPath() string {
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	return ""
}

// browser is one headless Chromium with a tab; errors are the page's
// uncaught exceptions and console errors, which fail the test.
type browser struct {
	ctx    context.Context
	mu     sync.Mutex
	errors []string
}

func newBrowser(t *testing.T, flags ...chromedp.ExecAllocatorOption) *browser {
	t.Helper()
	exe := chromiumPath()
	if exe == "" {
		t.Skip("chromium not found: apt-get install chromium")
	}
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(exe),
		chromedp.Flag("headless", true),
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.Flag("disable-quic", true),
		chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck,
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1280, 900),
	}
	actx, cancelA := chromedp.NewExecAllocator(context.Background(), append(opts, flags...)...)
	t.Cleanup(cancelA)
	return attach(t, actx)
}

// newTab opens a second tab in b's browser.
func (b *browser) newTab(t *testing.T) *browser {
	t.Helper()
	return attach(t, b.ctx)
}

// attach opens a tab (and the browser, for the first) under parent and
// listens to its errors and dialogs.
func attach(t *testing.T, parent context.Context) *browser {
	t.Helper()
	ctx, cancel := chromedp.NewContext(parent)
	b := &browser{ctx: ctx}
	stop := cancel
	// Listen starts the browser and the tab.
	err := chromedp.Listen(ctx, func(ev any) {
		switch e := ev.(type) {
		case *runtime.EventExceptionThrown:
			d := e.ExceptionDetails
			msg := d.Text
			if d.Exception != nil {
				msg += " " + d.Exception.Description
			}
			b.addError(fmt.Sprintf("exception at %s:%d: %s", d.URL, d.LineNumber, msg))
		case *runtime.EventConsoleAPICalled:
			if e.Type == runtime.ConsoleAPICalledTypeError {
				var parts []string
				for _, a := range e.Args {
					parts = append(parts, string(a.Value)+a.Description)
				}
				b.addError("console.error: " + strings.Join(parts, " "))
			}
		case *cdplog.EventEntryAdded:
			// Browser messages: a CSP violation ("security") or a script
			// error. Network ones are left out: an API error status is
			// logged there, and the tests provoke some on purpose.
			if e.Entry.Level == cdplog.EntryLevelError && e.Entry.Source != cdplog.EntrySourceNetwork {
				b.addError(fmt.Sprintf("%s: %s (%s)", e.Entry.Source, e.Entry.Text, e.Entry.URL))
			}
		case *page.EventJavascriptDialogOpening:
			// confirm() before a delete: accept, as a user would. Not
			// from inside the listener (see chromedp.Listen).
			go func() {
				_, _ = chromedp.Call(ctx, page.HandleJavaScriptDialog, page.HandleJavaScriptDialogParams{Accept: true})
			}()
		}
	})
	if err != nil {
		stop()
		t.Fatalf("start chromium: %v", err)
	}
	t.Cleanup(stop)
	return b
}

func (b *browser) addError(s string) {
	b.mu.Lock()
	b.errors = append(b.errors, s)
	b.mu.Unlock()
}

// checkErrors fails the test when the page logged errors.
func (b *browser) checkErrors(t *testing.T) {
	t.Helper()
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.errors) > 0 {
		t.Fatalf("page errors:\n%s", strings.Join(b.errors, "\n"))
	}
}

// do runs actions with a deadline.
func (b *browser) do(t *testing.T, actions ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 20*time.Second)
	defer cancel()
	if err := chromedp.Do(ctx, actions...); err != nil {
		t.Fatalf("browser: %v", err)
	}
}

// eval evaluates a JavaScript expression and returns its value.
func eval[T any](t *testing.T, b *browser, expr string) T {
	t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 20*time.Second)
	defer cancel()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](expr))
	if err != nil {
		t.Fatalf("eval %s: %v", expr, err)
	}
	return v
}

// evalAwait evaluates an expression that gives a promise and returns
// what it resolves to.
func evalAwait[T any](t *testing.T, b *browser, expr string) T {
	t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 20*time.Second)
	defer cancel()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](expr, chromedp.EvalAwaitPromise))
	if err != nil {
		t.Fatalf("eval %s: %v", expr, err)
	}
	return v
}

// exec runs JavaScript for its effect.
func (b *browser) exec(t *testing.T, code string) {
	t.Helper()
	eval[bool](t, b, `(() => { `+code+`; return true; })()`)
}

// open loads the panel on tab and waits until the tab has rendered and
// the WebSocket is live; it sets a marker that a reload would lose.
func (b *browser) open(t *testing.T, base, tab string) {
	t.Helper()
	b.do(t, chromedp.Navigate(base+"/#"+tab))
	b.waitJS(t, `document.querySelector('#conn').dataset.state === 'open' && (document.body.dataset.refreshed || '').startsWith('`+tab+`:')`)
	b.exec(t, `window.__noReload = 'kept'`)
}

// noReload checks that the page was not reloaded since open.
func (b *browser) noReload(t *testing.T) {
	t.Helper()
	if eval[string](t, b, `window.__noReload || ''`) != "kept" {
		t.Fatal("the page was reloaded")
	}
}

// waitJS polls a JavaScript condition until it is true.
func (b *browser) waitJS(t *testing.T, cond string) {
	t.Helper()
	testutil.Eventually(t, 15*time.Second, func() error {
		ctx, cancel := context.WithTimeout(b.ctx, 5*time.Second)
		defer cancel()
		ok, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`!!(`+cond+`)`))
		if err != nil {
			return err
		}
		if !ok {
			b.mu.Lock()
			defer b.mu.Unlock()
			return fmt.Errorf("not yet: %s (page errors: %q)", cond, b.errors)
		}
		return nil
	})
}

// waitText waits until the element sel contains text; a failure shows
// what the element held instead.
func (b *browser) waitText(t *testing.T, sel, text string) {
	t.Helper()
	testutil.Eventually(t, 15*time.Second, func() error {
		ctx, cancel := context.WithTimeout(b.ctx, 5*time.Second)
		defer cancel()
		got, err := chromedp.Run(ctx, chromedp.Evaluate[string](fmt.Sprintf(`document.querySelector(%q)?.innerText ?? '(no element)'`, sel)))
		if err != nil {
			return err
		}
		if !strings.Contains(got, text) {
			b.mu.Lock()
			defer b.mu.Unlock()
			return fmt.Errorf("%s holds %q, not %q (page errors: %q)", sel, got, text, b.errors)
		}
		return nil
	})
}

// fill types into the input sel (a real key sequence) and checks that
// the input holds text: a tab refresh that lands between clearing the
// input and the first key puts the saved value back under the keys (the
// panel keeps what was typed across a refresh, not what a script set).
// A mixed value is typed again (a few times).
func (b *browser) fill(t *testing.T, sel, text string) {
	t.Helper()
	for try := 0; ; try++ {
		b.exec(t, fmt.Sprintf(`document.querySelector(%q).value = ''`, sel))
		b.do(t, chromedp.SendKeys(chromedp.CSS(sel), text))
		got := eval[string](t, b, fmt.Sprintf(`document.querySelector(%q).value`, sel))
		if got == text {
			return
		}
		if try == 4 {
			t.Fatalf("fill %s: the input holds %q after typing %q", sel, got, text)
		}
	}
}

// choose sets a select's value and fires change, as picking does.
func (b *browser) choose(t *testing.T, sel, value string) {
	t.Helper()
	b.exec(t, fmt.Sprintf(`const s = document.querySelector(%q); s.value = %q; s.dispatchEvent(new Event('change', {bubbles: true}))`, sel, value))
}

// click clicks sel with the mouse, as a user does, and checks that the
// click reached it: a tab refresh that shifts the layout between aiming
// and clicking sends the click beside the element. A miss is tried again
// (a few times) rather than left to fail a later wait with no clue.
func (b *browser) click(t *testing.T, sel string) {
	t.Helper()
	for attempt := 1; ; attempt++ {
		b.exec(t, `window.__clicked = null; document.addEventListener('mousedown', (e) => { window.__clicked = e.target; }, { capture: true, once: true })`)
		b.do(t, chromedp.Click(chromedp.CSS(sel)))
		hit := eval[bool](t, b, fmt.Sprintf(`(() => { const el = document.querySelector(%q); return !!el && !!window.__clicked && el.contains(window.__clicked); })()`, sel))
		if hit {
			return
		}
		if attempt == 3 {
			t.Fatalf("click on %s landed elsewhere %d times", sel, attempt)
		}
	}
}

// clickText clicks the button in scope whose text is text.
func (b *browser) clickText(t *testing.T, scope, text string) {
	t.Helper()
	ok := eval[bool](t, b, fmt.Sprintf(`(() => { const b = [...document.querySelectorAll(%q + ' button')].find((x) => x.textContent.trim() === %q); if (b) b.click(); return !!b; })()`, scope, text))
	if !ok {
		t.Fatalf("no button %q in %s", text, scope)
	}
}

// screenshot saves the viewport as <name>.png in the screenshot folder
// ($PANEL_SCREENSHOTS, or a temp folder).
func (b *browser) screenshot(t *testing.T, name string) {
	t.Helper()
	dir := os.Getenv("PANEL_SCREENSHOTS")
	if dir == "" {
		dir = shotDir(t)
	}
	b.exec(t, `window.scrollTo(0, 0)`)
	ctx, cancel := context.WithTimeout(b.ctx, 20*time.Second)
	defer cancel()
	png, err := chromedp.Run(ctx, chromedp.CaptureScreenshot())
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, name+".png")
	if err := os.WriteFile(p, png, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot %s", p)
}

var (
	shotOnce sync.Once
	shotPath string
)

func shotDir(t *testing.T) string {
	shotOnce.Do(func() {
		d, err := os.MkdirTemp("", "peerdns-panel-")
		if err != nil {
			t.Fatal(err)
		}
		shotPath = d
	})
	return shotPath
}

// startNode starts a node on loopback ports in a temp folder; join is an
// invite or "".
func startNode(t *testing.T, join string) *node.Node {
	t.Helper()
	return startNodeIn(t, t.TempDir(), join)
}

// startNodeIn is startNode with its data in dir; change (when given)
// adjusts the config first.
func startNodeIn(t *testing.T, dir, join string, change ...func(*node.Config)) *node.Node {
	t.Helper()
	cfg := node.Config{
		Data: dir, AdminAddr: "127.0.0.1:0", DNSAddr: "127.0.0.1:0", HTTPAddr: "127.0.0.1:0",
		HTTPSAddr: "127.0.0.1:0", P2PAddr: "127.0.0.1:0", AdminDomain: "admin.p2p", LogLevel: "info",
		Upstream: []string{"127.0.0.1:1"}, Join: join,
	}
	for _, c := range change {
		c(&cfg)
	}
	n, err := node.Start(cfg, io.Discard)
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(n.Stop)
	base := "http://" + n.AdminAddr()
	testutil.Eventually(t, 10*time.Second, func() error {
		if code, body := testutil.Call(t, "GET", base+"/api/health?probe=readiness", ""); code != 200 {
			return fmt.Errorf("not ready: %s", body)
		}
		return nil
	})
	return n
}
