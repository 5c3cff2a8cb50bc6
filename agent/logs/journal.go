package logs

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"
)

// Journal reads the systemd journal through journalctl's JSON export
// (journalctl -o json), run with an argument list and never a shell.
// journalctl is used instead of a Go journal library: the maintained
// one (coreos/go-systemd's sdjournal) needs cgo and libsystemd at build
// time, and parsing the journal's binary files by hand would follow
// systemd's on-disk format changes; journalctl is present wherever a
// journal is.
type Journal struct {
	// Dir reads the journal files in this directory (journalctl -D);
	// "" reads the system journal.
	Dir string
	// Bin is the journalctl to run ("" finds journalctl on PATH).
	Bin string
	// MaxScan bounds the entries one page reads while filtering by q
	// (0: DefaultMaxScan); a page that stops there says Truncated.
	MaxScan int
	// Timeout bounds one journalctl run (0: 10 s).
	Timeout time.Duration
}

// DefaultMaxScan is how many journal entries a q search reads per page.
const DefaultMaxScan = 50000

// ErrNoJournal reports a machine without a readable journal; the error's
// text says why (no journalctl, no journal files).
var ErrNoJournal = errors.New("no systemd journal")

// journalDirs are where journald keeps its files.
var journalDirs = []string{"/var/log/journal", "/run/log/journal"}

func (j *Journal) available() (string, error) {
	if runtime.GOOS != "linux" {
		return "", fmt.Errorf("%w: the journal source works on Linux only", ErrNoJournal)
	}
	bin := j.Bin
	if bin == "" {
		var err error
		if bin, err = exec.LookPath("journalctl"); err != nil {
			return "", fmt.Errorf("%w: journalctl is not installed on this machine", ErrNoJournal)
		}
	}
	dirs := journalDirs
	if j.Dir != "" {
		dirs = []string{j.Dir}
	}
	for _, d := range dirs {
		if hasJournalFiles(d) {
			return bin, nil
		}
	}
	return "", fmt.Errorf("%w: no journal files on this machine (looked in %s)", ErrNoJournal, strings.Join(dirs, ", "))
}

// hasJournalFiles looks for *.journal files in d or one level below
// (journald keeps them under the machine id).
func hasJournalFiles(d string) bool {
	for _, pat := range []string{"*.journal", "*/*.journal"} {
		if m, _ := filepath.Glob(filepath.Join(d, pat)); len(m) > 0 {
			return true
		}
	}
	return false
}

// maxJournalctlTime is the latest --until given to journalctl, in unix
// seconds (the last second of year 9999; it refuses a time some
// thousand times later).
const maxJournalctlTime = 253402300799

// args builds journalctl's argument list for q: newest first, JSON, only
// the fields shown, the time window, priority and unit done by journalctl
// itself; q is matched here.
func (j *Journal) args(q *Query) []string {
	// --all: without it -o json prints a field over 4096 bytes (a stack
	// trace's message) as null.
	a := []string{"--no-pager", "--quiet", "--all", "-o", "json", "-r",
		"--output-fields=MESSAGE,PRIORITY,_SYSTEMD_UNIT,SYSLOG_IDENTIFIER,_PID,_COMM"}
	if j.Dir != "" {
		a = append(a, "-D", j.Dir)
	}
	// journalctl takes only one of --since and --after-cursor; with a
	// cursor, Read stops at the first entry older than since instead.
	// It refuses a time before 1970 or far in the future; such a bound
	// holds every entry and is left to Read's own check.
	if !q.Since.IsZero() && q.Cursor.Journal == "" && q.Since.Unix() > 0 {
		a = append(a, "--since=@"+strconv.FormatInt(q.Since.Unix(), 10))
	}
	if !q.Until.IsZero() && q.Until.Unix() < maxJournalctlTime {
		a = append(a, "--until=@"+strconv.FormatInt(q.Until.Unix()+1, 10))
	}
	if q.Priority >= 0 {
		a = append(a, "--priority="+strconv.Itoa(q.Priority))
	}
	if q.Unit != "" {
		a = append(a, "--unit="+q.Unit)
	}
	if q.Cursor.Journal != "" {
		a = append(a, "--after-cursor="+q.Cursor.Journal)
	}
	if q.Q == "" {
		// One more than the page: whether there is more.
		a = append(a, "-n", strconv.Itoa(q.Limit+1))
	}
	return a
}

// Read returns one page, newest first.
func (j *Journal) Read(ctx context.Context, q Query) (Page, error) {
	bin, err := j.available()
	if err != nil {
		return Page{}, err
	}
	timeout := j.Timeout
	if timeout <= 0 {
		timeout = 10 * time.Second
	}
	maxScan := j.MaxScan
	if maxScan <= 0 {
		maxScan = DefaultMaxScan
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, j.args(&q)...)
	cmd.Env = append(os.Environ(), "SYSTEMD_COLORS=0", "LC_ALL=C")
	var stderr strings.Builder
	cmd.Stderr = &limitedWriter{w: &stderr, n: 4096}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return Page{}, err
	}
	if err := cmd.Start(); err != nil {
		return Page{}, fmt.Errorf("run journalctl: %w", err)
	}
	page := Page{Source: SourceJournal, Entries: []Entry{}}
	// Unit and time are filtered by journalctl (it knows "ssh" means
	// ssh.service); q and the exact bounds here.
	match := q
	match.Unit = ""
	br := bufio.NewReaderSize(out, 64<<10)
	var line []byte
	var readErr error
	scanned := 0
	var last string
	for {
		var long bool
		if line, long, readErr = readLine(br, line, maxJournalLine); readErr != nil {
			if readErr == io.EOF {
				readErr = nil
			}
			break
		}
		scanned++
		if long {
			continue // an entry past maxJournalLine is left out, not the page
		}
		e, err := parseJournalLine(line)
		if err != nil {
			continue
		}
		last = e.Cursor
		if !q.Since.IsZero() && e.Time.Before(q.Since) {
			break // newest first: everything after this is older still
		}
		if !match.matches(&e) {
			if scanned >= maxScan {
				page.Truncated = true
				break
			}
			continue
		}
		if len(page.Entries) == q.Limit {
			page.More = true
			break
		}
		page.Entries = append(page.Entries, e)
		if scanned >= maxScan {
			page.Truncated = true
			break
		}
	}
	if page.More || page.Truncated {
		// The page is full: stop journalctl; its exit status then says
		// nothing.
		cancel()
		_ = cmd.Wait()
	} else {
		werr := cmd.Wait()
		if ctx.Err() != nil {
			return Page{}, fmt.Errorf("journalctl did not finish within %v", timeout)
		}
		if readErr != nil {
			return Page{}, fmt.Errorf("read journalctl: %w", readErr)
		}
		if werr != nil && scanned == 0 {
			return Page{}, fmt.Errorf("journalctl: %v: %s", werr, strings.TrimSpace(stderr.String()))
		}
	}
	switch {
	case page.Truncated:
		// Continue the search where it stopped, matched or not.
		page.Next = Cursor{Source: SourceJournal, Journal: last}
	case page.More:
		page.Next = Cursor{Source: SourceJournal, Journal: page.Entries[len(page.Entries)-1].Cursor}
	}
	return page, nil
}

// Bounds of one journal entry: journalctl runs with --all, so its fields
// come whole, and a client of journald chooses their size.
const (
	// maxJournalLine bounds one entry of journalctl's output (a message
	// of megabytes logged through the native protocol); a longer one is
	// left out.
	maxJournalLine = 4 << 20
	// maxJournalMessage bounds the message kept (a page holds up to
	// MaxLimit entries), cut as the audit trail's texts are.
	maxJournalMessage = 64 << 10
	// maxJournalField bounds the unit and the other fields kept: the
	// 4096 bytes journalctl prints without --all.
	maxJournalField = 4096
)

// readLine reads one line of r into buf (reused) without its newline. A
// line longer than limit is read past and comes back empty with long set.
// io.EOF is returned only when no line is left.
func readLine(r *bufio.Reader, buf []byte, limit int) (line []byte, long bool, err error) {
	buf = buf[:0]
	for {
		frag, err := r.ReadSlice('\n')
		if !long && len(buf)+len(frag) <= limit {
			buf = append(buf, frag...)
		} else {
			long, buf = true, buf[:0]
		}
		switch {
		case err == bufio.ErrBufferFull:
			continue
		case err == io.EOF && (len(buf) > 0 || long):
			return buf, long, nil // a last line without a newline
		case err != nil:
			return buf, long, err
		}
		return bytes.TrimSuffix(buf, []byte{'\n'}), long, nil
	}
}

// parseJournalLine reads one entry of journalctl -o json. MESSAGE may be
// a string or, for binary data, an array of bytes.
func parseJournalLine(b []byte) (Entry, error) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(b, &m); err != nil {
		return Entry{}, err
	}
	str := func(k string) string {
		raw, ok := m[k]
		if !ok {
			return ""
		}
		var s string
		if json.Unmarshal(raw, &s) == nil {
			return s
		}
		var bs []byte
		var nums []int
		if json.Unmarshal(raw, &nums) == nil {
			for _, n := range nums {
				bs = append(bs, byte(n))
			}
			return strings.ToValidUTF8(string(bs), "\uFFFD")
		}
		return ""
	}
	e := Entry{Cursor: str("__CURSOR"), Message: clipText(str("MESSAGE"), maxJournalMessage), Priority: PriInfo}
	if e.Cursor == "" {
		return Entry{}, errors.New("no __CURSOR")
	}
	us, err := strconv.ParseInt(str("__REALTIME_TIMESTAMP"), 10, 64)
	if err != nil {
		return Entry{}, fmt.Errorf("__REALTIME_TIMESTAMP: %w", err)
	}
	e.Time = time.UnixMicro(us)
	if p, ok := ParsePriority(str("PRIORITY")); ok {
		e.Priority = p
	}
	e.Unit = clipText(str("_SYSTEMD_UNIT"), maxJournalField)
	if e.Unit == "" {
		e.Unit = clipText(str("SYSLOG_IDENTIFIER"), maxJournalField)
	}
	for _, k := range []string{"SYSLOG_IDENTIFIER", "_PID", "_COMM"} {
		if v := clipText(str(k), maxJournalField); v != "" {
			if e.Fields == nil {
				e.Fields = map[string]string{}
			}
			e.Fields[k] = v
		}
	}
	return e, nil
}

// limitedWriter keeps the first n bytes written.
type limitedWriter struct {
	w *strings.Builder
	n int
}

func (l *limitedWriter) Write(p []byte) (int, error) {
	if room := l.n - l.w.Len(); room > 0 {
		l.w.Write(p[:min(len(p), room)])
	}
	return len(p), nil
}
