package store

import (
	"bytes"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"peerdns/internal/testutil"
)

// A file cut in the middle of its last commit (a crash mid-append), and
// one whose end is NUL bytes (the size reached the disk, the data did
// not), open with every whole commit and nothing of the torn one, and
// the repair is logged. Every cut point inside the last record is tried.
func TestTornLastWriteRepairedAtOpen(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "s.db")
	db, err := Open(path, Options{Durable: true})
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 20; i++ {
		if err := db.Set(fmt.Sprintf("k%02d", i), strings.Repeat("v", 40)); err != nil {
			t.Fatal(err)
		}
	}
	sizeBefore := fileSize(path)
	if err := db.Set("last", "the torn one"); err != nil {
		t.Fatal(err)
	}
	db.Close()
	whole, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	last := whole[sizeBefore:]
	check := func(name string, content []byte) {
		t.Helper()
		p := filepath.Join(dir, name+".db")
		if err := os.WriteFile(p, content, 0o600); err != nil {
			t.Fatal(err)
		}
		lb := &testutil.LogBuffer{}
		db, err := Open(p, Options{Log: slog.New(slog.NewTextHandler(lb, nil))})
		if err != nil {
			t.Fatalf("%s: open: %v", name, err)
		}
		defer db.Close()
		kvs, err := db.List("k")
		if err != nil || len(kvs) != 20 {
			t.Fatalf("%s: %d of 20 whole commits after the repair (%v)", name, len(kvs), err)
		}
		if _, err := db.Get("last"); err != ErrNotFound {
			t.Fatalf("%s: the torn commit is there: %v", name, err)
		}
		if !strings.Contains(lb.String(), "store repaired a torn last write") {
			t.Fatalf("%s: the repair was not logged: %q", name, lb.String())
		}
		if err := db.Set("after", "x"); err != nil {
			t.Fatalf("%s: write after the repair: %v", name, err)
		}
	}
	for cut := 1; cut < len(last); cut++ {
		check(fmt.Sprintf("cut%d", cut), whole[:int(sizeBefore)+cut])
	}
	check("nul", append(append([]byte{}, whole[:sizeBefore]...), bytes.Repeat([]byte{0}, 4096)...))
	check("torn-then-nul", append(append([]byte{}, whole[:int(sizeBefore)+len(last)/2]...), bytes.Repeat([]byte{0}, 100)...))

	// A whole file opens without a repair line.
	lb := &testutil.LogBuffer{}
	db, err = Open(path, Options{Log: slog.New(slog.NewTextHandler(lb, nil))})
	if err != nil {
		t.Fatal(err)
	}
	db.Close()
	if lb.String() != "" {
		t.Fatalf("a whole file logged %q", lb.String())
	}
}

// NUL bytes between two whole commits (a stretch of the file whose data
// never reached the disk while a later commit's did) are skipped by
// buntdb's loader, which then places the next commit as if they were not
// there, over the end of the last commit. The store rewrites such a file
// at Open: every commit stays, and so do those written after.
func TestNULsInsideFileKeepCommits(t *testing.T) {
	path := filepath.Join(t.TempDir(), "s.db")
	set := func(k, v string) string {
		return fmt.Sprintf("*3\r\n$3\r\nset\r\n$%d\r\n%s\r\n$%d\r\n%s\r\n", len(k), k, len(v), v)
	}
	content := set("a", "one") + string(make([]byte, 8)) + set("b", "two")
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	lb := &testutil.LogBuffer{}
	db, err := Open(path, Options{Durable: true, Log: slog.New(slog.NewTextHandler(lb, nil))})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(lb.String(), "store rewrote a file with NUL bytes inside") {
		t.Fatalf("the rewrite was not logged: %q", lb.String())
	}
	// NULs inside a value (a ledger op is CBOR) are data, not a gap.
	if err := db.Set("c", "th\x00ree"); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	lb = &testutil.LogBuffer{}
	db, err = Open(path, Options{Durable: true, Log: slog.New(slog.NewTextHandler(lb, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if lb.String() != "" {
		t.Fatalf("a whole file with NULs in a value logged %q", lb.String())
	}
	for k, want := range map[string]string{"a": "one", "b": "two", "c": "th\x00ree"} {
		if got, err := db.Get(k); err != nil || got != want {
			t.Errorf("Get(%q) = %q, %v; want %q", k, got, err, want)
		}
	}
}
