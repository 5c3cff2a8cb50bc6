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
