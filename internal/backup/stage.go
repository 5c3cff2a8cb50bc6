package backup

import (
	"archive/tar"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
)

// Required are the entries every backup must hold.
var Required = []string{"ledger.db", "node.db", "identity.key"}

// allowed reports whether an entry name may be restored: metadata.json,
// the required files, or a file under ca/, plugins/ or plugin-data/.
func allowed(name string) bool {
	if name == MetaName {
		return true
	}
	for _, r := range Required {
		if name == r {
			return true
		}
	}
	if !fs.ValidPath(name) || strings.Contains(name, "\\") {
		return false
	}
	top, rest, ok := strings.Cut(name, "/")
	return ok && rest != "" && (top == "ca" || top == "plugins" || top == "plugin-data")
}

// dirAllowed reports whether a folder entry may be restored: ca,
// plugins or plugin-data, or a folder under one of them. The name is
// relative, clean and without "..", so a folder is only ever made inside
// the staging folder (and so, swapped in, inside the data folder).
func dirAllowed(name string) bool {
	if !fs.ValidPath(name) || strings.Contains(name, "\\") {
		return false
	}
	top, _, _ := strings.Cut(name, "/")
	return top == "ca" || top == "plugins" || top == "plugin-data"
}

// Stage unpacks the backup called name from dir into the new folder into
// (which must not exist) and checks it: only allowed, regular entries
// within the size limits, metadata of this format, made by nodeID, with
// every required file; then verify (the caller's own checks: the stores
// open, the identity is the running node's) on the staged folder. On any
// error the folder is removed and the error wraps ErrCorrupt, ErrForeign,
// ErrNotFound or ErrBadName where that is the reason.
func Stage(dir, name, into, nodeID string, verify func(staged string) error) (Meta, error) {
	entry, err := resolve(dir, name)
	if err != nil {
		return Meta{}, err
	}
	meta, _, err := readMeta(dir, entry)
	if err != nil {
		return Meta{}, err
	}
	if meta.NodeID != nodeID {
		return Meta{}, fmt.Errorf("%w: made by node %.16s, this is %.16s", ErrForeign, meta.NodeID, nodeID)
	}
	if err := os.Mkdir(into, 0o700); err != nil {
		return Meta{}, fmt.Errorf("staging folder: %w", err)
	}
	ok := false
	defer func() {
		if !ok {
			os.RemoveAll(into)
		}
	}()
	src := filepath.Join(dir, entry)
	if st, err := os.Stat(src); err == nil && st.IsDir() {
		err = stageDir(src, into)
		if err != nil {
			return Meta{}, err
		}
	} else if err := stageArchive(src, into); err != nil {
		return Meta{}, err
	}
	for _, r := range Required {
		if _, err := os.Stat(filepath.Join(into, r)); err != nil {
			return Meta{}, fmt.Errorf("%w: %s is missing", ErrCorrupt, r)
		}
	}
	if verify != nil {
		if err := verify(into); err != nil {
			return Meta{}, err
		}
	}
	ok = true
	return meta, nil
}

func stageArchive(src, into string) error {
	f, err := os.Open(src)
	if err != nil {
		return err
	}
	defer f.Close()
	tr, closeTar, err := openTar(f)
	if err != nil {
		return err
	}
	defer closeTar()
	var total int64
	var made int
	for n := 0; ; n++ {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("%w: %v", ErrCorrupt, err)
		}
		if n >= MaxFiles {
			return fmt.Errorf("%w: more than %d entries", ErrCorrupt, MaxFiles)
		}
		name := path.Clean(hdr.Name)
		if hdr.Typeflag == tar.TypeDir && dirAllowed(name) {
			if err := makeStagedDir(into, name, dirMode(fs.FileMode(hdr.Mode)), &made); err != nil {
				return err
			}
			continue
		}
		if hdr.Typeflag != tar.TypeReg || !allowed(name) {
			return fmt.Errorf("%w: unexpected entry %q", ErrCorrupt, hdr.Name)
		}
		if hdr.Size > MaxEntry || total+hdr.Size > MaxTotal {
			return fmt.Errorf("%w: %q is too large", ErrCorrupt, hdr.Name)
		}
		total += hdr.Size
		if err := writeStaged(into, name, io.LimitReader(tr, hdr.Size), hdr.Size, fileMode(fs.FileMode(hdr.Mode)), &made); err != nil {
			return err
		}
	}
}

func stageDir(src, into string) error {
	var total int64
	n, made := 0, 0
	return filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, p)
		if err != nil {
			return err
		}
		name := filepath.ToSlash(rel)
		if d.IsDir() {
			if rel == "." {
				return nil
			}
			if !dirAllowed(name) {
				return fmt.Errorf("%w: unexpected folder %q", ErrCorrupt, name)
			}
			info, err := d.Info()
			if err != nil {
				return err
			}
			if n++; n > MaxFiles {
				return fmt.Errorf("%w: too large", ErrCorrupt)
			}
			return makeStagedDir(into, name, dirMode(info.Mode()), &made)
		}
		if !d.Type().IsRegular() || !allowed(name) {
			return fmt.Errorf("%w: unexpected entry %q", ErrCorrupt, name)
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		if n++; n > MaxFiles || info.Size() > MaxEntry || total+info.Size() > MaxTotal {
			return fmt.Errorf("%w: too large", ErrCorrupt)
		}
		total += info.Size()
		f, err := os.Open(p)
		if err != nil {
			return err
		}
		defer f.Close()
		return writeStaged(into, name, f, info.Size(), fileMode(info.Mode()), &made)
	})
}

// makeParents makes the missing parents of name (checked by allowed or
// dirAllowed) under into, 0700, one at a time, and counts them in
// *made: every file and folder made under into counts, and more than
// MaxFiles is refused, so a name deep under folders of its own (one
// entry, up to two thousand folders) does not make MaxFiles entries
// hundreds of millions of folders.
func makeParents(into, name string, made *int) error {
	dir := into
	parts := strings.Split(name, "/")
	for _, p := range parts[:len(parts)-1] {
		dir = filepath.Join(dir, p)
		err := os.Mkdir(dir, 0o700)
		if errors.Is(err, fs.ErrExist) {
			if st, lerr := os.Lstat(dir); lerr != nil || !st.IsDir() {
				return fmt.Errorf("%w: %q is both a file and a folder", ErrCorrupt, name)
			}
			continue
		}
		if err != nil {
			return fmt.Errorf("staging %q: %w", name, err)
		}
		if err := count(made); err != nil {
			return err
		}
	}
	return nil
}

// count counts one more file or folder made under the staging folder.
func count(made *int) error {
	if *made++; *made > MaxFiles {
		return fmt.Errorf("%w: more than %d files and folders", ErrCorrupt, MaxFiles)
	}
	return nil
}

// makeStagedDir makes the folder name (checked by dirAllowed) under
// into with mode, its parents 0700 where missing (makeParents); a
// folder already made (the parent of an earlier entry) takes mode.
func makeStagedDir(into, name string, mode fs.FileMode, made *int) error {
	dst := filepath.Join(into, filepath.FromSlash(name))
	if err := makeParents(into, name, made); err != nil {
		return err
	}
	err := os.Mkdir(dst, mode)
	if err == nil {
		err = count(made)
	} else if errors.Is(err, fs.ErrExist) {
		if st, lerr := os.Lstat(dst); lerr != nil || !st.IsDir() {
			return fmt.Errorf("%w: %q is both a file and a folder", ErrCorrupt, name)
		}
		err = nil
	}
	if err != nil {
		return fmt.Errorf("staging %q: %w", name, err)
	}
	// Mkdir's mode passed through the umask: set it as archived.
	if err := os.Chmod(dst, mode); err != nil {
		return fmt.Errorf("staging %q: %w", name, err)
	}
	return nil
}

// writeStaged writes one entry under into with mode (0600, or 0700 for
// an executable), counted in *made with the parents it makes
// (makeParents); name was checked by allowed. What the entry's reader
// fails on is a damaged backup (ErrCorrupt); what writing the staged
// copy fails on (a full disk) is not, and is wrapped as it came, so the
// caller can tell a full disk (507) from a bad archive.
func writeStaged(into, name string, r io.Reader, size int64, mode fs.FileMode, made *int) error {
	dst := filepath.Join(into, filepath.FromSlash(name))
	if err := makeParents(into, name, made); err != nil {
		return err
	}
	f, err := os.OpenFile(dst, os.O_CREATE|os.O_WRONLY|os.O_EXCL, mode)
	if errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("%w: %q: %v", ErrCorrupt, name, err) // a duplicate entry
	}
	if err != nil {
		return fmt.Errorf("staging %q: %w", name, err)
	}
	if err := count(made); err != nil {
		f.Close()
		return err
	}
	src := &readErr{r: r}
	n, err := io.Copy(f, src)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if src.err != nil {
		return fmt.Errorf("%w: %q: %v", ErrCorrupt, name, src.err)
	}
	if err != nil {
		return fmt.Errorf("staging %q: %w", name, err)
	}
	if n != size {
		return fmt.Errorf("%w: %q is truncated", ErrCorrupt, name)
	}
	return nil
}

// readErr remembers the error its reader failed with (not io.EOF).
type readErr struct {
	r   io.Reader
	err error
}

func (e *readErr) Read(b []byte) (int, error) {
	n, err := e.r.Read(b)
	if err != nil && err != io.EOF {
		e.err = err
	}
	return n, err
}
