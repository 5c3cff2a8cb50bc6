// Package backup writes, lists, reads and stages node backups in
// DATA/backups.
//
// A backup is a gzip'd tar, backup-<UTC time>.tar.gz, whose first entry
// is metadata.json (Meta: format, node id, version, time, files), then
// the node's state: ledger.db and node.db as buntdb snapshots (store's
// Snapshot, one read transaction each, never a copy of a file being
// written), identity.key, and the ca/, plugins/ and plugin-data/ folders
// when present (the plugin databases as the node's plugins supervisor
// snapshots them, never copies of files being written). A folder's
// regular files are taken, and its links to regular files inside it as
// copies of them (linkToFileInside); other links are not (a restore
// writes regular files and folders only). Every folder is taken too, as
// a folder entry with its mode (dirMode), so one that is empty (a
// plugin's data folder before its first write, an empty plugins/)
// comes back with a restore.
// Settings live in node.db. Logs and the agent's data are not included.
// Backups older than the retention setting are removed once a new one
// is complete (a backup that fails removes none). A directory in DATA/backups holding a metadata.json is a
// backup too (an archive someone unpacked): listed, read and deleted like
// the archives, and restorable.
//
// Names: a backup name is a plain file name made of letters, digits,
// '-', '_' and '.', not starting with '.', at most 128 bytes, optionally
// ending in .tar.gz (ValidName). Nothing else is accepted, so no request
// can name a path outside DATA/backups (no '/', "..", NUL, or an
// encoded slash after the router decoded it).
//
// Restoring is staged (Stage): the archive is unpacked into a fresh
// folder beside the data, every entry checked (only the names above,
// regular files and folders, bounded sizes, total bounded, at most
// MaxFiles files and folders made, the parents a name needs included; a folder is
// made with its archived mode less group and other write, never
// outside the staging folder: its name is relative, clean and under
// ca/, plugins/ or plugin-data/, and nothing staged is a link), the
// stores opened to
// prove they load, and the identity compared with the running node's: a
// backup of another node (a "foreign" archive) is refused, because
// restoring it would clone that node's key. The node swaps the staged
// files in only after all of that passed (actors/backups stages and
// checks, cmd/peerdns/node swaps and restarts).
package backup

import (
	"archive/tar"
	"compress/gzip"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"
)

// Format is the backup format version in metadata.json.
const Format = 1

// MetaName is the metadata entry, first in every archive.
const MetaName = "metadata.json"

// Ext is the archive suffix.
const Ext = ".tar.gz"

// Limits of what Stage accepts.
const (
	MaxEntry = 4 << 30 // one file
	MaxTotal = 8 << 30 // everything unpacked
	MaxFiles = 100_000 // entries, and files and folders made (parents included)
)

// Errors callers map to statuses.
var (
	ErrBadName  = errors.New("not a backup name")
	ErrNotFound = errors.New("no such backup")
	ErrCorrupt  = errors.New("backup is damaged or not a peerdns backup")
	ErrForeign  = errors.New("backup belongs to another node")
	// ErrUnrestorable: the state holds what a restore would refuse
	// (more than MaxFiles, MaxEntry or MaxTotal; a file name Stage does
	// not take), so Create writes no backup of it.
	ErrUnrestorable = errors.New("the state holds what a backup cannot restore")
)

// File is one file of a backup.
type File struct {
	Name          string `json:"name"`
	Size          int64  `json:"size"`
	SizeFormatted string `json:"sizeFormatted"`
	Modified      string `json:"modified"`
}

// Meta is metadata.json.
type Meta struct {
	Format    int    `json:"format"`
	NodeID    string `json:"nodeId"`
	Version   string `json:"version"`
	Timestamp string `json:"timestamp"`
	Files     []File `json:"files"`
}

// Info is one backup as listed.
type Info struct {
	Name          string `json:"name"`
	Timestamp     string `json:"timestamp"`
	Size          int64  `json:"size"`
	SizeFormatted string `json:"sizeFormatted"`
	FileCount     int    `json:"fileCount"`
}

// Source is one thing a backup holds: a name in the archive and either a
// writer of its content (a store snapshot) or a file or folder on disk.
type Source struct {
	Name  string
	Write func(w io.Writer) error // set: content written by the caller
	Path  string                  // else: a file, or a folder taken whole
}

// ValidName checks a backup name and returns it without .tar.gz.
func ValidName(name string) (string, error) {
	base := strings.TrimSuffix(name, Ext)
	if base == "" || len(name) > 128 || base[0] == '.' {
		return "", fmt.Errorf("%w: %q", ErrBadName, name)
	}
	for _, c := range base {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.') {
			return "", fmt.Errorf("%w: %q", ErrBadName, name)
		}
	}
	if strings.Contains(base, "..") {
		return "", fmt.Errorf("%w: %q", ErrBadName, name)
	}
	return base, nil
}

// FormatSize is a byte count for people (1.5 MB).
func FormatSize(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %cB", float64(n)/float64(div), "KMGTPE"[exp])
}

// Create writes a backup of srcs into dir and returns its path. The
// archive is written to a temporary name and renamed when complete, so
// a crash or a full disk never leaves a half-written backup under a
// backup name; what it renders before (write) is in a folder beside it.
// Both are named .partial-<random> (PartialPrefix), which no backup name
// reaches, so what a killed process left is found in dir and nowhere
// else. Once it is complete, and before it takes its name, the
// oldest backups are removed so that, with the new one, at most keep
// remain: a backup that fails removes none.
func Create(dir string, keep int, nodeID, version string, now time.Time, srcs []Source) (string, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", fmt.Errorf("backups folder: %w", err)
	}
	name := "backup-" + now.UTC().Format("20060102T150405.000Z")
	name = strings.ReplaceAll(name, ".", "-") + Ext
	path := filepath.Join(dir, name)
	tmp, err := os.CreateTemp(dir, PartialPrefix+"*")
	if err != nil {
		return "", fmt.Errorf("backup: %w", err)
	}
	defer os.Remove(tmp.Name()) // no-op after the rename
	if err := write(tmp, dir, nodeID, version, now, srcs); err != nil {
		tmp.Close()
		return "", fmt.Errorf("backup: %w", err)
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return "", fmt.Errorf("backup: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return "", fmt.Errorf("backup: %w", err)
	}
	// Only now that the new archive is complete do the old ones go: a
	// backup that fails (a full disk) must not cost the ones it was to
	// replace (with BACKUP_RETENTION 1, the only one).
	if err := Prune(dir, max(keep-1, 0)); err != nil {
		return "", err
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return "", fmt.Errorf("backup: %w", err)
	}
	return path, nil
}

// PartialPrefix starts the names of what Create and its callers make in
// the backups folder while a backup is written (the archive, rendered
// content, copies), removed when it ends; one a killed process left is
// for the next start to remove.
const PartialPrefix = ".partial-"

// write renders the content of every source into a temporary folder in
// dir first (so metadata.json, written first, can list sizes), then the
// archive.
func write(out io.Writer, dir, nodeID, version string, now time.Time, srcs []Source) error {
	work, err := os.MkdirTemp(dir, PartialPrefix+"*")
	if err != nil {
		return err
	}
	defer os.RemoveAll(work)
	type entry struct {
		name, path string
		dir        bool
	}
	var entries []entry
	for _, s := range srcs {
		if s.Write != nil {
			p := filepath.Join(work, s.Name)
			f, err := os.OpenFile(p, os.O_CREATE|os.O_WRONLY|os.O_EXCL, 0o600)
			if err != nil {
				return err
			}
			err = s.Write(f)
			if cerr := f.Close(); err == nil {
				err = cerr
			}
			if err != nil {
				return fmt.Errorf("%s: %w", s.Name, err)
			}
			entries = append(entries, entry{s.Name, p, false})
			continue
		}
		st, err := os.Stat(s.Path)
		if errors.Is(err, fs.ErrNotExist) {
			continue // an optional folder (ca/, plugins/) not made yet
		}
		if err != nil {
			return err
		}
		if !st.IsDir() {
			entries = append(entries, entry{s.Name, s.Path, false})
			continue
		}
		// A folder kept elsewhere behind a link (DATA/plugins -> /srv/...)
		// is taken whole too: WalkDir does not follow a link at its root.
		root, err := filepath.EvalSymlinks(s.Path)
		if err != nil {
			return err
		}
		err = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if !d.IsDir() && !d.Type().IsRegular() && !(d.Type()&fs.ModeSymlink != 0 && linkToFileInside(root, p)) {
				return nil
			}
			rel, err := filepath.Rel(root, p)
			if err != nil {
				return err
			}
			name := s.Name + "/" + filepath.ToSlash(rel)
			if rel == "." {
				name = s.Name
			}
			entries = append(entries, entry{name, p, d.IsDir()})
			return nil
		})
		if err != nil {
			return err
		}
	}
	meta := Meta{Format: Format, NodeID: nodeID, Version: version, Timestamp: now.UTC().Format(time.RFC3339Nano)}
	// A backup Stage would refuse is no backup: say so now, not at the
	// restore it was made for.
	if len(entries)+1 > MaxFiles {
		return fmt.Errorf("%w: %d files, a restore takes at most %d", ErrUnrestorable, len(entries)+1, MaxFiles)
	}
	var total int64
	for _, e := range entries {
		if e.dir {
			if !dirAllowed(e.name) {
				return fmt.Errorf("%w: the folder name %q (rename or remove it)", ErrUnrestorable, e.name)
			}
			continue
		}
		if !allowed(e.name) {
			return fmt.Errorf("%w: the file name %q (rename or remove it)", ErrUnrestorable, e.name)
		}
		st, err := os.Stat(e.path)
		if err != nil {
			return err
		}
		if st.Size() > MaxEntry {
			return fmt.Errorf("%w: %s is %s, a restore takes at most %s a file", ErrUnrestorable, e.name, FormatSize(st.Size()), FormatSize(MaxEntry))
		}
		if total += st.Size(); total > MaxTotal {
			return fmt.Errorf("%w: more than %s in all, a restore takes at most that", ErrUnrestorable, FormatSize(MaxTotal))
		}
		meta.Files = append(meta.Files, File{Name: e.name, Size: st.Size(), SizeFormatted: FormatSize(st.Size()),
			Modified: st.ModTime().UTC().Format(time.RFC3339)})
	}
	mb, err := json.MarshalIndent(meta, "", "  ")
	if err != nil {
		return err
	}
	gz := gzip.NewWriter(out)
	tw := tar.NewWriter(gz)
	if err := tw.WriteHeader(&tar.Header{Name: MetaName, Mode: 0o600, Size: int64(len(mb)), ModTime: now, Typeflag: tar.TypeReg}); err != nil {
		return err
	}
	if _, err := tw.Write(mb); err != nil {
		return err
	}
	for _, e := range entries {
		add := addFile
		if e.dir {
			add = addDir
		}
		if err := add(tw, e.name, e.path); err != nil {
			return err
		}
	}
	if err := tw.Close(); err != nil {
		return err
	}
	return gz.Close()
}

func addFile(tw *tar.Writer, name, path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return err
	}
	hdr, err := tar.FileInfoHeader(st, "")
	if err != nil {
		return err
	}
	hdr.Name, hdr.Mode, hdr.Uid, hdr.Gid, hdr.Uname, hdr.Gname = name, int64(fileMode(st.Mode())), 0, 0, "", ""
	if err := tw.WriteHeader(hdr); err != nil {
		return err
	}
	_, err = io.CopyN(tw, f, st.Size())
	return err
}

// addDir writes the folder entry name (a parent comes before what it
// holds: WalkDir's order) with the mode of the folder at path.
func addDir(tw *tar.Writer, name, path string) error {
	st, err := os.Stat(path)
	if err != nil {
		return err
	}
	return tw.WriteHeader(&tar.Header{Name: name + "/", Typeflag: tar.TypeDir, Mode: int64(dirMode(st.Mode())), ModTime: st.ModTime()})
}

// linkToFileInside reports whether the link p leads, links followed, to
// a regular file inside root. Such a link is archived as a copy of that
// file under the link's name: a plugin that links its handler or a page
// to another of its files (the plugin loader follows links that stay in
// the plugin's folder) loads the same after a restore, which writes
// regular files only. Any other link (out of the folder, to a folder,
// dangling) is left out, as the plugin loader leaves it.
func linkToFileInside(root, p string) bool {
	t, err := filepath.EvalSymlinks(p)
	if err != nil {
		return false
	}
	if rel, err := filepath.Rel(root, t); err != nil || !filepath.IsLocal(rel) {
		return false
	}
	st, err := os.Stat(t)
	return err == nil && st.Mode().IsRegular()
}

// fileMode is the mode a file is archived and restored with: 0600, or
// 0700 when it is executable (a plugin's handler must stay one, or the
// plugin does not load after a restore).
func fileMode(m fs.FileMode) fs.FileMode {
	if m.Perm()&0o111 != 0 {
		return 0o700
	}
	return 0o600
}

// dirMode is the mode a folder is archived and restored with: its own,
// less write for group and others, plus read, write and search for its
// owner. A folder others could write in would let them put a handler in
// a plugin's folder, which the node runs; one its owner cannot write in
// could not be filled by the restore, nor removed when a staged restore
// is abandoned.
func dirMode(m fs.FileMode) fs.FileMode {
	return m.Perm()&0o755 | 0o700
}

// maxMeta bounds metadata.json.
const maxMeta = 16 << 20

// List lists the backups in dir, newest first by their metadata's time.
func List(dir string) ([]Info, error) {
	ents, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return []Info{}, nil
	}
	if err != nil {
		return nil, err
	}
	out := []Info{}
	for _, e := range ents {
		base, err := ValidName(e.Name())
		if err != nil || (!e.IsDir() && !strings.HasSuffix(e.Name(), Ext)) || (e.IsDir() && e.Name() != base) {
			continue
		}
		m, size, err := readMeta(dir, e.Name())
		if err != nil {
			continue // not a backup, or a damaged one: Metadata says why
		}
		out = append(out, Info{Name: e.Name(), Timestamp: m.Timestamp, Size: size, SizeFormatted: FormatSize(size), FileCount: len(m.Files)})
	}
	// By the time, not its text: RFC 3339 drops trailing zeros, so
	// "…00Z" would sort after "…00.1Z". A time that does not parse
	// counts as the oldest; the name breaks ties.
	at := make(map[string]time.Time, len(out))
	for _, b := range out {
		t, _ := time.Parse(time.RFC3339Nano, b.Timestamp)
		at[b.Name] = t
	}
	sort.Slice(out, func(i, j int) bool {
		if ti, tj := at[out[i].Name], at[out[j].Name]; !ti.Equal(tj) {
			return ti.After(tj)
		}
		return out[i].Name > out[j].Name
	})
	return out, nil
}

// resolve finds the backup called name (with or without .tar.gz): the
// archive, else the folder. It returns the entry's name in dir.
func resolve(dir, name string) (string, error) {
	base, err := ValidName(name)
	if err != nil {
		return "", err
	}
	for _, cand := range []string{base + Ext, base} {
		if _, err := os.Lstat(filepath.Join(dir, cand)); err == nil {
			return cand, nil
		}
	}
	return "", fmt.Errorf("%w: %q", ErrNotFound, name)
}

// Metadata reads a backup's metadata.json.
func Metadata(dir, name string) (Meta, error) {
	entry, err := resolve(dir, name)
	if err != nil {
		return Meta{}, err
	}
	m, _, err := readMeta(dir, entry)
	return m, err
}

// Delete removes a backup (archive or folder).
func Delete(dir, name string) error {
	entry, err := resolve(dir, name)
	if err != nil {
		return err
	}
	return os.RemoveAll(filepath.Join(dir, entry))
}

// Prune removes the oldest backups until at most keep remain.
func Prune(dir string, keep int) error {
	list, err := List(dir)
	if err != nil {
		return err
	}
	for i := keep; i < len(list); i++ {
		if err := os.RemoveAll(filepath.Join(dir, list[i].Name)); err != nil {
			return fmt.Errorf("remove old backup %s: %w", list[i].Name, err)
		}
	}
	return nil
}

// readMeta reads the metadata of the backup entry in dir and its size.
func readMeta(dir, entry string) (Meta, int64, error) {
	path := filepath.Join(dir, entry)
	st, err := os.Lstat(path)
	if err != nil {
		return Meta{}, 0, err
	}
	var m Meta
	var size int64
	if st.IsDir() {
		b, err := readMetaFile(filepath.Join(path, MetaName))
		if err != nil {
			return Meta{}, 0, fmt.Errorf("%w: %s: %s: %v", ErrCorrupt, entry, MetaName, err)
		}
		if err := json.Unmarshal(b, &m); err != nil {
			return Meta{}, 0, fmt.Errorf("%w: %s: %v", ErrCorrupt, MetaName, err)
		}
		_ = filepath.WalkDir(path, func(_ string, d fs.DirEntry, err error) error {
			if err == nil && d.Type().IsRegular() {
				if i, err := d.Info(); err == nil {
					size += i.Size()
				}
			}
			return nil
		})
	} else {
		if !st.Mode().IsRegular() {
			return Meta{}, 0, fmt.Errorf("%w: %s is not a file", ErrCorrupt, entry)
		}
		f, err := os.Open(path)
		if err != nil {
			return Meta{}, 0, err
		}
		defer f.Close()
		tr, closeTar, err := openTar(f)
		if err != nil {
			return Meta{}, 0, err
		}
		defer closeTar()
		hdr, err := tr.Next()
		if err != nil || hdr.Name != MetaName || hdr.Size > maxMeta {
			return Meta{}, 0, fmt.Errorf("%w: %s does not start with %s", ErrCorrupt, entry, MetaName)
		}
		if err := json.NewDecoder(io.LimitReader(tr, hdr.Size)).Decode(&m); err != nil {
			return Meta{}, 0, fmt.Errorf("%w: %s: %v", ErrCorrupt, MetaName, err)
		}
		size = st.Size()
	}
	if m.Format != Format || m.Timestamp == "" {
		return Meta{}, 0, fmt.Errorf("%w: %s: format %d", ErrCorrupt, MetaName, m.Format)
	}
	if m.Files == nil {
		m.Files = []File{}
	}
	return m, size, nil
}

// readMetaFile reads the metadata.json of a backup folder: a regular
// file (not a link out of the folder, not a FIFO that would hold the
// backups actor forever) of at most maxMeta bytes.
func readMetaFile(path string) ([]byte, error) {
	st, err := os.Lstat(path)
	if err != nil {
		return nil, err
	}
	if !st.Mode().IsRegular() {
		return nil, errors.New("not a regular file")
	}
	if st.Size() > maxMeta {
		return nil, fmt.Errorf("larger than %d bytes", maxMeta)
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if st, err := f.Stat(); err != nil || !st.Mode().IsRegular() {
		return nil, errors.New("not a regular file")
	}
	b, err := io.ReadAll(io.LimitReader(f, maxMeta+1))
	if err != nil {
		return nil, err
	}
	if len(b) > maxMeta {
		return nil, fmt.Errorf("larger than %d bytes", maxMeta)
	}
	return b, nil
}

func openTar(r io.Reader) (*tar.Reader, func(), error) {
	gz, err := gzip.NewReader(r)
	if err != nil {
		return nil, nil, fmt.Errorf("%w: not gzip: %v", ErrCorrupt, err)
	}
	return tar.NewReader(gz), func() { gz.Close() }, nil
}
