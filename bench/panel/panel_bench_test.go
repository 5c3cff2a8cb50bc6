// Package panel_test measures the admin panel in headless Chromium against
// a node holding 10,000 domains and 1,000 local records: time to first
// render of each tab (from navigation start to the tab's first data drawn,
// a performance mark set by admin.js) and the bytes over the wire for that
// load (files and API answers, as the browser counts them).
//
// Run: go test -run X -bench . -benchtime 5x ./bench/panel/
// It skips when chromium is missing (apt-get install chromium).
package panel_test

import (
	"context"
	"fmt"
	"io/fs"
	"os/exec"
	"path/filepath"
	"peerdns/bench/benchnode"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"peerdns/cmd/peerdns/node"
	"peerdns/http/admin/panel"
	"peerdns/internal/testutil"
)

func startNode(b *testing.B) *node.Node { return benchnode.Start(b) }

func seed(b *testing.B, n *node.Node, count int) { benchnode.Seed(b, n, count) }

func newBrowser(b *testing.B) context.Context {
	b.Helper()
	exe := ""
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			exe = p
			break
		}
	}
	if exe == "" {
		b.Skip("chromium not found: apt-get install chromium")
	}
	actx, cancelA := chromedp.NewExecAllocator(context.Background(),
		chromedp.ExecPath(exe), chromedp.Flag("headless", true), chromedp.NoSandbox, chromedp.DisableGPU,
		chromedp.Flag("disable-quic", true), chromedp.NoFirstRun, chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true), chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-dev-shm-usage", true), chromedp.UserDataDir(b.TempDir()), chromedp.WindowSize(1280, 900))
	ctx, cancel := chromedp.NewContext(actx)
	b.Cleanup(func() { cancel(); cancelA() })
	if err := chromedp.Do(ctx, chromedp.Navigate("about:blank")); err != nil {
		b.Fatal(err)
	}
	return ctx
}

// BenchmarkFirstRender loads each tab afresh (a new document each time;
// the browser's cache revalidates the files with their ETags) and reports
// the in-page time to first render and the bytes transferred.
func BenchmarkFirstRender(b *testing.B) {
	n := startNode(b)
	seed(b, n, 10000)
	base := "http://" + n.AdminAddr()
	for i := 0; i < 1000; i++ {
		testutil.MustJSON(b, "POST", base+"/api/add-local-dns", fmt.Sprintf(`{"name":"h%04d.home","type":"A","ttl":300,"data":"10.0.%d.%d"}`, i, i/250, i%250+1), 200, nil)
	}
	ctx := newBrowser(b)
	for _, tab := range panel.Tabs {
		b.Run(tab, func(b *testing.B) {
			var total, bytes float64
			for i := 0; i < b.N; i++ {
				run, cancel := context.WithTimeout(ctx, time.Minute)
				if err := chromedp.Do(run, chromedp.Navigate("about:blank"), chromedp.Navigate(base+"/?r="+fmt.Sprint(i)+"#"+tab)); err != nil {
					b.Fatal(err)
				}
				// The mark's time is taken in the page; polling for it only
				// needs to see it eventually.
				var ms float64
				for ms == 0 {
					v, err := chromedp.Run(run, chromedp.Evaluate[float64](`(() => { const m = performance.getEntriesByName('panel-rendered:`+tab+`'); return m.length ? m[0].startTime : 0; })()`))
					if err != nil {
						cancel()
						b.Fatalf("%s: %v", tab, err)
					}
					ms = v
				}
				wire, err := chromedp.Run(run, chromedp.Evaluate[float64](`[...performance.getEntriesByType('navigation'), ...performance.getEntriesByType('resource')].reduce((n, e) => n + e.transferSize, 0)`))
				cancel()
				if err != nil {
					b.Fatal(err)
				}
				total += ms
				bytes += wire
			}
			b.ReportMetric(total/float64(b.N), "ms/first-render")
			b.ReportMetric(bytes/float64(b.N)/1024, "KiB/load")
		})
	}
	// Responsiveness with 10,000 rows: filtering and paging re-render one
	// page synchronously; the time is taken in the page around it.
	b.Run("domains-filter-and-page", func(b *testing.B) {
		run, cancel := context.WithTimeout(ctx, time.Minute)
		defer cancel()
		if err := chromedp.Do(run, chromedp.Navigate("about:blank"), chromedp.Navigate(base+"/?f#domains")); err != nil {
			b.Fatal(err)
		}
		for {
			v, err := chromedp.Run(run, chromedp.Evaluate[bool](`performance.getEntriesByName('panel-rendered:domains').length > 0`))
			if err != nil {
				b.Fatal(err)
			}
			if v {
				break
			}
		}
		var total float64
		for i := 0; i < b.N; i++ {
			ms, err := chromedp.Run(run, chromedp.Evaluate[float64](`(() => {
				const f = document.querySelector('#tab-domains input[name=filter]');
				const t0 = performance.now();
				f.value = 'd0' + String(`+fmt.Sprint(i%10)+`); f.dispatchEvent(new Event('input'));
				[...document.querySelectorAll('#tab-domains .pager button')].find((x) => x.textContent.includes('Next')).click();
				f.value = ''; f.dispatchEvent(new Event('input'));
				return performance.now() - t0;
			})()`))
			if err != nil {
				b.Fatal(err)
			}
			total += ms
		}
		b.ReportMetric(total/float64(b.N)/3, "ms/rerender")
	})

	// The panel's own files, uncompressed: what a first visit fetches.
	var size int
	_ = filepath.WalkDir("../../http/admin/panel/www", func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			if fi, err := d.Info(); err == nil {
				size += int(fi.Size())
			}
		}
		return nil
	})
	b.Logf("panel files: %d bytes", size)
}
