package pluginweb

import (
	"os"
	"path/filepath"
	"testing"

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
