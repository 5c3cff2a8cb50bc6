package node

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"peerdns/internal/backup"
	"peerdns/internal/store"
	"peerdns/messages"
)

// Restoring a backup.
//
// RestoreBackup stages and checks the backup while the node runs
// (backup.Stage: every entry, the stores open, the identity is this
// node's); any problem is the request's error and nothing changes. Then,
// after the request was answered, the node restores in place: it writes
// a backup of the current state first (so the restore can be undone),
// publishes system-reset to the WebSocket clients, stops every part but
// the data folder lock and the admin socket (requests meanwhile get 503
// with Retry-After, handoff.go), moves the current state files aside,
// moves the staged ones in and starts again. If that start fails, the
// previous files go back and the node starts on them; if even that
// fails, the node reports a fatal error (Fatal). The state that failed
// to start is kept in DATA/.failed-restore-<time> for a look.

// restored are the entries a restore replaces in the data folder.
var restored = []string{"ledger.db", "node.db", "ca", "plugins", "plugin-data"}

// RestoreBackup checks the backup called name and, when it is sound,
// restores it in the background.
func (n *Node) RestoreBackup(name string) error {
	var rnd [6]byte
	_, _ = rand.Read(rnd[:])
	staged := filepath.Join(n.orig.Data, ".restore-"+hex.EncodeToString(rnd[:]))
	if _, err := backup.Stage(n.backupDir(), name, staged, n.id.ID(), n.verifyStaged); err != nil {
		n.logs["core"].Warn("backup restore refused", "backup", name, "err", err)
		return err
	}
	n.logs["core"].Info("restoring backup", "backup", name)
	go n.swapIn(staged, name)
	return nil
}

// verifyStaged checks a staged backup: its identity is this node's, and
// both stores open.
func (n *Node) verifyStaged(dir string) error {
	got, err := os.ReadFile(filepath.Join(dir, "identity.key"))
	if err != nil {
		return fmt.Errorf("%w: identity.key: %v", backup.ErrCorrupt, err)
	}
	mine, err := os.ReadFile(filepath.Join(n.orig.Data, "identity.key"))
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

// swapIn restores the staged state in place (see the comment above).
func (n *Node) swapIn(staged, name string) {
	defer os.RemoveAll(staged)
	n.lifeMu.Lock()
	defer n.lifeMu.Unlock()
	if n.stopped {
		return
	}
	core := n.logs["core"]
	if _, err := n.CreateBackup(); err != nil {
		core.Error("restore cancelled: cannot back up the current state first", "backup", name, "err", err)
		return
	}
	n.root.System.EventStream.Publish(&messages.Hint{Type: messages.HintSystemReset})
	n.stopParts()
	aside := filepath.Join(n.orig.Data, ".pre-restore-"+time.Now().UTC().Format("20060102T150405"))
	err := swapFiles(n.orig.Data, staged, aside)
	if err != nil {
		// Nothing moved (swapFiles undid its moves): start on the
		// current state.
		os.RemoveAll(aside)
		if serr := n.start(); serr != nil {
			n.fail(fmt.Errorf("restore of %s failed (%v) and the node cannot start again: %v", name, err, serr))
			return
		}
		n.logs["core"].Error("backup restore failed; nothing changed", "backup", name, "err", err)
		return
	}
	if err = n.start(); err == nil {
		os.RemoveAll(aside)
		n.logs["core"].Info("backup restored", "backup", name)
		return
	}
	n.stopParts()
	// Put the previous state back and start on it.
	if rerr := swapFiles(n.orig.Data, aside, filepath.Join(n.orig.Data, ".failed-restore-"+time.Now().UTC().Format("20060102T150405"))); rerr != nil {
		n.fail(fmt.Errorf("restore of %s failed (%v) and the previous state could not be put back: %v; it is in %s", name, err, rerr, aside))
		return
	}
	if serr := n.start(); serr != nil {
		n.fail(fmt.Errorf("restore of %s failed (%v) and the node cannot start on its previous state: %v", name, err, serr))
		return
	}
	os.RemoveAll(aside)
	n.logs["core"].Error("backup restore failed; the previous state is back", "backup", name, "err", err)
}

// swapFiles moves the restored entries of data into aside, then those of
// from into data. On an error it moves back what it moved.
func swapFiles(data, from, aside string) error {
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
	for _, e := range restored {
		if err := mv(filepath.Join(data, e), filepath.Join(aside, e)); err != nil {
			undo()
			return err
		}
	}
	for _, e := range restored {
		if err := mv(filepath.Join(from, e), filepath.Join(data, e)); err != nil {
			undo()
			return err
		}
	}
	return nil
}
