package logs

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"
)

// Audit is the agent's own audit trail: settings changes, prunes, admin
// calls, exports, starts and stops. It is a Ring persisted as JSON lines
// in one file, so the trail survives restarts.
//
// Bounds: the newest Capacity entries are kept (in memory and on disk);
// the file is rewritten with only those once it holds twice as many
// lines, so it never grows past about 2*Capacity lines. An entry's
// message is cut at 4 KiB, its unit and each field at 1 KiB, and it keeps
// at most 32 fields, so a line stays a few KiB. Each entry is
// written and synced before Record returns: audit entries are rare (a
// handful an hour) and one that is lost in a crash is the one an auditor
// wants.
type Audit struct {
	ring *Ring
	log  *slog.Logger

	mu    sync.Mutex // guards the file and lines; held across Add and write
	path  string
	f     *os.File
	lines int
	cap   int
}

// DefaultAuditCapacity is the number of audit entries kept.
const DefaultAuditCapacity = 10000

// auditLine is an entry on disk.
type auditLine struct {
	Seq      uint64            `json:"seq"`
	Time     time.Time         `json:"time"`
	Priority int               `json:"priority"`
	Unit     string            `json:"unit"`
	Message  string            `json:"message"`
	Fields   map[string]string `json:"fields,omitempty"`
}

// OpenAudit loads the trail from path (created if missing) and keeps the
// newest capacity entries (DefaultAuditCapacity when 0). A damaged line
// (a crash mid-write, or any line over 1 MiB) is skipped and logged, and
// a last line without its newline is ended so the next entry starts a
// line of its own. path "" keeps the trail in memory only.
func OpenAudit(path string, capacity int, log *slog.Logger) (*Audit, error) {
	if capacity <= 0 {
		capacity = DefaultAuditCapacity
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	a := &Audit{ring: NewRing(capacity), log: log, path: path, cap: capacity}
	if path == "" {
		return a, nil
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("audit dir: %w", err)
	}
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open audit trail: %w", err)
	}
	a.f = f
	if err := a.load(); err != nil {
		f.Close()
		return nil, err
	}
	if a.lines > 2*a.cap {
		if err := a.compact(); err != nil {
			f.Close()
			return nil, err
		}
	}
	return a, nil
}

func (a *Audit) load() error {
	r := bufio.NewReaderSize(a.f, 64<<10)
	bad := 0
	var long []byte // a line longer than r's buffer, so far
	tooLong := false
	for {
		b, err := r.ReadSlice('\n')
		if err == bufio.ErrBufferFull {
			if tooLong = tooLong || len(long)+len(b) > maxAuditLine; !tooLong {
				long = append(long, b...)
			}
			continue
		}
		if err != nil && err != io.EOF {
			return fmt.Errorf("read audit trail: %w", err)
		}
		if len(long) > 0 {
			b = append(long, b...)
		}
		skip := tooLong
		long, tooLong = long[:0], false
		if len(b) == 0 && err == io.EOF {
			break
		}
		if skip {
			b = nil // longer than any entry: damage
		}
		a.lines++
		var l auditLine
		if jerr := json.Unmarshal(b, &l); jerr != nil || l.Seq == 0 {
			bad++
			if err == io.EOF {
				break
			}
			continue
		}
		a.ring.mu.Lock()
		if l.Seq >= a.ring.next {
			a.ring.next = l.Seq
		}
		a.ring.addLocked(Entry{Time: l.Time, Priority: l.Priority, Unit: l.Unit, Message: l.Message, Fields: l.Fields})
		a.ring.mu.Unlock()
		if err == io.EOF {
			break
		}
	}
	// A crash mid-write leaves the last line without its newline: end it,
	// so the next entry is a line of its own and not glued to the damage.
	if st, err := a.f.Stat(); err == nil && st.Size() > 0 {
		last := make([]byte, 1)
		if _, err := a.f.ReadAt(last, st.Size()-1); err != nil {
			return fmt.Errorf("read audit trail: %w", err)
		}
		if last[0] != '\n' {
			if _, err := a.f.Write([]byte{'\n'}); err != nil {
				return fmt.Errorf("end damaged audit line: %w", err)
			}
		}
	}
	if bad > 0 {
		a.log.Warn("audit trail: skipped damaged lines", "path", a.path, "lines", bad)
	}
	return nil
}

// compact rewrites the file with the entries held, through a temporary
// file renamed over it (the old trail stays whole until the new one is).
func (a *Audit) compact() error {
	tmp := a.path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return fmt.Errorf("compact audit trail: %w", err)
	}
	es, _ := a.ring.Before(0, a.cap, nil)
	w := bufio.NewWriter(f)
	for i := len(es) - 1; i >= 0; i-- {
		if err := writeLine(w, &es[i]); err != nil {
			f.Close()
			return err
		}
	}
	err = errors.Join(w.Flush(), f.Sync(), f.Close())
	if err == nil {
		err = os.Rename(tmp, a.path)
	}
	if err != nil {
		return fmt.Errorf("compact audit trail: %w", err)
	}
	old := a.f
	if a.f, err = os.OpenFile(a.path, os.O_WRONLY|os.O_APPEND, 0o600); err != nil {
		return fmt.Errorf("reopen audit trail: %w", err)
	}
	old.Close()
	a.lines = len(es)
	return nil
}

func writeLine(w io.Writer, e *Entry) error {
	b, err := json.Marshal(auditLine{Seq: e.Seq, Time: e.Time.UTC(), Priority: e.Priority, Unit: e.Unit, Message: e.Message, Fields: e.Fields})
	if err != nil {
		return err
	}
	_, err = w.Write(append(b, '\n'))
	return err
}

// Record adds an entry (Time is now when zero) and, for a persisted
// trail, writes and syncs it. A write error is returned and logged; the
// entry stays in memory either way.
func (a *Audit) Record(e Entry) error {
	e = clip(e)
	a.mu.Lock()
	defer a.mu.Unlock()
	seq := a.ring.Add(e)
	if a.f == nil {
		return nil
	}
	es, _ := a.ring.Before(seq+1, 1, nil)
	err := writeLine(a.f, &es[0])
	if err == nil {
		err = a.f.Sync()
	}
	if err != nil {
		a.log.Warn("audit trail: write failed; the entry is kept in memory only", "path", a.path, "err", err)
		return fmt.Errorf("write audit trail: %w", err)
	}
	a.lines++
	if a.lines > 2*a.cap {
		if err := a.compact(); err != nil {
			a.log.Warn("audit trail: compaction failed", "path", a.path, "err", err)
		}
	}
	return nil
}

// Bounds of one audit entry: its texts often carry a caller's words (an
// rpc method or target), and the trail keeps thousands of entries, in
// memory and on disk, and reads its file back line by line.
const (
	maxAuditMessage = 4096 // bytes of Message
	maxAuditText    = 1024 // bytes of Unit and of each field's name and value
	maxAuditFields  = 32
	// maxAuditLine is the longest line load reads as an entry; a longer
	// one is damage, skipped.
	maxAuditLine = 1 << 20
)

// clip shortens e's texts to the bounds above (at a UTF-8 boundary,
// marked with "..."), and keeps at most maxAuditFields fields.
func clip(e Entry) Entry {
	e.Message = clipText(e.Message, maxAuditMessage)
	e.Unit = clipText(e.Unit, maxAuditText)
	long := len(e.Fields) > maxAuditFields
	for k, v := range e.Fields {
		if long || len(k) > maxAuditText || len(v) > maxAuditText {
			long = true
			break
		}
	}
	if !long {
		return e
	}
	keys := slices.Sorted(maps.Keys(e.Fields))
	fs := make(map[string]string, min(len(keys), maxAuditFields))
	for _, k := range keys[:min(len(keys), maxAuditFields)] {
		fs[clipText(k, maxAuditText)] = clipText(e.Fields[k], maxAuditText)
	}
	e.Fields = fs
	return e
}

func clipText(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return strings.ToValidUTF8(s[:n-3], "") + "..."
}

// Path is the trail's file ("" when it is kept in memory only).
func (a *Audit) Path() string { return a.path }

// Before pages the trail (see Source).
func (a *Audit) Before(before uint64, limit int, keep func(*Entry) bool) ([]Entry, bool) {
	return a.ring.Before(before, limit, keep)
}

// Close closes the file.
func (a *Audit) Close() error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.f == nil {
		return nil
	}
	err := a.f.Close()
	a.f = nil
	return err
}

var _ Source = (*Audit)(nil)
