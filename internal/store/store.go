// Package store is the node's small key-value layer over buntdb. Callers
// see strings in, strings out, and a durability choice made at Open.
//
// Durable stores (the ledger) open with SyncPolicy Always: every committed
// write is fsynced before Set returns, so anything the API acknowledged
// survives kill -9. Other stores may use EverySecond where losing the last
// second on a crash is harmless. A durable store's UpdateLazy commits
// without the fsync, for writes that can be fetched again after a crash
// (ops replicated from peers): they reach the disk with the next fsynced
// commit, and buntdb's file is append-only, so a later fsynced commit
// never survives without them.
package store

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/tidwall/buntdb"
)

// ErrNotFound is returned by Get for a missing key.
var ErrNotFound = errors.New("not found")

// Options tune a store.
type Options struct {
	// Durable fsyncs every commit (buntdb.Always). Otherwise commits are
	// fsynced once a second.
	Durable bool
	// Log gets the line that says a torn last write was cut at open
	// (slog.Default() when nil).
	Log *slog.Logger
	// ManualShrink turns off buntdb's own shrinking (once a second,
	// when the file passed 32 MiB and doubled since the last shrink): the
	// owner bounds the file itself with FileSize and Shrink. buntdb's
	// rule checks too seldom for a writer that rewrites big values in a
	// loop (the file grows by the whole write rate between checks), and
	// a shrink it started makes the owner's own Shrink fail at once.
	ManualShrink bool
}

// A torn last write (the process or the machine stopped in the middle
// of appending a commit) is repaired at Open by buntdb itself: a file
// that ends mid-command is truncated to the end of the last whole
// command, so the store holds every commit that was wholly written and
// nothing of the torn one (which was never acknowledged: a commit is
// acknowledged after its write returned). A file whose end was extended
// but never written (a crash after the size reached the disk and before
// the data did leaves NUL bytes) is cut back to its last non-NUL byte
// first, since a buntdb file never ends in NUL; buntdb then repairs what
// remains. Either repair is logged with the bytes cut ("store repaired a
// torn last write"). Anything else that does not parse is an error: the
// file is damaged, not torn, and Open says so instead of guessing.

// DB is a buntdb file. Safe for concurrent use.
type DB struct {
	db      *buntdb.DB
	path    string
	durable bool
	// syncMu: an UpdateLazy switches the sync policy for its own commit;
	// no other commit may run meanwhile.
	syncMu sync.RWMutex
	// commitErr is the error of the last commit that failed to reach the
	// file (a full disk, an I/O error), nil once a later commit succeeds.
	commitErr atomic.Pointer[error]
}

// Open opens or creates the file at path (its folder is created 0700).
func Open(path string, o Options) (*DB, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("store dir: %w", err)
	}
	log := o.Log
	if log == nil {
		log = slog.Default()
	}
	nulCut, err := trimNULTail(path)
	if err != nil {
		return nil, fmt.Errorf("open store %s: %w", path, err)
	}
	before := fileSize(path)
	db, err := buntdb.Open(path)
	if err != nil {
		return nil, fmt.Errorf("open store %s: %w", path, err)
	}
	if cut := before - fileSize(path) + nulCut; cut > 0 {
		log.Warn("store repaired a torn last write", "file", path, "bytes_cut", cut, "size", fileSize(path))
	}
	var cfg buntdb.Config
	if err := db.ReadConfig(&cfg); err != nil {
		db.Close()
		return nil, fmt.Errorf("store config: %w", err)
	}
	cfg.SyncPolicy = buntdb.EverySecond
	if o.Durable {
		cfg.SyncPolicy = buntdb.Always
	}
	cfg.AutoShrinkDisabled = o.ManualShrink
	if err := db.SetConfig(cfg); err != nil {
		db.Close()
		return nil, fmt.Errorf("store config: %w", err)
	}
	return &DB{db: db, path: path, durable: o.Durable}, nil
}

// Path is the file the store lives in.
func (d *DB) Path() string { return d.path }

// Snapshot writes a consistent copy of the whole store to w (buntdb's
// own Save: one read transaction, so writes committed meanwhile are
// either wholly in it or not at all). The copy opens with Open.
func (d *DB) Snapshot(w io.Writer) error { return d.db.Save(w) }

// FileSize is the size of the file on disk: buntdb's file is a log
// that every commit appends to, so it grows past the live data until a
// shrink rewrites it.
func (d *DB) FileSize() int64 { return fileSize(d.path) }

// Shrink rewrites the file to hold only the live data (buntdb's Shrink:
// a copy is written beside it as <file>.tmp and renamed over it; commits
// go on meanwhile and are carried over). It returns once the file is
// swapped, a quarter of a second at least. Shrinking a store that is
// already shrinking is an error.
func (d *DB) Shrink() error {
	if err := d.db.Shrink(); err != nil {
		return fmt.Errorf("shrink store %s: %w", filepath.Base(d.path), err)
	}
	return nil
}

// Close flushes and closes the file.
func (d *DB) Close() error { return d.db.Close() }

// Get returns the value of key or ErrNotFound.
func (d *DB) Get(key string) (string, error) {
	var v string
	err := d.db.View(func(tx *buntdb.Tx) error {
		var err error
		v, err = tx.Get(key)
		return err
	})
	if errors.Is(err, buntdb.ErrNotFound) {
		return "", ErrNotFound
	}
	return v, err
}

// Set writes one key.
func (d *DB) Set(key, value string) error {
	return d.Update(func(tx *Tx) error { return tx.Set(key, value) })
}

// Delete removes one key; a missing key is not an error.
func (d *DB) Delete(key string) error {
	return d.Update(func(tx *Tx) error { return tx.Delete(key) })
}

// KV is one key and its value.
type KV struct{ Key, Value string }

// List returns every key with the prefix, in key order.
func (d *DB) List(prefix string) ([]KV, error) {
	var out []KV
	err := d.db.View(func(tx *buntdb.Tx) error {
		return tx.AscendGreaterOrEqual("", prefix, func(k, v string) bool {
			if !strings.HasPrefix(k, prefix) {
				return false
			}
			out = append(out, KV{k, v})
			return true
		})
	})
	return out, err
}

// Tx is a write transaction: all its writes commit together or not at all.
type Tx struct{ tx *buntdb.Tx }

// Set writes key inside the transaction.
func (t *Tx) Set(key, value string) error {
	_, _, err := t.tx.Set(key, value, nil)
	return err
}

// Delete removes key inside the transaction; missing keys are ignored.
func (t *Tx) Delete(key string) error {
	_, err := t.tx.Delete(key)
	if errors.Is(err, buntdb.ErrNotFound) {
		return nil
	}
	return err
}

// Update runs fn in one atomic, (for durable stores) fsynced commit.
func (d *DB) Update(fn func(tx *Tx) error) error {
	d.syncMu.RLock()
	defer d.syncMu.RUnlock()
	return d.update(fn)
}

// UpdateLazy is Update without the fsync of a durable store: the commit
// is written to the file (the OS's cache) and reaches the disk with the
// next fsynced commit. Use it only for data a crash may lose because it
// can be had again (see the package doc). On other stores it is Update.
func (d *DB) UpdateLazy(fn func(tx *Tx) error) error {
	if !d.durable {
		return d.Update(fn)
	}
	d.syncMu.Lock()
	defer d.syncMu.Unlock()
	if err := d.setSync(buntdb.Never); err != nil {
		return err
	}
	err := d.update(fn)
	if serr := d.setSync(buntdb.Always); serr != nil && err == nil {
		err = serr
	}
	return err
}

func (d *DB) setSync(p buntdb.SyncPolicy) error {
	var cfg buntdb.Config
	if err := d.db.ReadConfig(&cfg); err != nil {
		return fmt.Errorf("store config: %w", err)
	}
	cfg.SyncPolicy = p
	if err := d.db.SetConfig(cfg); err != nil {
		return fmt.Errorf("store config: %w", err)
	}
	return nil
}

func (d *DB) update(fn func(tx *Tx) error) error {
	fnOK := false
	err := d.db.Update(func(tx *buntdb.Tx) error {
		if err := fn(&Tx{tx: tx}); err != nil {
			return err
		}
		fnOK = true
		return nil
	})
	switch {
	case err == nil:
		d.commitErr.Store(nil)
	case fnOK:
		// fn succeeded, so the commit itself failed: the store is not
		// taking writes until one succeeds again.
		d.commitErr.Store(&err)
	}
	return err
}

// Health is nil while the store is open and its last commit reached the
// file; otherwise the reason it is not healthy.
func (d *DB) Health() error {
	if err := d.db.View(func(*buntdb.Tx) error { return nil }); err != nil {
		return fmt.Errorf("store %s: %w", filepath.Base(d.path), err)
	}
	if p := d.commitErr.Load(); p != nil {
		return fmt.Errorf("store %s: last commit failed: %w", filepath.Base(d.path), *p)
	}
	return nil
}

func fileSize(path string) int64 {
	st, err := os.Stat(path)
	if err != nil {
		return 0
	}
	return st.Size()
}

// trimNULTail cuts NUL bytes off the end of the file at path (see the
// repair note at Options) and returns how many it cut. A missing file is
// nothing to cut.
func trimNULTail(path string) (int64, error) {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if errors.Is(err, os.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return 0, err
	}
	end := st.Size()
	buf := make([]byte, 64<<10)
	for end > 0 {
		n := int64(len(buf))
		if end < n {
			n = end
		}
		if _, err := f.ReadAt(buf[:n], end-n); err != nil {
			return 0, err
		}
		i := n
		for i > 0 && buf[i-1] == 0 {
			i--
		}
		end -= n - i
		if i > 0 {
			break
		}
	}
	cut := st.Size() - end
	if cut == 0 {
		return 0, nil
	}
	if err := f.Truncate(end); err != nil {
		return 0, err
	}
	return cut, f.Sync()
}
