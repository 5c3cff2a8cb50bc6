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
//
// # Shrinking
//
// buntdb's file is a log that every commit appends to, so it grows past
// the live data until a shrink rewrites it. The store does its own
// shrinks (buntdb's are off: they rename the copy over the file without
// fsyncing it or the folder, so a power cut on a filesystem that does not
// order a rename after the data it replaces, XFS or ext4 with
// noauto_da_alloc, could leave an empty or partial file and lose
// acknowledged writes). A shrink is, in this order:
//
//  1. commits wait (reads go on); a snapshot of the live data is written
//     to <file>.shrink beside the file and fsynced;
//  2. the copy is opened (so it is known to load) and renamed over the
//     file while reads wait too, and the folder is fsynced;
//  3. the old file is closed and reads and commits go on, on the copy.
//
// A crash before the rename leaves the old file whole (a stale
// <file>.shrink is removed at the next Open); a crash after the folder's
// fsync leaves the copy, which holds everything committed before the
// shrink. No commit is acknowledged between the two, so none is lost. A
// shrink that fails (a full disk, an I/O error) removes the copy and
// leaves the old file and the store as they were; the error says why.
//
// When: without Options.ManualShrink a store checks its file once a
// second and shrinks it when it passed 32 MiB and doubled since the last
// shrink (or since Open), which is buntdb's own rule. With ManualShrink
// the owner calls Shrink itself (the plugin databases do, to bound their
// files). A shrink pauses commits for the time of writing the live data
// once and reads for the time of a rename and a folder fsync.
package store

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

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
	// ManualShrink turns off the store's automatic shrinking (once a
	// second, when the file passed 32 MiB and doubled since the last
	// shrink; see the package doc): the owner bounds the file itself with
	// FileSize and Shrink. The automatic rule checks too seldom for a
	// writer that rewrites big values in a loop (the file grows by the
	// whole write rate between checks).
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
// torn last write"). NUL bytes between whole commits (a stretch whose
// data never reached the disk while a later commit's did) are skipped by
// buntdb's loader, which then counts its write offset short of the file's
// end; so such a file is rewritten at Open (a shrink, logged "store
// rewrote a file with NUL bytes inside") before any commit. Anything else that does not parse is an error: the
// file is damaged, not torn, and Open says so instead of guessing.

// The automatic shrink's rule (variables so tests can make it quick).
var (
	autoShrinkEvery   = time.Second
	autoShrinkMinSize = int64(32 << 20)
)

// DB is a buntdb file. Safe for concurrent use.
type DB struct {
	path    string
	durable bool
	log     *slog.Logger
	// syncMu: commits hold it for reading. An UpdateLazy switches the
	// sync policy for its own commit and a shrink snapshots the data, so
	// both hold it for writing: no other commit may run meanwhile. It is
	// taken before mu.
	syncMu sync.RWMutex
	// mu guards db and closed: every use of db holds it for reading; a
	// shrink's swap of the file and Close hold it for writing.
	mu     sync.RWMutex
	db     *buntdb.DB
	closed bool
	// lastSize is the file's size after the last shrink (or at Open).
	lastSize atomic.Int64
	// The automatic shrink's rule, read from the variables at Open.
	shrinkEvery time.Duration
	shrinkMin   int64
	stop        chan struct{} // closed by Close: the automatic shrink ends
	stopOnce    sync.Once
	watching    sync.WaitGroup
	// commitErr is the error of the last commit that failed to reach the
	// file (a full disk, an I/O error), nil once a later commit succeeds.
	commitErr atomic.Pointer[error]
}

// Open opens or creates the file at path (a new file is created 0600,
// its folder 0700).
func Open(path string, o Options) (*DB, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("store dir: %w", err)
	}
	log := o.Log
	if log == nil {
		log = slog.Default()
	}
	// A copy a shrink left behind when it stopped before its rename: the
	// file itself is whole (see the package doc).
	if err := os.Remove(shrinkPath(path)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("open store %s: %w", path, err)
	}
	// buntdb creates a missing file 0666 (less the umask); a store may
	// hold secrets (node.db keeps tunnel servers' key seeds), so it is
	// created here first, for its owner only.
	if f, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600); err == nil {
		f.Close()
	} else if !errors.Is(err, os.ErrExist) {
		return nil, fmt.Errorf("open store %s: %w", path, err)
	}
	nulCut, err := trimNULTail(path)
	if err != nil {
		return nil, fmt.Errorf("open store %s: %w", path, err)
	}
	inner, err := nulBetweenCommits(path)
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
	if err := configure(db, o.Durable); err != nil {
		db.Close()
		return nil, err
	}
	d := &DB{db: db, path: path, durable: o.Durable, log: log, stop: make(chan struct{}),
		shrinkEvery: autoShrinkEvery, shrinkMin: autoShrinkMinSize}
	d.lastSize.Store(fileSize(path))
	if inner {
		// buntdb's loader skips NULs but leaves its write offset short by
		// their count: the next commit would land over the last ones.
		if err := d.Shrink(); err != nil {
			db.Close()
			return nil, fmt.Errorf("open store %s: rewrite a file with NUL bytes inside: %w", path, err)
		}
		log.Warn("store rewrote a file with NUL bytes inside", "file", path, "size", fileSize(path))
	}
	if !o.ManualShrink {
		d.watching.Add(1)
		go d.watch()
	}
	return d, nil
}

// configure sets the sync policy and turns buntdb's own shrink off (the
// store shrinks, see the package doc).
func configure(db *buntdb.DB, durable bool) error {
	var cfg buntdb.Config
	if err := db.ReadConfig(&cfg); err != nil {
		return fmt.Errorf("store config: %w", err)
	}
	cfg.SyncPolicy = buntdb.EverySecond
	if durable {
		cfg.SyncPolicy = buntdb.Always
	}
	cfg.AutoShrinkDisabled = true
	if err := db.SetConfig(cfg); err != nil {
		return fmt.Errorf("store config: %w", err)
	}
	return nil
}

func shrinkPath(path string) string { return path + ".shrink" }

// Path is the file the store lives in.
func (d *DB) Path() string { return d.path }

// Snapshot writes a consistent copy of the whole store to w (buntdb's
// own Save: one read transaction, so writes committed meanwhile are
// either wholly in it or not at all). The copy opens with Open.
func (d *DB) Snapshot(w io.Writer) error {
	d.mu.RLock()
	defer d.mu.RUnlock()
	return d.db.Save(w)
}

// FileSize is the size of the file on disk: buntdb's file is a log
// that every commit appends to, so it grows past the live data until a
// shrink rewrites it.
func (d *DB) FileSize() int64 { return fileSize(d.path) }

// Shrink rewrites the file to hold only the live data, durably (see the
// package doc for the order of its steps and what a crash or a failure
// leaves). Commits wait while it runs; a Shrink called while another
// runs waits for it and then shrinks again.
func (d *DB) Shrink() error {
	d.syncMu.Lock()
	defer d.syncMu.Unlock()
	return d.shrink()
}

// shrink does Shrink; the caller holds syncMu for writing, so d.db and
// d.closed change only here and in Close, under it.
func (d *DB) shrink() error {
	if d.closed {
		return fmt.Errorf("shrink store %s: %w", filepath.Base(d.path), buntdb.ErrDatabaseClosed)
	}
	fail := func(err error) error {
		return fmt.Errorf("shrink store %s: %w", filepath.Base(d.path), err)
	}
	tmp := shrinkPath(d.path)
	perm := os.FileMode(0o600)
	if st, err := os.Stat(d.path); err == nil {
		perm = st.Mode().Perm()
	}
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, perm)
	if err != nil {
		return fail(err)
	}
	err = d.db.Save(f)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(tmp)
		return fail(err)
	}
	next, err := buntdb.Open(tmp)
	if err != nil {
		os.Remove(tmp)
		return fail(err)
	}
	if err := configure(next, d.durable); err != nil {
		next.Close()
		os.Remove(tmp)
		return fail(err)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := os.Rename(tmp, d.path); err != nil {
		next.Close()
		os.Remove(tmp)
		return fail(err)
	}
	// From here the file is the copy: next (open on it whatever its
	// name) takes over even if the folder's fsync fails.
	dirErr := syncDir(filepath.Dir(d.path))
	d.db.Close()
	d.db = next
	d.lastSize.Store(fileSize(d.path))
	if dirErr != nil {
		return fail(fmt.Errorf("sync folder after rename: %w", dirErr))
	}
	return nil
}

func syncDir(dir string) error {
	f, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = f.Sync()
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// watch is the automatic shrink (see the package doc).
func (d *DB) watch() {
	defer d.watching.Done()
	t := time.NewTicker(d.shrinkEvery)
	defer t.Stop()
	for {
		select {
		case <-d.stop:
			return
		case <-t.C:
		}
		size, last := d.FileSize(), d.lastSize.Load()
		if size <= d.shrinkMin || size <= 2*last {
			continue
		}
		d.syncMu.Lock()
		var err error
		if !d.closed {
			err = d.shrink()
		}
		d.syncMu.Unlock()
		if err != nil {
			d.log.Warn("store could not shrink its file", "file", d.path, "size", size, "err", err)
		}
	}
}

// Close flushes and closes the file.
func (d *DB) Close() error {
	d.stopOnce.Do(func() { close(d.stop) })
	d.watching.Wait()
	d.syncMu.Lock()
	defer d.syncMu.Unlock()
	d.mu.Lock()
	defer d.mu.Unlock()
	d.closed = true
	return d.db.Close()
}

// Get returns the value of key or ErrNotFound.
func (d *DB) Get(key string) (string, error) {
	var v string
	d.mu.RLock()
	defer d.mu.RUnlock()
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
	d.mu.RLock()
	defer d.mu.RUnlock()
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

// Ascend calls fn with each key with the prefix that sorts after after
// ("": from the first), and its value, in key order, until fn returns
// false. Nothing is copied: a caller that reads a page pays for the page.
// Writes wait while it runs.
func (d *DB) Ascend(prefix, after string, fn func(key, value string) bool) error {
	d.mu.RLock()
	defer d.mu.RUnlock()
	from := prefix
	if after > from {
		from = after
	}
	return d.db.View(func(tx *buntdb.Tx) error {
		return tx.AscendGreaterOrEqual("", from, func(k, v string) bool {
			if !strings.HasPrefix(k, prefix) {
				return false
			}
			if k == after {
				return true
			}
			return fn(k, v)
		})
	})
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
	d.mu.RLock()
	defer d.mu.RUnlock()
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

// update commits fn; the caller holds syncMu.
func (d *DB) update(fn func(tx *Tx) error) error {
	d.mu.RLock()
	defer d.mu.RUnlock()
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
	d.mu.RLock()
	err := d.db.View(func(*buntdb.Tx) error { return nil })
	d.mu.RUnlock()
	if err != nil {
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

// nulBetweenCommits reports whether a NUL byte stands where a command
// of the file at path starts (values may hold NULs: a ledger op is CBOR).
// It walks the commands by their lengths and stops, saying no, where one
// does not parse: buntdb's loader judges the rest. A missing file has
// none.
func nulBetweenCommits(path string) (bool, error) {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	defer f.Close()
	r := bufio.NewReaderSize(f, 64<<10)
	// count reads a "*N\r\n" or "$N\r\n" line.
	count := func(prefix byte) (int, bool) {
		line, err := r.ReadSlice('\n')
		if err != nil || len(line) < 4 || line[0] != prefix || line[len(line)-2] != '\r' {
			return 0, false
		}
		n, err := strconv.Atoi(string(line[1 : len(line)-2]))
		return n, err == nil && n >= 0
	}
	for {
		c, err := r.ReadByte()
		if errors.Is(err, io.EOF) {
			return false, nil
		}
		if err != nil {
			return false, err
		}
		if c == 0 {
			return true, nil
		}
		_ = r.UnreadByte()
		parts, ok := count('*')
		if !ok {
			return false, nil
		}
		for range parts {
			n, ok := count('$')
			if !ok {
				return false, nil
			}
			if _, err := r.Discard(n + 2); err != nil {
				return false, nil
			}
		}
	}
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
