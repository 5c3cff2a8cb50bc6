package backup

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestValidName(t *testing.T) {
	for _, ok := range []string{"backup-20261123T000000-000Z.tar.gz", "backup-1", "a.b_c-d"} {
		if _, err := ValidName(ok); err != nil {
			t.Errorf("%q refused: %v", ok, err)
		}
	}
	for _, bad := range []string{"", ".tar.gz", "../x", "a/b", "..", ".hidden", "a%2Fb", "a\x00b", "a\\b", "x..y", strings.Repeat("a", 200), "a b", "é"} {
		if _, err := ValidName(bad); !errors.Is(err, ErrBadName) {
			t.Errorf("%q accepted", bad)
		}
	}
}

// sources is a small node-like state: two "stores", an identity, a ca/.
func sources(t *testing.T, dir string) []Source {
	t.Helper()
	must := func(err error) {
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.WriteFile(filepath.Join(dir, "identity.key"), []byte("key-1\n"), 0o600))
	must(os.MkdirAll(filepath.Join(dir, "ca"), 0o700))
	must(os.WriteFile(filepath.Join(dir, "ca", "root.pem"), []byte("PEM"), 0o600))
	return []Source{
		{Name: "ledger.db", Write: func(w io.Writer) error { _, err := io.WriteString(w, "ledger"); return err }},
		{Name: "node.db", Write: func(w io.Writer) error { _, err := io.WriteString(w, "node"); return err }},
		{Name: "identity.key", Path: filepath.Join(dir, "identity.key")},
		{Name: "ca", Path: filepath.Join(dir, "ca")},
		{Name: "plugins", Path: filepath.Join(dir, "plugins")}, // absent: skipped
	}
}

func TestCreateListMetadataPruneDelete(t *testing.T) {
	data := t.TempDir()
	dir := filepath.Join(data, "backups")
	srcs := sources(t, data)
	t0 := time.Date(2026, 11, 23, 10, 0, 0, 0, time.UTC)
	var paths []string
	for i := 0; i < 3; i++ {
		p, err := Create(dir, 2, "node-a", "v1", t0.Add(time.Duration(i)*time.Minute), srcs)
		if err != nil {
			t.Fatal(err)
		}
		paths = append(paths, p)
	}
	list, err := List(dir)
	if err != nil || len(list) != 2 {
		t.Fatalf("list %v %v (want 2: retention 2)", list, err)
	}
	if list[0].Name != filepath.Base(paths[2]) || list[0].FileCount != 4 || list[0].Size == 0 || list[0].SizeFormatted == "" {
		t.Fatalf("newest %+v", list[0])
	}
	m, err := Metadata(dir, strings.TrimSuffix(list[0].Name, Ext))
	if err != nil || m.NodeID != "node-a" || len(m.Files) != 4 || m.Files[0].Name != "ledger.db" || m.Files[0].Size != 6 {
		t.Fatalf("metadata %+v %v", m, err)
	}
	if _, err := Metadata(dir, "nope"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("unknown: %v", err)
	}
	// A folder backup (an unpacked archive) is listed and deleted too.
	into := filepath.Join(dir, "unpacked")
	if _, err := Stage(dir, list[0].Name, into, "node-a", nil); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(filepath.Join(into, "ca", "root.pem")); string(got) != "PEM" {
		t.Fatalf("staged ca/root.pem = %q", got)
	}
	if list, _ = List(dir); len(list) != 3 {
		t.Fatalf("folder backup not listed: %v", list)
	}
	if err := Delete(dir, "unpacked"); err != nil {
		t.Fatal(err)
	}
	if err := Delete(dir, filepath.Base(paths[2])); err != nil {
		t.Fatal(err)
	}
	if list, _ = List(dir); len(list) != 1 || list[0].Name != filepath.Base(paths[1]) {
		t.Fatalf("after deletes: %v", list)
	}
	if err := Delete(dir, "../backups"); !errors.Is(err, ErrBadName) {
		t.Fatalf("traversal: %v", err)
	}
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), ".partial") {
			t.Fatalf("temporary file left: %s", e.Name())
		}
	}
}

// archive builds a .tar.gz from entries (name → content; a name ending
// in "@link" is a symlink, one ending in "/" a folder).
func archive(t testing.TB, meta string, entries [][2]string) []byte {
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	all := append([][2]string{{MetaName, meta}}, entries...)
	for _, e := range all {
		if name, ok := strings.CutSuffix(e[0], "@link"); ok {
			_ = tw.WriteHeader(&tar.Header{Name: name, Typeflag: tar.TypeSymlink, Linkname: e[1]})
			continue
		}
		if strings.HasSuffix(e[0], "/") {
			_ = tw.WriteHeader(&tar.Header{Name: e[0], Mode: 0o755, Typeflag: tar.TypeDir})
			continue
		}
		_ = tw.WriteHeader(&tar.Header{Name: e[0], Mode: 0o600, Size: int64(len(e[1])), Typeflag: tar.TypeReg})
		_, _ = tw.Write([]byte(e[1]))
	}
	tw.Close()
	gz.Close()
	return buf.Bytes()
}

const goodMeta = `{"format":1,"nodeId":"node-a","timestamp":"2026-11-23T10:00:00Z","files":[]}`

var required = [][2]string{{"ledger.db", "l"}, {"node.db", "n"}, {"identity.key", "k"}}

// Damaged, hostile and foreign archives are refused and leave nothing
// behind, inside or outside the staging folder.
func TestStageRefuses(t *testing.T) {
	for name, tc := range map[string]struct {
		body []byte
		want error
	}{
		"not gzip":            {[]byte("hello"), ErrCorrupt},
		"no metadata":         {archive(t, `{}`, required), ErrCorrupt},
		"foreign":             {archive(t, strings.Replace(goodMeta, "node-a", "node-b", 1), required), ErrForeign},
		"traversal":           {archive(t, goodMeta, append(required, [2]string{"../../escape", "x"})), ErrCorrupt},
		"absolute":            {archive(t, goodMeta, append(required, [2]string{"/etc/escape", "x"})), ErrCorrupt},
		"ca traversal":        {archive(t, goodMeta, append(required, [2]string{"ca/../../escape", "x"})), ErrCorrupt},
		"symlink":             {archive(t, goodMeta, append(required, [2]string{"ca/x@link", "/etc/passwd"})), ErrCorrupt},
		"folder traversal":    {archive(t, goodMeta, append(required, [2]string{"../../escape/", ""})), ErrCorrupt},
		"folder absolute":     {archive(t, goodMeta, append(required, [2]string{"/tmp/escape/", ""})), ErrCorrupt},
		"plugins traversal":   {archive(t, goodMeta, append(required, [2]string{"plugins/../../escape/", ""})), ErrCorrupt},
		"unknown folder":      {archive(t, goodMeta, append(required, [2]string{"logs/", ""})), ErrCorrupt},
		"backslash folder":    {archive(t, goodMeta, append(required, [2]string{"plugins\\..\\..\\escape/", ""})), ErrCorrupt},
		"folder then file":    {archive(t, goodMeta, append(required, [2]string{"ca/x/", ""}, [2]string{"ca/x", "f"})), ErrCorrupt},
		"file then folder":    {archive(t, goodMeta, append(required, [2]string{"ca/x", "f"}, [2]string{"ca/x/", ""})), ErrCorrupt},
		"folder over a store": {archive(t, goodMeta, append([][2]string{{"node.db/", ""}}, required...)), ErrCorrupt},
		"unknown file":        {archive(t, goodMeta, append(required, [2]string{"logs/core.log", "x"})), ErrCorrupt},
		"missing":             {archive(t, goodMeta, required[:2]), ErrCorrupt},
		"duplicate":           {archive(t, goodMeta, append(required, [2]string{"node.db", "again"})), ErrCorrupt},
		"truncated":           {archive(t, goodMeta, required)[:60], ErrCorrupt},
	} {
		t.Run(name, func(t *testing.T) {
			root := t.TempDir()
			dir := filepath.Join(root, "backups")
			if err := os.MkdirAll(dir, 0o700); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, "b.tar.gz"), tc.body, 0o600); err != nil {
				t.Fatal(err)
			}
			into := filepath.Join(root, "staged")
			if _, err := Stage(dir, "b", into, "node-a", nil); !errors.Is(err, tc.want) {
				t.Fatalf("err = %v, want %v", err, tc.want)
			}
			if _, err := os.Stat(into); !os.IsNotExist(err) {
				t.Fatal("staging folder left behind")
			}
			if _, err := os.Stat(filepath.Join(root, "escape")); !os.IsNotExist(err) {
				t.Fatal("an entry escaped")
			}
		})
	}
}

// FuzzStage: any archive bytes are refused or staged inside the staging
// folder, never a panic or a file elsewhere.
func FuzzStage(f *testing.F) {
	f.Add(archive(f, goodMeta, required))
	f.Add(archive(f, goodMeta, append(required, [2]string{"../x", "y"})))
	f.Add([]byte{0x1f, 0x8b})
	f.Fuzz(func(t *testing.T, body []byte) {
		root := t.TempDir()
		dir := filepath.Join(root, "backups")
		_ = os.MkdirAll(dir, 0o700)
		_ = os.WriteFile(filepath.Join(dir, "b.tar.gz"), body, 0o600)
		_, _ = Stage(dir, "b", filepath.Join(root, "staged"), "node-a", nil)
		ents, _ := os.ReadDir(root)
		for _, e := range ents {
			if e.Name() != "backups" && e.Name() != "staged" {
				t.Fatalf("wrote %s outside the staging folder", e.Name())
			}
		}
	})
}

// Backups within one second are listed newest first and the retention
// keeps the newest: metadata.json's time drops trailing zeros (…00Z,
// …00.1Z, …00.15Z), so its text does not sort as the time does.
func TestListOrdersByTimeWithinASecond(t *testing.T) {
	data := t.TempDir()
	dir := filepath.Join(data, "backups")
	srcs := sources(t, data)
	t0 := time.Date(2026, 11, 23, 10, 0, 0, 0, time.UTC)
	var names []string
	for _, d := range []time.Duration{0, 100 * time.Millisecond, 150 * time.Millisecond} {
		p, err := Create(dir, 2, "node-a", "v1", t0.Add(d), srcs)
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, filepath.Base(p))
	}
	list, err := List(dir)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, b := range list {
		got = append(got, b.Name)
	}
	if want := []string{names[2], names[1]}; strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("kept %v, want the two newest %v", got, want)
	}
}
