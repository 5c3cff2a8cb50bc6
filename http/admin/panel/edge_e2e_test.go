package panel_test

import (
	"net"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
)

// A browser that trusts the node's root (installed in its NSS database,
// as `peerdns` installs it for a user) loads the panel from the HTTPS
// edge in HTTP/2, and the answer advertises HTTP/3 (Alt-Svc). Chromium
// does not follow Alt-Svc to QUIC for a certificate under a root the
// user installed (ERR_QUIC_CERT_ROOT_NOT_KNOWN: QUIC only for publicly
// trusted roots), so HTTP/3 is tried with the origin forced onto QUIC,
// as a user who asks for it would: the panel loads over HTTP/3 and
// works (its WebSocket on a connection of its own).
func TestBrowserOverHTTP2AndHTTP3(t *testing.T) {
	n := startNode(t, "")
	home := trustingHome(t, n.CA().RootPath())
	_, httpsAddr := n.EdgeAddrs()
	_, port, _ := net.SplitHostPort(httpsAddr)
	base := "https://admin.p2p:" + port
	for _, c := range []struct {
		proto string
		flags []chromedp.ExecAllocatorOption
	}{
		{"h2", nil},
		{"h3", []chromedp.ExecAllocatorOption{chromedp.Flag("origin-to-force-quic-on", "admin.p2p:"+port)}},
	} {
		t.Run(c.proto, func(t *testing.T) {
			b := newBrowser(t, append([]chromedp.ExecAllocatorOption{
				chromedp.Env("HOME=" + home),
				chromedp.Flag("disable-quic", false),
				chromedp.Flag("enable-quic", true),
				chromedp.Flag("host-resolver-rules", "MAP admin.p2p 127.0.0.1"),
			}, c.flags...)...)
			b.do(t, chromedp.Navigate(base+"/#overview"))
			if p := eval[string](t, b, `performance.getEntriesByType('navigation')[0].nextHopProtocol`); p != c.proto {
				t.Fatalf("the panel came over %q, want %s", p, c.proto)
			}
			if c.proto == "h2" {
				alt := evalAwait[string](t, b, `fetch(location.href).then(r => r.headers.get('alt-svc') || '')`)
				if !strings.HasPrefix(alt, `h3=":`+port+`"`) {
					t.Fatalf("Alt-Svc %q, want h3 on port %s", alt, port)
				}
			}
			b.waitJS(t, `document.querySelector('#conn').dataset.state === 'open'`)
			b.checkErrors(t)
		})
	}
}

// trustingHome is a home folder whose NSS database (the one Chromium
// reads on Linux, where `peerdns` installs its root for a user) trusts
// the root at rootPath for TLS servers.
func trustingHome(t *testing.T, rootPath string) string {
	t.Helper()
	if _, err := exec.LookPath("certutil"); err != nil {
		t.Skip("certutil not found: apt-get install libnss3-tools")
	}
	home := t.TempDir()
	db := "sql:" + home + "/.pki/nssdb"
	if err := os.MkdirAll(home+"/.pki/nssdb", 0o700); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"-N", "-d", db, "--empty-password"},
		{"-A", "-d", db, "-n", "peerdns", "-t", "C,,", "-i", rootPath},
	} {
		if out, err := exec.Command("certutil", args...).CombinedOutput(); err != nil {
			t.Fatalf("certutil %v: %v %s", args, err, out)
		}
	}
	return home
}
