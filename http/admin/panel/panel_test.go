package panel

import (
	"io"
	"net"
	"net/http"
	"path"
	"regexp"
	"strings"
	"testing"

	"github.com/fasthttp/router"
	"github.com/valyala/fasthttp"

	"peerdns/messages"
)

// serveRouter serves the panel routes alone on 127.0.0.1:0.
func serveRouter(t *testing.T) string {
	t.Helper()
	r := router.New()
	Register(r)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &fasthttp.Server{Handler: r.Handler}
	go func() { _ = s.Serve(ln) }()
	t.Cleanup(func() { _ = s.Shutdown() })
	return "http://" + ln.Addr().String()
}

var noRedirect = &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}

func get(t *testing.T, url string, hdr map[string]string) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequest("GET", url, nil)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := noRedirect.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

func TestServeFiles(t *testing.T) {
	base := serveRouter(t)
	tests := []struct {
		path, contentType, contains string
	}{
		{"/", "text/html; charset=utf-8", `<script type="module" src="/admin.js">`},
		{"/styles.css", "text/css; charset=utf-8", ":root"},
		{"/admin.js", "text/javascript; charset=utf-8", "import"},
		{"/js/api.js", "text/javascript; charset=utf-8", "export"},
		{"/js/tabs/domains.js", "text/javascript; charset=utf-8", "/api/add-domain"},
	}
	for _, tt := range tests {
		t.Run(tt.path, func(t *testing.T) {
			resp, body := get(t, base+tt.path, nil)
			if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != tt.contentType || !strings.Contains(body, tt.contains) {
				t.Fatalf("GET %s = %d %q, body has %q: %v", tt.path, resp.StatusCode, resp.Header.Get("Content-Type"), tt.contains, strings.Contains(body, tt.contains))
			}
			if got := resp.Header.Get("Content-Security-Policy"); got != CSP {
				t.Fatalf("CSP = %q", got)
			}
			etag := resp.Header.Get("ETag")
			if !regexp.MustCompile(`^"[0-9a-f]{24}"$`).MatchString(etag) || resp.Header.Get("Cache-Control") != "no-cache" {
				t.Fatalf("ETag %q Cache-Control %q", etag, resp.Header.Get("Cache-Control"))
			}
			for _, inm := range []string{etag, "W/" + etag, `"other", ` + etag, "*"} {
				resp, body = get(t, base+tt.path, map[string]string{"If-None-Match": inm})
				if resp.StatusCode != 304 || body != "" || resp.Header.Get("ETag") != etag {
					t.Fatalf("If-None-Match %s: %d %q", inm, resp.StatusCode, body)
				}
			}
			if resp, _ = get(t, base+tt.path, map[string]string{"If-None-Match": `"stale"`}); resp.StatusCode != 200 {
				t.Fatalf("stale etag: %d", resp.StatusCode)
			}
			head, err := http.Head(base + tt.path)
			if err != nil {
				t.Fatal(err)
			}
			head.Body.Close()
			if head.StatusCode != 200 || head.Header.Get("ETag") != etag || head.Header.Get("Content-Type") != tt.contentType {
				t.Fatalf("HEAD %s = %d %v", tt.path, head.StatusCode, head.Header)
			}
		})
	}
}

func TestTabRedirectsAndFavicon(t *testing.T) {
	base := serveRouter(t)
	for _, tab := range Tabs {
		resp, _ := get(t, base+"/"+tab, nil)
		if resp.StatusCode != 302 || resp.Header.Get("Location") != "/#"+tab {
			t.Fatalf("GET /%s = %d Location %q", tab, resp.StatusCode, resp.Header.Get("Location"))
		}
	}
	resp, body := get(t, base+"/favicon.ico", nil)
	if resp.StatusCode != 404 || body != "Not Found" {
		t.Fatalf("favicon = %d %q", resp.StatusCode, body)
	}
}

// TestNoInlineCode: the CSP forbids inline scripts, styles and handlers,
// so the files must not need them.
func TestNoInlineCode(t *testing.T) {
	html := string(files()["/"].body)
	for _, bad := range []*regexp.Regexp{
		regexp.MustCompile(`<script(?:[^>](?:[^s]|s[^r]|sr[^c]))*>`), // a script without src
		regexp.MustCompile(`\son[a-z]+=`),
		regexp.MustCompile(`\sstyle=`),
		regexp.MustCompile(`<style`),
		regexp.MustCompile(`https?://`),
	} {
		if m := bad.FindString(html); m != "" {
			t.Errorf("index.html has %q", m)
		}
	}
	for p, f := range files() {
		if strings.HasSuffix(p, ".js") {
			// The SVG namespace is a name, not a fetch.
			body := strings.ReplaceAll(string(f.body), "'http://www.w3.org/2000/svg'", "")
			for _, bad := range []string{"innerHTML", "eval(", "new Function", "setAttribute('style'", "http://", "https://"} {
				if strings.Contains(body, bad) {
					t.Errorf("%s uses %s", p, bad)
				}
			}
		}
	}
}

// TestImportsResolve: every module a module imports is served.
func TestImportsResolve(t *testing.T) {
	imp := regexp.MustCompile(`(?m)^import .* from '([^']+)';`)
	n := 0
	for p, f := range files() {
		if !strings.HasSuffix(p, ".js") {
			continue
		}
		for _, m := range imp.FindAllStringSubmatch(string(f.body), -1) {
			target := path.Join(path.Dir(p), m[1])
			if files()[target] == nil {
				t.Errorf("%s imports %s: not served", p, target)
			}
			n++
		}
	}
	if n < 10 {
		t.Fatalf("found only %d imports", n)
	}
}

func FuzzETagMatch(f *testing.F) {
	for _, s := range []string{`"abc"`, `W/"abc"`, `*`, `"x", "abc"`, ``, `,,,`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, h string) {
		got := etagMatch([]byte(h), `"abc"`)
		if got && !strings.Contains(h, `"abc"`) && !strings.Contains(h, "*") {
			t.Fatalf("etagMatch(%q) = true", h)
		}
	})
}

// TestEveryHintRefreshesATab: each update-* hint the node sends (and the
// spec's Events table lists) is named by at least one tab.
func TestEveryHintRefreshesATab(t *testing.T) {
	hintsRe := regexp.MustCompile(`hints: \[([^\]]*)\]`)
	named := map[string]bool{}
	for p, f := range files() {
		if !strings.HasPrefix(p, "/js/tabs/") {
			continue
		}
		m := hintsRe.FindSubmatch(f.body)
		if m == nil {
			t.Errorf("%s has no hints list", p)
			continue
		}
		for _, h := range regexp.MustCompile(`'([a-z-]+)'`).FindAllSubmatch(m[1], -1) {
			named[string(h[1])] = true
		}
	}
	for _, h := range []string{messages.HintDatabase, messages.HintPeers, messages.HintCerts, messages.HintInterfaces,
		messages.HintLocalDNS, messages.HintTunnel, messages.HintTunnelClients, messages.HintSettings,
		messages.HintPlugins, messages.HintPluginSetting, "update-health"} {
		if !named[h] {
			t.Errorf("no tab refreshes on %s", h)
		}
	}
}
