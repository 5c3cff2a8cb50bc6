package backups

import (
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// tree reads the Restored entries of dir: each file's path under dir and
// its content.
func tree(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, e := range Restored {
		root := filepath.Join(dir, e)
		if _, err := os.Lstat(root); err != nil {
			continue
		}
		must(t, filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return err
			}
			b, err := os.ReadFile(p)
			rel, _ := filepath.Rel(dir, p)
			out[rel] = string(b)
			return err
		}))
	}
	return out
}

func write(t *testing.T, files map[string]string) {
	t.Helper()
	for p, s := range files {
		must(t, os.MkdirAll(filepath.Dir(p), 0o700))
		must(t, os.WriteFile(p, []byte(s), 0o600))
	}
}

// swapCrashing runs swap and ends it, as a kill would, after its n-th
// move (n < 0: it runs to the end). It reports whether swap returned.
func swapCrashing(t *testing.T, n int, data, from, aside string) bool {
	moves := 0
	afterMove = func() {
		if moves++; moves == n {
			runtime.Goexit()
		}
	}
	defer func() { afterMove = nil }()
	returned := make(chan bool, 1)
	go func() {
		defer func() { returned <- false }()
		must(t, swap(data, from, aside))
		returned <- true
	}()
	return <-returned
}

// A swap cut short by a crash after any of its moves, or after all of
// them (the restored state never started), is undone at the next start:
// the state before it is back whole, every restored entry that had come
// in is kept aside, and nothing is left to refuse a later restore. The
// same holds for a crash in the middle of the swap that puts the
// previous state back after a restored one failed to start.
func TestRecoverSwapAfterACrash(t *testing.T) {
	for _, second := range []bool{false, true} {
		for n := 1; ; n++ {
			data := t.TempDir()
			staged := filepath.Join(data, ".restore-0123456789ab")
			// ca absent before; node.db absent in the backup.
			write(t, map[string]string{
				filepath.Join(data, "ledger.db"):           "ledger before",
				filepath.Join(data, "node.db"):             "node before",
				filepath.Join(data, "plugins", "a", "p"):   "plugin before",
				filepath.Join(staged, "ledger.db"):         "ledger restored",
				filepath.Join(staged, "ca", "root.pem"):    "ca restored",
				filepath.Join(staged, "plugins", "b", "q"): "plugin restored",
			})
			before := tree(t, data)
			restored := tree(t, staged)
			aside := filepath.Join(data, ".pre-restore-20261203T000000")
			var done bool
			if !second {
				done = swapCrashing(t, n, data, staged, aside)
			} else {
				if !swapCrashing(t, -1, data, staged, aside) {
					t.Fatal("the first swap did not finish")
				}
				done = swapCrashing(t, n, data, aside, filepath.Join(data, ".failed-restore-20261203T000001"))
			}
			kept, err := RecoverSwap(data)
			if err != nil {
				t.Fatalf("second swap %v, crash after move %d: %v", second, n, err)
			}
			if got := tree(t, data); !maps.Equal(got, before) {
				t.Fatalf("second swap %v, crash after move %d: the data folder holds %v, want the state before %v", second, n, got, before)
			}
			// Every restored entry that had come in is kept in the
			// folder RecoverSwap names.
			for _, k := range kept {
				for p, s := range tree(t, k) {
					if restored[p] != s {
						t.Fatalf("kept %s holds %s = %q, not a restored entry", k, p, s)
					}
				}
			}
			if left, _ := filepath.Glob(filepath.Join(data, ".pre-restore-*")); len(left) != 0 {
				t.Fatalf("aside folder left: %v", left)
			}
			if _, err := RemoveStaging(data); err != nil {
				t.Fatalf("after the recovery RemoveStaging refuses: %v", err)
			}
			if done {
				break // n passed the last move
			}
		}
	}
}

// A restore that finished but for removing its aside folder (the journal
// is removed first) is not undone: the restored state stays, and the
// leftover is reported.
func TestRecoverSwapLeavesAFinishedRestore(t *testing.T) {
	data := t.TempDir()
	staged := filepath.Join(data, ".restore-0123456789ab")
	write(t, map[string]string{
		filepath.Join(data, "ledger.db"):   "ledger before",
		filepath.Join(staged, "ledger.db"): "ledger restored",
	})
	aside := filepath.Join(data, ".pre-restore-20261203T000000")
	must(t, swap(data, staged, aside))
	must(t, os.Remove(filepath.Join(aside, swapJournal))) // commitSwap's first step
	if _, err := RecoverSwap(data); err == nil || !strings.Contains(err.Error(), aside) {
		t.Fatalf("RecoverSwap = %v, want the leftover reported", err)
	}
	if got := tree(t, data); got["ledger.db"] != "ledger restored" {
		t.Fatalf("a finished restore was undone: %v", got)
	}
	commitSwap(aside) // no journal: nothing removed
	if _, err := os.Stat(aside); err != nil {
		t.Fatal("commitSwap removed an aside folder without a journal")
	}
}
