package backups

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"peerdns/internal/backup"
	"peerdns/internal/store"
)

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

// Swap moves the Restored entries of data into aside (created), then
// those of from into data; entries that are absent are skipped. On an
// error it moves back what it moved, so data is as it was. The node
// calls it with every part stopped: to swap a staged backup in, and to
// put the previous state back when the restored one does not start.
func Swap(data, from, aside string) error {
	if err := os.MkdirAll(aside, 0o700); err != nil {
		return err
	}
	type move struct{ from, to string }
	var done []move
	undo := func() {
		for i := len(done) - 1; i >= 0; i-- {
			_ = os.Rename(done[i].to, done[i].from)
		}
	}
	mv := func(a, b string) error {
		if _, err := os.Lstat(a); errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if err := os.Rename(a, b); err != nil {
			return err
		}
		done = append(done, move{a, b})
		return nil
	}
	for _, e := range Restored {
		if err := mv(filepath.Join(data, e), filepath.Join(aside, e)); err != nil {
			undo()
			return err
		}
	}
	for _, e := range Restored {
		if err := mv(filepath.Join(from, e), filepath.Join(data, e)); err != nil {
			undo()
			return err
		}
	}
	return nil
}
