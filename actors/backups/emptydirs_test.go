package backups

import (
	"io/fs"
	"os"
	"path/filepath"
	"testing"
)

// dirTree reads the Restored entries of dir: each folder with its mode,
// each file with its content.
func dirTree(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, e := range Restored {
		root := filepath.Join(dir, e)
		if _, err := os.Lstat(root); err != nil {
			continue
		}
		must(t, filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			rel, _ := filepath.Rel(dir, p)
			if d.IsDir() {
				info, err := d.Info()
				if err != nil {
					return err
				}
				out[rel+"/"] = info.Mode().Perm().String()
				return nil
			}
			b, err := os.ReadFile(p)
			out[rel] = string(b)
			return err
		}))
	}
	return out
}

// A node's empty folders (an empty plugins/, a plugin's empty data
// folder, an empty folder in ca/) are in its backup: restored into a
// fresh node folder, the state's tree is the backed-up one, folder
// modes included.
func TestRestoreKeepsEmptyFolders(t *testing.T) {
	h := newHarness(t, "node-a", nil)
	must(t, h.ledger.Set("claim", "backed up"))
	for _, f := range []struct {
		name string
		mode os.FileMode
	}{
		{"plugins", 0o750},
		{"plugin-data/empty.p2p", 0o750},
		{"plugin-data/x.p2p", 0o755},
		{"ca/issued", 0o700},
	} {
		must(t, os.MkdirAll(filepath.Join(h.data, f.name), 0o700))
		must(t, os.Chmod(filepath.Join(h.data, f.name), f.mode))
	}
	want := dirTree(t, h.data)
	path, err := h.c.CreateBackup()
	must(t, err)

	fresh := newHarness(t, "node-a", nil)
	if got := dirTree(t, fresh.data); got["plugins/"] != "" || got["plugin-data/empty.p2p/"] != "" {
		t.Fatalf("the fresh node has the folders already: %v", got)
	}
	b, err := os.ReadFile(path)
	must(t, err)
	must(t, os.MkdirAll(filepath.Join(fresh.data, "backups"), 0o700))
	must(t, os.WriteFile(filepath.Join(fresh.data, "backups", filepath.Base(path)), b, 0o600))
	must(t, fresh.c.RestoreBackup(filepath.Base(path)))
	fresh.restored()
	if fresh.restart.fatal != nil || len(fresh.restart.starts) != 1 || fresh.restart.starts[0] != "backed up" {
		t.Fatalf("restore: starts %q, fatal %v", fresh.restart.starts, fresh.restart.fatal)
	}
	got := dirTree(t, fresh.data)
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s restored as %q, want %q", k, got[k], v)
		}
	}
	for k, v := range got {
		if _, ok := want[k]; !ok {
			t.Errorf("%s (%q) after the restore, not in the backed-up node", k, v)
		}
	}
}
