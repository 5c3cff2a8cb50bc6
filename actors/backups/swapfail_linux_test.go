package backups

import (
	"os/exec"
	"path/filepath"
	"sync"
	"testing"

	"peerdns/internal/store"
)

// A swap that fails and cannot undo its moves either (the data folder
// stopped taking renames: a failing disk; here it is made immutable
// after the first move) leaves the previous state where the moves left
// it, in the aside folder, for RecoverSwap at the next start: the
// restore does not remove the aside folder, the only copy of that state.
func TestRestoreKeepsAsideWhenSwapCannotUndo(t *testing.T) {
	h := newHarness(t, "node-a", nil)
	if out, err := exec.Command("chattr", "-i", h.data).CombinedOutput(); err != nil {
		t.Skipf("chattr: %v: %s (needs root, chattr and a file system with attributes)", err, out)
	}
	t.Cleanup(func() { _ = exec.Command("chattr", "-i", h.data).Run() })
	must(t, h.ledger.Set("claim", "before"))
	path, err := h.c.CreateBackup()
	must(t, err)
	must(t, h.ledger.Set("claim", "after"))
	var once sync.Once
	afterMove = func() {
		once.Do(func() {
			if out, err := exec.Command("chattr", "+i", h.data).CombinedOutput(); err != nil {
				t.Errorf("chattr +i: %v: %s", err, out)
			}
		})
	}
	t.Cleanup(func() { afterMove = nil })
	must(t, h.c.RestoreBackup(filepath.Base(path)))
	h.restored()
	afterMove = nil
	must(t, exec.Command("chattr", "-i", h.data).Run())
	if h.restart.fatal == nil {
		t.Fatal("a swap that could not be undone was not fatal")
	}
	kept, err := RecoverSwap(h.data)
	must(t, err)
	if len(kept) != 0 {
		t.Fatalf("restored entries kept: %v; none came in", kept)
	}
	db, err := store.Open(filepath.Join(h.data, "ledger.db"), store.Options{})
	must(t, err)
	defer db.Close()
	if v, err := db.Get("claim"); err != nil || v != "after" {
		t.Fatalf("ledger.db after the next start: claim = %q, %v; want the state before the restore", v, err)
	}
}
