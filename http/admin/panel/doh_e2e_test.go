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
			open := `peerdns_edge_multiplexed_connections{protocol="` + proto + `"} `
			if i := strings.Index(body, open); code != 200 || i < 0 || body[i+len(open)] == '0' {
				t.Fatalf("no %s connection open on the edge for the browser's DoH: %d %s", proto, code, grepLines(body, "multiplexed"))
			}
			b.checkErrors(t)
		})
	}
}

// grepLines is the lines of s that hold sub.
func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
