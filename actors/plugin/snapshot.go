package plugin

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
)

// Backups of plugin databases go through their owner, this supervisor,
// as the ledger's go through its store: SnapshotDatabases writes every
// loaded plugin's database with store.Snapshot (one buntdb read
// transaction: each put a handler made is wholly in the copy or not at
// all, whatever the handler writes meanwhile) and copies the files of
// plugins whose database is not open (stopped or not loaded: nothing
// writes them). The supervisor answers it between two other messages,
// so no plugin loads, stops or reloads while it runs; the handlers' own
// db calls go on during the snapshot.

// SnapshotDatabases asks the plugins supervisor to write a consistent
// copy of DATA/plugin-data into Dir (an empty folder), laid out as the
// original: <domain>/data.db. The reply is a *SnapshotDatabasesReply.
type SnapshotDatabases struct{ Dir string }

// SnapshotDatabasesReply says how many files were written, or why not.
type SnapshotDatabasesReply struct {
	Files int
	Err   error
}

func (a *Actor) snapshot(dir string) *SnapshotDatabasesReply {
	open := map[string]*pluginDB{}
	for _, d := range a.dying {
		if d.db != nil {
			open[d.domain] = d.db
		}
	}
	for _, e := range a.entries {
		if m := e.manifest(); m != nil && e.db != nil {
			open[m.Domain] = e.db
		}
	}
	folders, err := os.ReadDir(a.d.DataDir)
	if errors.Is(err, os.ErrNotExist) {
		return &SnapshotDatabasesReply{}
	}
	if err != nil {
		return &SnapshotDatabasesReply{Err: fmt.Errorf("plugin data: %w", err)}
	}
	if st, err := os.Stat(a.d.DataDir); err == nil {
		if err := os.Chmod(dir, st.Mode().Perm()|0o700); err != nil {
			return &SnapshotDatabasesReply{Err: fmt.Errorf("plugin data: %w", err)}
		}
	}
	n := 0
	for _, f := range folders {
		if !f.IsDir() {
			continue
		}
		src := filepath.Join(a.d.DataDir, f.Name())
		files, err := os.ReadDir(src)
		if err != nil {
			return &SnapshotDatabasesReply{Files: n, Err: fmt.Errorf("plugin data %s: %w", f.Name(), err)}
		}
		if err := os.MkdirAll(filepath.Join(dir, f.Name()), 0o700); err != nil {
			return &SnapshotDatabasesReply{Files: n, Err: err}
		}
		// The copy keeps the folder's mode (a backup restores it), its
		// owner's rwx aside: the copy is written into.
		if info, err := f.Info(); err == nil {
			if err := os.Chmod(filepath.Join(dir, f.Name()), info.Mode().Perm()|0o700); err != nil {
				return &SnapshotDatabasesReply{Files: n, Err: err}
			}
		}
		for _, file := range files {
			if !file.Type().IsRegular() {
				continue
			}
			dst := filepath.Join(dir, f.Name(), file.Name())
			var write func(io.Writer) error
			if db := open[f.Name()]; db != nil && file.Name() == "data.db" {
				write = db.db.Snapshot
			} else {
				path := filepath.Join(src, file.Name())
				write = func(w io.Writer) error {
					// The handler may have swapped the file for a
					// FIFO since the folder was listed (openRegular).
					in, err := openRegular(path)
					if err != nil {
						return err
					}
					defer in.Close()
					_, err = io.Copy(w, in)
					return err
				}
			}
			if err := writeFile(dst, write); err != nil {
				return &SnapshotDatabasesReply{Files: n, Err: fmt.Errorf("plugin data %s/%s: %w", f.Name(), file.Name(), err)}
			}
			n++
		}
	}
	return &SnapshotDatabasesReply{Files: n}
}

func writeFile(path string, write func(io.Writer) error) error {
	out, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	err = write(out)
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	return err
}
