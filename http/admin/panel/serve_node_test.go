package panel_test

import (
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"peerdns/http/admin/panel"
)

// TestServedByNode: the panel on a real node's admin address and on the
// admin domain through its edge proxy (plain HTTP, no browser).
func TestServedByNode(t *testing.T) {
	n := startNode(t, "")
	httpAddr, _ := n.EdgeAddrs()
	client := &http.Client{Timeout: 10 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	do := func(t *testing.T, url, host, inm string) (*http.Response, string) {
		t.Helper()
		req, _ := http.NewRequest("GET", url, nil)
		req.Host = host
		if inm != "" {
			req.Header.Set("If-None-Match", inm)
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp, string(b)
	}
	for _, tt := range []struct{ name, base, host string }{
		{"admin address", "http://" + n.AdminAddr(), n.AdminAddr()},
		{"edge proxy", "http://" + httpAddr, "admin.p2p"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			resp, body := do(t, tt.base+"/", tt.host, "")
			if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/html") || !strings.Contains(body, "/admin.js") {
				t.Fatalf("GET / = %d %q", resp.StatusCode, resp.Header.Get("Content-Type"))
			}
			if resp.Header.Get("Content-Security-Policy") != panel.CSP || resp.Header.Get("X-Frame-Options") != "DENY" {
				t.Fatalf("headers = %v", resp.Header)
			}
			for _, p := range []string{"/styles.css", "/admin.js", "/js/socket.js"} {
				resp, _ = do(t, tt.base+p, tt.host, "")
				etag := resp.Header.Get("ETag")
				if resp.StatusCode != 200 || etag == "" {
					t.Fatalf("GET %s = %d etag %q", p, resp.StatusCode, etag)
				}
				if resp, body = do(t, tt.base+p, tt.host, etag); resp.StatusCode != 304 || body != "" {
					t.Fatalf("GET %s If-None-Match = %d", p, resp.StatusCode)
				}
			}
			for _, tab := range panel.Tabs {
				resp, _ = do(t, tt.base+"/"+tab, tt.host, "")
				if resp.StatusCode != 302 || resp.Header.Get("Location") != "/#"+tab {
					t.Fatalf("GET /%s = %d %q", tab, resp.StatusCode, resp.Header.Get("Location"))
				}
			}
			if resp, body = do(t, tt.base+"/favicon.ico", tt.host, ""); resp.StatusCode != 404 || body != "Not Found" {
				t.Fatalf("favicon = %d %q", resp.StatusCode, body)
			}
			// The API is still the API.
			if resp, body = do(t, tt.base+"/api/status", tt.host, ""); resp.StatusCode != 200 || !strings.Contains(body, "isMaster") {
				t.Fatalf("status = %d %q", resp.StatusCode, body)
			}
		})
	}
}
