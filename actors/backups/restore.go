package backups

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"peerdns/internal/backup"
	"peerdns/internal/store"
	"peerdns/messages"
)

// Restarter is what a restore needs from the owner of the process (the
// composition root implements it): the state files can only be swapped
// with every part of the node stopped, this actor and the stores
// included, and only the process owner can stop them and start them
// again. What to swap, in which order and how to undo it is this
// package's (restoreInPlace).
type Restarter interface {
	// Hold runs f with the node's lifecycle held (Stop waits for f) and
	// reports true; when the node is stopping for good it runs nothing
	// and reports false.
	Hold(f func()) bool
	// StopParts stops every part of the node but the data folder lock
	// and the admin socket (requests meanwhile get 503 with Retry-After).
	StopParts()
	// StartParts starts them again on the files in the data folder. On
	// an error what it started runs until the next StopParts.
	StartParts() error
	// Fatal reports an error the node cannot heal from; the process
	// stops.
	Fatal(err error)
}

// restoreInPlace swaps a staged, checked backup (DATA/.restore-<random>,
// removed at the end) in and restarts the node on it. It publishes
// system-reset to the WebSocket clients, stops every part of the node,
// moves the current Restored entries aside and the staged ones in and
// starts again. If that start fails, the previous entries go back and
// the node starts on them; if even that fails, the node gets a fatal
// error, as it does when a swap fails and cannot move back what it
// moved (errNotUndone): the aside folder then stays, and RecoverSwap
// puts the previous state back at the next start. The state that failed to start is kept in
// DATA/.failed-restore-<time> for a look.
func restoreInPlace(r Restarter, sys *actor.ActorSystem, data, name, staged string, log *slog.Logger) {
	held := r.Hold(func() {
		defer os.RemoveAll(staged)
		sys.EventStream.Publish(&messages.Hint{Type: messages.HintSystemReset})
		r.StopParts()
		aside := filepath.Join(data, ".pre-restore-"+time.Now().UTC().Format("20060102T150405"))
		err := swap(data, staged, aside)
		if errors.Is(err, errNotUndone) {
			// Some of the current entries are still aside, the only
			// copy of them: keep it for RecoverSwap at the next start.
			r.Fatal(fmt.Errorf("restore of %s failed and could not be undone: %v; the state before it is in %s, put back at the next start", name, err, aside))
			return
		}
		if err != nil {
			// Nothing moved (swap undid its moves): start on the
			// current state.
			os.RemoveAll(aside)
			if serr := r.StartParts(); serr != nil {
				r.Fatal(fmt.Errorf("restore of %s failed (%v) and the node cannot start again: %v", name, err, serr))
				return
			}
			log.Error("backup restore failed; nothing changed", "backup", name, "err", err)
			return
		}
		if err = r.StartParts(); err == nil {
			commitSwap(aside)
			log.Info("backup restored", "backup", name)
			return
		}
		r.StopParts()
		// Put the previous state back and start on it.
		failed := filepath.Join(data, ".failed-restore-"+time.Now().UTC().Format("20060102T150405"))
		if rerr := swap(data, aside, failed); rerr != nil {
			r.Fatal(fmt.Errorf("restore of %s failed (%v) and the previous state could not be put back: %v; it is in %s", name, err, rerr, aside))
			return
		}
		if serr := r.StartParts(); serr != nil {
			r.Fatal(fmt.Errorf("restore of %s failed (%v) and the node cannot start on its previous state: %v", name, err, serr))
			return
		}
		os.RemoveAll(aside)
		log.Error("backup restore failed; the previous state is back", "backup", name, "err", err)
	})
	if !held { // the node is stopping for good
		os.RemoveAll(staged)
	}
}

// Restored are the entries a restore replaces in the data folder
// (identity.key stays: a backup of another node is refused).
var Restored = []string{"ledger.db", "node.db", "ca", "plugins", "plugin-data"}

// verify checks a staged backup: its identity is this node's, and both
// stores open.
func (a *Actor) verify(dir string) error {
	got, err := os.ReadFile(filepath.Join(dir, "identity.key"))
	if err != nil {
		return fmt.Errorf("%w: identity.key: %v", backup.ErrCorrupt, err)
	}
	mine, err := os.ReadFile(filepath.Join(a.d.Data, "identity.key"))
	if err != nil {
		return fmt.Errorf("read this node's identity: %w", err)
	}
	if !bytes.Equal(bytes.TrimSpace(got), bytes.TrimSpace(mine)) {
		return fmt.Errorf("%w: its identity.key is not this node's", backup.ErrForeign)
	}
	for _, f := range []string{"ledger.db", "node.db"} {
		db, err := store.Open(filepath.Join(dir, f), store.Options{})
		if err != nil {
			return fmt.Errorf("%w: %s does not load: %v", backup.ErrCorrupt, f, err)
		}
		if err := db.Close(); err != nil {
			return fmt.Errorf("%w: %s: %v", backup.ErrCorrupt, f, err)
		}
	}
	return nil
}

// swap moves the Restored entries of data into aside (created), then
// those of from into data; entries that are absent are skipped. On an
// error it moves back what it moved, so data is as it was; when a move
// back fails too, the error wraps errNotUndone and aside, with its
// journal, holds what did not go back.
// restoreInPlace calls it with every part of the node stopped: to swap a
// staged backup in, and to put the previous state back when the
// restored one does not start.
//
// Before it moves anything it writes in aside the names of the entries
// data holds (makeAside), so that a swap a crash interrupts can be
// undone at the next start (RecoverSwap).
func swap(data, from, aside string) error {
	if err := makeAside(data, aside); err != nil {
		return err
	}
	type move struct{ from, to string }
	var done []move
	undo := func(err error) error {
		var errs []error
		for i := len(done) - 1; i >= 0; i-- {
			if uerr := os.Rename(done[i].to, done[i].from); uerr != nil {
				errs = append(errs, uerr)
			}
		}
		if len(errs) > 0 {
			return fmt.Errorf("%w (%w: %w)", err, errNotUndone, errors.Join(errs...))
		}
		return err
	}
	mv := func(a, b string) error {
		if _, err := os.Lstat(a); errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if err := os.Rename(a, b); err != nil {
			return err
		}
		done = append(done, move{a, b})
		if afterMove != nil {
			afterMove()
		}
		return nil
	}
	for _, e := range Restored {
		if err := mv(filepath.Join(data, e), filepath.Join(aside, e)); err != nil {
			return undo(err)
		}
	}
	for _, e := range Restored {
		if err := mv(filepath.Join(from, e), filepath.Join(data, e)); err != nil {
			return undo(err)
		}
	}
	return nil
}

// errNotUndone: a swap failed and some of its moves could not be moved
// back.
var errNotUndone = errors.New("some moves could not be undone")

// afterMove, when set (by tests), runs after each of swap's moves: a
// test ends the goroutine there to leave the folder as a crash would.
var afterMove func()

// RemoveStaging removes the staging folders (DATA/.restore-<random>) an
// earlier process left when it stopped (a crash, a kill) while it staged
// a restore: up to internal/backup's MaxTotal each, that nothing else
// would ever remove. The composition root calls it once, with the data
// folder locked and before anything could stage a restore or write a
// backup. It returns what it removed, with the folders an aside was
// built in (DATA/.swap-<random>, makeAside) and what backups the process
// stopped while writing left (DATA/backups/.partial-<random>: archives,
// rendered stores, the plugin databases' copy; no backup name reaches
// them). A
// DATA/.pre-restore-<time> still
// there (one RecoverSwap, called first, could not undo) holds a previous
// state: nothing is removed and the error says where to look.
func RemoveStaging(data string) ([]string, error) {
	if aside, _ := filepath.Glob(filepath.Join(data, ".pre-restore-*")); len(aside) > 0 {
		return nil, fmt.Errorf("a restore was interrupted while it swapped the state: the state before it is in %s; staging folders are kept", strings.Join(aside, ", "))
	}
	left, err := filepath.Glob(filepath.Join(data, ".restore-*"))
	if err != nil {
		return nil, err
	}
	swaps, _ := filepath.Glob(filepath.Join(data, ".swap-*")) // makeAside's
	left = append(left, swaps...)
	partial, _ := filepath.Glob(filepath.Join(data, "backups", backup.PartialPrefix+"*")) // backup.Create's, snapshotPlugins'

	left = append(left, partial...)
	var removed []string
	var errs []error
	for _, p := range left {
		if err := os.RemoveAll(p); err != nil {
			errs = append(errs, err)
			continue
		}
		removed = append(removed, p)
	}
	return removed, errors.Join(errs...)
}
