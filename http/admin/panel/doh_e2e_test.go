package panel_test

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/prometheus/common/expfmt"

	"peerdns/internal/testutil"
)

// A browser whose secure DNS setting points at the edge's /dns-query
// (mode "secure": no other resolver, as a user sets it in Chromium's
// settings and its Local State keeps it), with the node's root in its
// NSS database, opens a page by a name only the node knows: a local
// record resolved over DoH, and nothing else. The name is under no
// host-resolver rule and the machine's resolver has never heard of it,
// so the page loads only if the browser's query went through the edge;
// the edge's access log shows the browser's queries, and the
// connections the browser keeps open to the edge are in the protocol
// asked for: HTTP/2, as browsers speak DoH to a server whose root a user
// installed, and HTTP/3 when told to (Chromium speaks QUIC to such a
// root only for an origin forced onto it, edge_e2e_test.go).
func TestBrowserSecureDNSThroughTheEdge(t *testing.T) {
	for _, proto := range []string{"h2", "h3"} {
		t.Run(proto, func(t *testing.T) {
			n := startNode(t, "")
			_, httpsAddr := n.EdgeAddrs()
			base := "http://" + n.AdminAddr()

			// The page: a plain HTTP server on loopback, named by a
			// local record.
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				fmt.Fprintf(w, "<!doctype html><title>found %s</title>", r.Host)
			})}
			go srv.Serve(ln)
			t.Cleanup(func() { srv.Close() })
			if code, body := testutil.Call(t, "POST", base+"/api/add-local-dns",
				`{"name":"web.doh-test.home","type":"A","data":"127.0.0.1"}`); code != 200 {
				t.Fatalf("add-local-dns: %d %s", code, body)
			}

			home := trustingHome(t, n.CA().RootPath())
			// Chromium's secure DNS setting lives in the profile's Local
			// State.
			profile := t.TempDir()
			state, _ := json.Marshal(map[string]any{"dns_over_https": map[string]any{
				"mode": "secure", "templates": "https://" + httpsAddr + "/dns-query",
			}})
			if err := os.WriteFile(filepath.Join(profile, "Local State"), state, 0o600); err != nil {
				t.Fatal(err)
			}
			flags := []chromedp.ExecAllocatorOption{chromedp.Env("HOME=" + home), chromedp.UserDataDir(profile)}
			if proto == "h3" {
				flags = append(flags, chromedp.Flag("disable-quic", false), chromedp.Flag("enable-quic", true),
					chromedp.Flag("origin-to-force-quic-on", httpsAddr))
			}
			b := newBrowser(t, flags...)

			_, port, _ := net.SplitHostPort(ln.Addr().String())
			b.do(t, chromedp.Navigate("http://web.doh-test.home:"+port+"/"))
			if title, want := eval[string](t, b, "document.title"), "found web.doh-test.home:"+port; title != want {
				t.Fatalf("the page by the node's name has title %q, want %q", title, want)
			}
			code, body := testutil.Call(t, "GET", base+"/api/logs/httpProxy?lines=5000", "")
			if code != 200 || !strings.Contains(body, "path=/dns-query status=200") {
				t.Fatalf("no DoH query answered in the edge's access log: %d %.600s", code, body)
			}
			// The browser is the edge's only client, and keeps its DoH
			// connections open.
			code, body = testutil.Call(t, "GET", base+"/metrics", "")
			if open, err := gaugeWith(body, "peerdns_edge_multiplexed_connections", "protocol", proto); code != 200 || err != nil || open == 0 {
				t.Fatalf("no %s connection open on the edge for the browser's DoH: %d, %v open, %v", proto, code, open, err)
			}
			b.checkErrors(t)
		})
	}
}

// gaugeWith is the value of the gauge name's sample whose label is
// value, from Prometheus text.
func gaugeWith(text, name, label, value string) (float64, error) {
	var p expfmt.TextParser
	fams, err := p.TextToMetricFamilies(strings.NewReader(text))
	if err != nil {
		return 0, err
	}
	f, ok := fams[name]
	if !ok {
		return 0, fmt.Errorf("no %s in /metrics", name)
	}
	for _, m := range f.Metric {
		for _, l := range m.Label {
			if l.GetName() == label && l.GetValue() == value && m.Gauge != nil {
				return m.Gauge.GetValue(), nil
			}
		}
	}
	return 0, fmt.Errorf("no %s{%s=%q} gauge in /metrics", name, label, value)
}
