package backups

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
)

// failing is a store snapshot that fails once told to (the disk filled).
type failing struct {
	Snapshotter
	fail atomic.Bool
}

var errDiskFull = errors.New("disk full")

func (f *failing) Snapshot(w io.Writer) error {
	if f.fail.Load() {
		return errDiskFull
	}
	return f.Snapshotter.Snapshot(w)
}

// A restore whose backup of the current state fails is answered with
// that error, not as a restore under way, and nothing is swapped in.
func TestRestoreAnswersFailedSafetyBackup(t *testing.T) {
	var snap *failing
	h := newHarness(t, "node-a", func(d *Deps) {
		snap = &failing{Snapshotter: d.Ledger}
		d.Ledger = snap
	})
	must(t, h.ledger.Set("claim", "before"))
	path, err := h.c.CreateBackup()
	must(t, err)
	must(t, h.ledger.Set("claim", "after"))
	snap.fail.Store(true)
	err = h.c.RestoreBackup(filepath.Base(path))
	if !errors.Is(err, errDiskFull) {
		t.Fatalf("RestoreBackup = %v, want the failed backup's error", err)
	}
	if h.restart.stops != 0 || len(h.restart.held) != 0 {
		t.Fatalf("a cancelled restore stopped the node (%d stops)", h.restart.stops)
	}
	if left, _ := filepath.Glob(filepath.Join(h.data, ".restore-*")); len(left) != 0 {
		t.Fatalf("staging folder left: %v", left)
	}
	if v, err := h.ledger.Get("claim"); err != nil || v != "after" {
		t.Fatalf("ledger after a cancelled restore: %q, %v", v, err)
	}
}

// RemoveStaging removes staging folders a killed process left (and the
// folders an aside was built in), but none
// when a swap was interrupted (DATA/.pre-restore-*): then it says where
// the previous state is.
func TestRemoveStaging(t *testing.T) {
	data := t.TempDir()
	staged := filepath.Join(data, ".restore-0123456789ab")
	must(t, os.MkdirAll(filepath.Join(staged, "plugins"), 0o700))
	aside := filepath.Join(data, ".pre-restore-20261203T000000")
	must(t, os.MkdirAll(aside, 0o700))
	if removed, err := RemoveStaging(data); err == nil || !strings.Contains(err.Error(), aside) || len(removed) != 0 {
		t.Fatalf("with an interrupted swap: removed %v, err %v", removed, err)
	}
	if _, err := os.Stat(staged); err != nil {
		t.Fatalf("staging folder removed beside an interrupted swap: %v", err)
	}
	must(t, os.Remove(aside))
	building := filepath.Join(data, ".swap-0123") // an aside a crash cut short
	must(t, os.MkdirAll(building, 0o700))
	if removed, err := RemoveStaging(data); err != nil || len(removed) != 2 {
		t.Fatalf("removed %v, err %v", removed, err)
	}
	for _, p := range []string{staged, building} {
		if _, err := os.Stat(p); !os.IsNotExist(err) {
			t.Fatalf("%s left: %v", p, err)
		}
	}
}
