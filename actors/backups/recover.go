package backups

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// A swap interrupted by a crash (a kill, a power cut) leaves the data
// folder with some of the previous entries moved aside and some of the
// restored ones moved in. swap writes, before its first move, the names
// of the entries the data folder held (swapJournal, in the aside
// folder); from it RecoverSwap tells every entry's origin at the next
// start and puts the previous state back whole: an entry the journal
// names whose previous copy is still aside was replaced (or not yet
// moved back), one the journal does not name came with the restore.
// The restore was never finished, so the node starts where it was before
// it, as a restore whose restored state does not start does; the
// entries that came with it are kept in DATA/.failed-restore-<time> for
// a look.

// swapJournal is the file in an aside folder that names the entries the
// data folder held when the swap began, one a line.
const swapJournal = ".swap-journal"

// makeAside creates aside with the journal of the entries data holds
// in it: built in a folder of its own (DATA/.swap-<random>) and renamed
// into place, so that a .pre-restore folder always has its journal whole
// (a leftover .swap folder is removed by RemoveStaging).
func makeAside(data, aside string) error {
	var present []string
	for _, e := range Restored {
		if _, err := os.Lstat(filepath.Join(data, e)); err == nil {
			present = append(present, e)
		}
	}
	tmp, err := os.MkdirTemp(data, ".swap-")
	if err != nil {
		return err
	}
	f, err := os.OpenFile(filepath.Join(tmp, swapJournal), os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err == nil {
		_, err = f.WriteString(strings.Join(present, "\n"))
		if serr := f.Sync(); err == nil {
			err = serr
		}
		if cerr := f.Close(); err == nil {
			err = cerr
		}
	}
	if err == nil {
		err = os.Rename(tmp, aside)
	}
	if err != nil {
		os.RemoveAll(tmp)
	}
	return err
}

// commitSwap removes aside once the state swapped in runs: the journal
// first, so that a crash in the middle of the removal does not undo a
// restore that finished.
func commitSwap(aside string) {
	if os.Remove(filepath.Join(aside, swapJournal)) == nil {
		os.RemoveAll(aside)
	}
}

// RecoverSwap undoes the swaps an earlier process left unfinished in data
// (DATA/.pre-restore-<time> folders): the previous entries go back in
// place, the restored ones to DATA/.failed-restore-<time>, and the aside
// folder is removed. It returns, for each swap undone, where the
// restored entries went. An aside folder without a journal that holds
// entries (a restore that finished but for removing it, or written by a
// process that kept no journal) is left alone and reported as an error,
// as is any move that fails (the next start tries again); an empty one
// is removed. The
// composition root calls it once, with the data folder locked, before
// RemoveStaging and before any store opens.
func RecoverSwap(data string) (kept []string, err error) {
	asides, err := filepath.Glob(filepath.Join(data, ".pre-restore-*"))
	if err != nil {
		return nil, err
	}
	slices.Sort(asides) // named by time: the oldest first
	var errs []error
	for _, aside := range asides {
		failed, err := undoSwap(data, aside)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if failed != "" {
			kept = append(kept, failed)
		}
	}
	return kept, errors.Join(errs...)
}

// undoSwap puts back the previous state swap moved to aside, and returns
// the folder that holds the entries that came with the restore ("" when
// none had).
func undoSwap(data, aside string) (string, error) {
	b, err := os.ReadFile(filepath.Join(aside, swapJournal))
	if errors.Is(err, fs.ErrNotExist) {
		if ents, rerr := os.ReadDir(aside); rerr == nil && len(ents) == 0 {
			return "", os.Remove(aside)
		}
		return "", fmt.Errorf("%s holds the state before a restore and no journal of the swap: move its entries back by hand, or remove it", aside)
	}
	if err != nil {
		return "", err
	}
	present := strings.Split(string(b), "\n")
	var failed string
	for _, e := range Restored {
		cur, prev := filepath.Join(data, e), filepath.Join(aside, e)
		_, curErr := os.Lstat(cur)
		_, prevErr := os.Lstat(prev)
		if curErr == nil && (prevErr == nil || !slices.Contains(present, e)) {
			// Came with the restore.
			if failed == "" {
				if failed, err = os.MkdirTemp(data, ".failed-restore-"+time.Now().UTC().Format("20060102T150405")+"-"); err != nil {
					return "", err
				}
			}
			if err := os.Rename(cur, filepath.Join(failed, e)); err != nil {
				return "", err
			}
		}
		if prevErr == nil {
			if err := os.Rename(prev, cur); err != nil {
				return "", err
			}
		}
	}
	return failed, os.RemoveAll(aside)
}
