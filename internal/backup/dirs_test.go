package backup

import (
	"archive/tar"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// tree lists the folders (with their modes) and files (with their modes
// and content) under root whose names start with ca, plugins or
// plugin-data.
func tree(t *testing.T, root string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		rel = filepath.ToSlash(rel)
		if top, _, _ := strings.Cut(rel, "/"); top != "ca" && top != "plugins" && top != "plugin-data" {
			if d.IsDir() && rel != "." {
				return fs.SkipDir
			}
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		if d.IsDir() {
			out[rel+"/"] = info.Mode().Perm().String()
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		out[rel] = info.Mode().Perm().String() + " " + string(b)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// unpack writes the archive at src into the folder dst as tar would:
// folders and files with their archived modes.
func unpack(t *testing.T, src, dst string) {
	t.Helper()
	f, err := os.Open(src)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tr, done, err := openTar(f)
	if err != nil {
		t.Fatal(err)
	}
	defer done()
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(dst, filepath.FromSlash(hdr.Name))
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			t.Fatal(err)
		}
		if hdr.Typeflag == tar.TypeDir {
			if err := os.MkdirAll(p, 0o700); err != nil {
				t.Fatal(err)
			}
			if err := os.Chmod(p, fs.FileMode(hdr.Mode)); err != nil {
				t.Fatal(err)
			}
			continue
		}
		b, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, b, fs.FileMode(hdr.Mode)); err != nil {
			t.Fatal(err)
		}
	}
}

// Empty folders of the data folder (an empty plugins/ folder, a plugin's
// empty data folder, an empty folder in a plugin) come back from a
// backup restored into a fresh node folder, with their modes, from the
// archive and from the archive unpacked into a folder. A folder others
// may write in comes back without that; one its owner may not write in,
// writable by its owner (dirMode).
func TestEmptyFoldersRestored(t *testing.T) {
	data := t.TempDir()
	srcs := append(sources(t, data), Source{Name: "plugin-data", Path: filepath.Join(data, "plugin-data")})
	if err := os.MkdirAll(filepath.Join(data, "plugins", "p"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(data, "plugins", "p", "plugin.json"), []byte("{}"), 0o600); err != nil {
		t.Fatal(err)
	}
	// Deepest first, so each parent is still writable when its child is made.
	folders := []struct {
		name       string
		mode, want os.FileMode
	}{
		{"plugins/p/www/empty", 0o700, 0o700},
		{"plugins/p/www", 0o755, 0o755},
		{"plugins/p", 0o750, 0o750},
		{"plugins/q", 0o711, 0o711},
		{"plugins/open", 0o777, 0o755},
		{"plugins/readonly", 0o500, 0o700},
		{"plugins", 0o755, 0o755},
		{"plugin-data/q.p2p/deep", 0o700, 0o700},
		{"plugin-data/q.p2p", 0o755, 0o755},
		{"plugin-data/p.p2p", 0o750, 0o750},
		{"plugin-data", 0o700, 0o700},
	}
	for _, f := range folders {
		if err := os.MkdirAll(filepath.Join(data, f.name), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range folders {
		if err := os.Chmod(filepath.Join(data, f.name), f.mode); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() { _ = os.Chmod(filepath.Join(data, "plugins", "readonly"), 0o700) })
	want := tree(t, data)
	for _, f := range folders {
		want[f.name+"/"] = f.want.String()
	}

	dir := filepath.Join(data, "backups")
	p, err := Create(dir, 3, "node-a", "v1", time.Now(), srcs)
	if err != nil {
		t.Fatal(err)
	}
	check := func(from, name string) {
		t.Helper()
		fresh := filepath.Join(t.TempDir(), "node")
		if _, err := Stage(dir, name, fresh, "node-a", nil); err != nil {
			t.Fatalf("%s: %v", from, err)
		}
		got := tree(t, fresh)
		for k, v := range want {
			if got[k] != v {
				t.Errorf("%s: %s restored as %q, want %q", from, k, got[k], v)
			}
		}
		for k, v := range got {
			if _, ok := want[k]; !ok {
				t.Errorf("%s: %s (%s) restored, not in the data folder", from, k, v)
			}
		}
	}
	check("archive", filepath.Base(p))
	unpack(t, p, filepath.Join(dir, "unpacked"))
	check("unpacked archive", "unpacked")
}
