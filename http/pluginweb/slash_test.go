package pluginweb

import (
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"peerdns/actors/plugin"
	"peerdns/transport/identity"
)

// A path that ends in a slash names a folder: a file there is not
// served (nginx answers 404), a folder is served its index.html.
func TestTrailingSlashNamesAFolder(t *testing.T) {
	self, _ := identity.Generate()
	www := t.TempDir()
	for name, body := range map[string]string{"file.txt": "a file", "docs/index.html": "<h1>docs</h1>", "docs/page.html": "page"} {
		p := filepath.Join(www, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink(filepath.Join(www, "file.txt"), filepath.Join(www, "link.txt")); err != nil {
		t.Fatal(err)
	}
	base := serve(t, &Server{Self: self.ID()}, plugin.NewRuntime("www.p2p", www, nil))
	for _, c := range []struct {
		path   string
		status int
		body   string
	}{
		{"/file.txt", 200, "a file"},
		{"/file.txt/", 404, ""},
		{"/link.txt/", 404, ""},
		{"/docs/page.html/", 404, ""},
		{"/docs/", 200, "<h1>docs</h1>"},
		{"/docs", 200, "<h1>docs</h1>"},
		{"/docs/page.html", 200, "page"},
	} {
		t.Run(c.path, func(t *testing.T) {
			code, body, _ := do(t, "GET", base+c.path, nil)
			if code != c.status || (c.body != "" && body != c.body) {
				t.Fatalf("GET %s = %d %q, want %d %q", c.path, code, body, c.status, c.body)
			}
		})
	}
}

// A folder named without its trailing slash is redirected to its name
// with it (301, the query kept), as nginx does: its index.html served at
// /docs had its relative links (page.html) resolve to /page.html. A
// folder with no index.html is not redirected: www has nothing for it.
func TestFolderWithoutSlashRedirects(t *testing.T) {
	self, _ := identity.Generate()
	www := t.TempDir()
	for name, body := range map[string]string{"docs/index.html": `<a href="page.html">page</a>`, "docs/page.html": "page"} {
		p := filepath.Join(www, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Mkdir(filepath.Join(www, "empty"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(www, "a?b"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(www, "a?b", "index.html"), []byte("odd"), 0o644); err != nil {
		t.Fatal(err)
	}
	base := serve(t, &Server{Self: self.ID()}, plugin.NewRuntime("www.p2p", www, nil))
	client := &http.Client{Timeout: 10 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	for _, c := range []struct {
		method, path string
		status       int
		location     string
	}{
		{"GET", "/docs", 301, "/docs/"},
		{"GET", "/docs?lang=en", 301, "/docs/?lang=en"},
		{"HEAD", "/docs", 301, "/docs/"},
		{"GET", "/docs/", 200, ""},
		{"GET", "/empty", 404, ""},
		{"GET", "/a%3Fb", 301, "/a%3Fb/"},
	} {
		req, _ := http.NewRequest(c.method, base+c.path, nil)
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != c.status || resp.Header.Get("Location") != c.location {
			t.Errorf("%s %s = %d Location %q, want %d %q", c.method, c.path, resp.StatusCode, resp.Header.Get("Location"), c.status, c.location)
		}
	}
}
