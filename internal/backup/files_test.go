package backup

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"
)

// A plugin's handler is executable after a backup and a restore (the
// plugin does not load otherwise); other files stay 0600.
func TestStageKeepsExecutables(t *testing.T) {
	data := t.TempDir()
	srcs := sources(t, data)
	plug := filepath.Join(data, "plugins", "p")
	if err := os.MkdirAll(plug, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(plug, "handler"), []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(plug, "plugin.json"), []byte("{}"), 0o644); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(data, "backups")
	p, err := Create(dir, 3, "node-a", "v1", time.Now(), srcs)
	if err != nil {
		t.Fatal(err)
	}
	into := filepath.Join(data, "staged")
	if _, err := Stage(dir, filepath.Base(p), into, "node-a", nil); err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]os.FileMode{"plugins/p/handler": 0o700, "plugins/p/plugin.json": 0o600, "ledger.db": 0o600} {
		st, err := os.Stat(filepath.Join(into, filepath.FromSlash(name)))
		if err != nil {
			t.Fatal(err)
		}
		if st.Mode().Perm() != want {
			t.Errorf("%s staged with mode %v, want %v", name, st.Mode().Perm(), want)
		}
	}
}

// A backup that fails removes no old backup, whatever the retention.
func TestFailedCreateKeepsOldBackups(t *testing.T) {
	data := t.TempDir()
	dir := filepath.Join(data, "backups")
	srcs := sources(t, data)
	t0 := time.Date(2026, 11, 23, 10, 0, 0, 0, time.UTC)
	if _, err := Create(dir, 1, "node-a", "v1", t0, srcs); err != nil {
		t.Fatal(err)
	}
	bad := append(append([]Source{}, srcs...), Source{Name: "plugin-data", Write: func(io.Writer) error { return errors.New("disk full") }})
	if _, err := Create(dir, 1, "node-a", "v1", t0.Add(time.Minute), bad); err == nil {
		t.Fatal("a failing source made a backup")
	}
	l, err := List(dir)
	if err != nil || len(l) != 1 {
		t.Fatalf("after a failed backup with retention 1: %+v, %v; want the old one kept", l, err)
	}
	if left, _ := filepath.Glob(filepath.Join(dir, ".partial-*")); len(left) != 0 {
		t.Fatalf("partial files left: %v", left)
	}
	// A sound one still replaces it.
	if _, err := Create(dir, 1, "node-a", "v1", t0.Add(2*time.Minute), srcs); err != nil {
		t.Fatal(err)
	}
	if l, err := List(dir); err != nil || len(l) != 1 || l[0].Timestamp != t0.Add(2*time.Minute).Format(time.RFC3339Nano) {
		t.Fatalf("retention 1 after a good backup: %+v, %v", l, err)
	}
}

// A backup folder whose metadata.json is not a small regular file (a
// link out of the folder, a huge file) is not listed and its metadata is
// refused; nothing reads it whole.
func TestFolderMetadataMustBeSmallRegularFile(t *testing.T) {
	dir := t.TempDir()
	outside := filepath.Join(t.TempDir(), "meta.json")
	if err := os.WriteFile(outside, []byte(goodMeta), 0o600); err != nil {
		t.Fatal(err)
	}
	mk := func(name string) string {
		p := filepath.Join(dir, name)
		if err := os.Mkdir(p, 0o700); err != nil {
			t.Fatal(err)
		}
		return filepath.Join(p, MetaName)
	}
	if err := os.WriteFile(mk("good"), []byte(goodMeta), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, mk("link")); err != nil {
		t.Fatal(err)
	}
	f, err := os.Create(mk("huge"))
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(maxMeta + 1); err != nil {
		t.Fatal(err)
	}
	f.Close()
	l, err := List(dir)
	if err != nil || len(l) != 1 || l[0].Name != "good" {
		t.Fatalf("List = %+v, %v; want only the good folder", l, err)
	}
	for _, name := range []string{"link", "huge"} {
		if _, err := Metadata(dir, name); !errors.Is(err, ErrCorrupt) {
			t.Errorf("Metadata(%s) = %v, want ErrCorrupt", name, err)
		}
	}
}

// Create writes no backup that Stage would refuse: a state with more
// files than a restore takes is an error when the backup is made.
func TestCreateRefusesWhatStageRefuses(t *testing.T) {
	data := t.TempDir()
	srcs := sources(t, data)
	many := filepath.Join(data, "plugins", "p", "node_modules")
	if err := os.MkdirAll(many, 0o700); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < MaxFiles; i++ {
		f, err := os.Create(filepath.Join(many, strconv.Itoa(i)))
		if err != nil {
			t.Fatal(err)
		}
		f.Close()
	}
	dir := filepath.Join(data, "backups")
	if _, err := Create(dir, 3, "node-a", "v1", time.Now(), srcs); !errors.Is(err, ErrUnrestorable) {
		t.Fatalf("Create = %v, want ErrUnrestorable", err)
	}
	if l, err := List(dir); err != nil || len(l) != 0 {
		t.Fatalf("backups after a refused create: %+v, %v", l, err)
	}
}

// A file name a restore refuses (a backslash, bytes that are not UTF-8)
// makes Create fail, naming it, instead of writing a backup whose restore
// says "damaged".
func TestCreateRefusesNamesStageRefuses(t *testing.T) {
	for _, name := range []string{"we\\ird.txt", "lat\xe9.txt"} {
		data := t.TempDir()
		srcs := sources(t, data)
		www := filepath.Join(data, "plugins", "p", "www")
		if err := os.MkdirAll(www, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(www, name), nil, 0o600); err != nil {
			t.Skipf("this file system refuses the name %q: %v", name, err)
		}
		dir := filepath.Join(data, "backups")
		if _, err := Create(dir, 3, "node-a", "v1", time.Now(), srcs); !errors.Is(err, ErrUnrestorable) {
			t.Fatalf("Create with a file named %q = %v, want ErrUnrestorable", name, err)
		}
	}
}

// A folder source that is a link to a folder kept elsewhere (DATA/plugins
// -> /srv/plugins) is backed up whole, not skipped.
func TestCreateFollowsLinkedFolder(t *testing.T) {
	data := t.TempDir()
	srcs := sources(t, data)
	elsewhere := filepath.Join(t.TempDir(), "plugins")
	if err := os.MkdirAll(filepath.Join(elsewhere, "p"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(elsewhere, "p", "plugin.json"), []byte("{}"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(elsewhere, filepath.Join(data, "plugins")); err != nil {
		t.Skipf("symlink: %v", err)
	}
	dir := filepath.Join(data, "backups")
	p, err := Create(dir, 3, "node-a", "v1", time.Now(), srcs)
	if err != nil {
		t.Fatal(err)
	}
	m, err := Metadata(dir, filepath.Base(p))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range m.Files {
		if f.Name == "plugins/p/plugin.json" {
			return
		}
	}
	t.Fatalf("the linked plugins folder is not in the backup: %+v", m.Files)
}

// A link inside a folder source to a file of the same folder (a plugin's
// handler linked to its current build) is archived as a copy of that
// file and staged as one; a link out of the folder, to a folder or
// dangling is left out.
func TestCreateCopiesLinksToFilesInside(t *testing.T) {
	data := t.TempDir()
	srcs := sources(t, data)
	plug := filepath.Join(data, "plugins", "p")
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.MkdirAll(filepath.Join(plug, "bin"), 0o700))
	must(os.WriteFile(filepath.Join(plug, "bin", "handler-2"), []byte("#!/bin/sh\necho 2\n"), 0o700))
	outside := filepath.Join(t.TempDir(), "secret")
	must(os.WriteFile(outside, []byte("not the plugin's"), 0o600))
	must(os.Symlink("bin/handler-2", filepath.Join(plug, "handler")))
	must(os.Symlink(outside, filepath.Join(plug, "out")))
	must(os.Symlink("bin", filepath.Join(plug, "dir")))
	must(os.Symlink("gone", filepath.Join(plug, "dangling")))
	dir := filepath.Join(data, "backups")
	p, err := Create(dir, 3, "node-a", "v1", time.Now(), srcs)
	must(err)
	into := filepath.Join(t.TempDir(), "staged")
	_, err = Stage(dir, filepath.Base(p), into, "node-a", nil)
	must(err)
	got, err := os.ReadFile(filepath.Join(into, "plugins", "p", "handler"))
	if err != nil || string(got) != "#!/bin/sh\necho 2\n" {
		t.Fatalf("the linked handler staged as %q, %v", got, err)
	}
	if st, err := os.Lstat(filepath.Join(into, "plugins", "p", "handler")); err != nil || !st.Mode().IsRegular() || st.Mode().Perm()&0o100 == 0 {
		t.Fatalf("the linked handler staged as %v, %v; want an executable regular file", st.Mode(), err)
	}
	for _, name := range []string{"out", "dir", "dangling"} {
		if _, err := os.Lstat(filepath.Join(into, "plugins", "p", name)); !os.IsNotExist(err) {
			t.Errorf("the link %s was archived: %v", name, err)
		}
	}
}
