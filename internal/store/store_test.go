package store

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/tidwall/buntdb"
)

func TestRoundTripAndReopen(t *testing.T) {
	path := filepath.Join(t.TempDir(), "x.db")
	db, err := Open(path, Options{Durable: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Set("a:1", "one"); err != nil {
		t.Fatal(err)
	}
	if err := db.Update(func(tx *Tx) error {
		if err := tx.Set("a:2", "two"); err != nil {
			return err
		}
		return tx.Set("b:1", "other")
	}); err != nil {
		t.Fatal(err)
	}
	if err := db.Delete("missing"); err != nil {
		t.Fatalf("Delete(missing) = %v", err)
	}
	db = reopen(t, db, path)
	kvs, err := db.List("a:")
	if err != nil {
		t.Fatal(err)
	}
	if len(kvs) != 2 || kvs[0] != (KV{"a:1", "one"}) || kvs[1] != (KV{"a:2", "two"}) {
		t.Fatalf("List(a:) = %v", kvs)
	}
	if _, err := db.Get("nope"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Get(nope) err = %v, want ErrNotFound", err)
	}
}

func TestFailedUpdateWritesNothing(t *testing.T) {
	db, err := Open(filepath.Join(t.TempDir(), "x.db"), Options{Durable: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	boom := errors.New("boom")
	err = db.Update(func(tx *Tx) error {
		if err := tx.Set("k", "v"); err != nil {
			return err
		}
		return boom
	})
	if !errors.Is(err, boom) {
		t.Fatalf("Update err = %v", err)
	}
	if _, err := db.Get("k"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("rolled-back key visible: %v", err)
	}
}

func TestHealth(t *testing.T) {
	db, err := Open(filepath.Join(t.TempDir(), "h.db"), Options{Durable: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Health(); err != nil {
		t.Fatalf("fresh store Health = %v", err)
	}
	// A transaction that the caller rolls back is not a store failure.
	refused := errors.New("refused by caller")
	if err := db.Update(func(*Tx) error { return refused }); !errors.Is(err, refused) {
		t.Fatalf("Update = %v, want the caller's error", err)
	}
	if err := db.Health(); err != nil {
		t.Fatalf("Health after a rolled-back tx = %v", err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if err := db.Health(); err == nil {
		t.Fatal("closed store reports healthy")
	}
}

// TestUpdateLazy: a lazy commit is visible and kept across a reopen, the
// store is back to fsyncing every commit afterwards, and lazy and synced
// commits from many goroutines interleave safely.
func TestUpdateLazy(t *testing.T) {
	path := filepath.Join(t.TempDir(), "x.db")
	db, err := Open(path, Options{Durable: true})
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 50 {
				update := db.Update
				if (g+i)%2 == 0 {
					update = db.UpdateLazy
				}
				if err := update(func(tx *Tx) error { return tx.Set(fmt.Sprintf("k:%d:%02d", g, i), "v") }); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	var cfg buntdb.Config
	if err := db.db.ReadConfig(&cfg); err != nil {
		t.Fatal(err)
	}
	if cfg.SyncPolicy != buntdb.Always {
		t.Fatalf("sync policy after UpdateLazy = %v, want Always", cfg.SyncPolicy)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	db, err = Open(path, Options{Durable: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	kvs, err := db.List("k:")
	if err != nil {
		t.Fatal(err)
	}
	if len(kvs) != 400 {
		t.Fatalf("%d keys after reopen, want 400", len(kvs))
	}
}

// Rewriting one key grows the file by each write; Shrink cuts it back to
// the live data and keeps the newest value.
func TestShrinkCutsTheFileToTheLiveData(t *testing.T) {
	path := filepath.Join(t.TempDir(), "x.db")
	db, err := Open(path, Options{ManualShrink: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	big := strings.Repeat("v", 64<<10)
	for i := range 32 {
		if err := db.Set("k", fmt.Sprint(i, big)); err != nil {
			t.Fatal(err)
		}
	}
	if got := db.FileSize(); got < 32*64<<10 {
		t.Fatalf("FileSize() = %d after 32 writes of 64 KiB, want at least %d", got, 32*64<<10)
	}
	if err := db.Shrink(); err != nil {
		t.Fatal(err)
	}
	if got := db.FileSize(); got > 2*64<<10 {
		t.Fatalf("FileSize() = %d after Shrink, want one value's worth (about %d)", got, 64<<10)
	}
	if v, err := db.Get("k"); err != nil || v != fmt.Sprint(31, big) {
		t.Fatalf("Get(k) after Shrink = %.10q, %v; want the last write", v, err)
	}
	db = reopen(t, db, path)
	if v, err := db.Get("k"); err != nil || v != fmt.Sprint(31, big) {
		t.Fatalf("Get(k) after reopen = %.10q, %v; want the last write", v, err)
	}
}

// reopen closes db, which must close cleanly, and opens path again; the
// new handle is closed at the end of t.
func reopen(t *testing.T, db *DB, path string) *DB {
	t.Helper()
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	db, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	return db
}
