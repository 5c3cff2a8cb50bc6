package collect

import (
	"bytes"
	"os"
	"strconv"
	"sync/atomic"
	"syscall"
)

// procReader reads a small /proc or /sys file into a buffer it reuses. Like
// Netdata's procfile it keeps the file open and reads it again from offset
// 0 each time (the kernel regenerates /proc text on every read), which
// saves an open and a close per file per second.
//
// At most keptOpenMax files are kept open by the whole package (a host
// with thousands of processes or cgroups would otherwise hold three to
// eight descriptors for each, against RLIMIT_NOFILE); readers opened
// beyond that open and close their file on every read.
type procReader struct {
	path string
	f    *os.File
	fd   int
	kept bool // counted in keptOpen
	buf  []byte
}

// keptOpenMax is the budget of files the package keeps open.
const keptOpenMax = 2048

// keptOpen counts the files kept open. Collectors run one at a time from
// the Manager, but tests run several Managers at once.
var keptOpen atomic.Int64

func newProcReader(path string) *procReader {
	// Most files are a few hundred bytes (a process's stat, a sysfs
	// value); the buffer grows on the first read of a bigger one.
	return &procReader{path: path, buf: make([]byte, 0, 512)}
}

// read returns the whole file; the slice is valid until the next call.
//
// It calls pread(2) directly. A /proc file made by one show call
// (meminfo, stat, snmp: seq_file's single_open) comes whole in one read
// that has room for it, but a file made record by record (interrupts,
// net/dev, diskstats, mountinfo, slabinfo) comes one seq_file buffer at
// a time: at least a page, less the record that did not fit. So a read
// shorter than the room is the end only when it is shorter than
// seqChunkMin: a read of a page's worth may be followed by more (a host
// with 40 disks or 64 CPUs has a /proc/diskstats or /proc/interrupts
// longer than a page). Small files, most of what is read each second
// (a process's stat and io), still cost one pread; os.File.ReadAt would
// always make a second one to see EOF.
func (r *procReader) read() ([]byte, error) {
	if r.f == nil {
		f, err := os.Open(r.path)
		if err != nil {
			return nil, err
		}
		r.f = f
		r.fd = int(f.Fd())
		r.kept = keptOpen.Add(1) <= keptOpenMax
		if !r.kept {
			keptOpen.Add(-1)
			defer r.close() // over budget: open and close each time
		}
	}
	r.buf = r.buf[:0]
	for {
		if len(r.buf) == cap(r.buf) {
			r.buf = append(r.buf, 0)[:len(r.buf)]
		}
		room := r.buf[len(r.buf):cap(r.buf)]
		n, err := syscall.Pread(r.fd, room, int64(len(r.buf)))
		if err == syscall.EINTR {
			continue
		}
		if err != nil {
			r.close() // reopen on the next call (e.g. the file went away)
			return nil, &os.PathError{Op: "read", Path: r.path, Err: err}
		}
		r.buf = r.buf[:len(r.buf)+n]
		if n == 0 || (n < len(room) && n < seqChunkMin) {
			return r.buf, nil
		}
	}
}

// seqChunkMin is the shortest read that may not be the end of a file:
// seq_file hands out at least a page (4 KiB) less one record per read,
// and records of /proc's text files are under 2 KiB (an interrupts line
// reaches that with ~180 CPUs, where its header line alone is as long,
// so the header's read is long enough too).
const seqChunkMin = 2048

// close releases the kept-open file; a later read opens it again.
func (r *procReader) close() {
	if r.f != nil {
		r.f.Close()
		r.f = nil
		if r.kept {
			keptOpen.Add(-1)
			r.kept = false
		}
	}
}

// fields splits line on spaces and tabs into dst (reused) without
// allocating strings.
func fields(dst [][]byte, line []byte) [][]byte {
	dst = dst[:0]
	i := 0
	for i < len(line) {
		for i < len(line) && (line[i] == ' ' || line[i] == '\t') {
			i++
		}
		j := i
		for j < len(line) && line[j] != ' ' && line[j] != '\t' {
			j++
		}
		if j > i {
			dst = append(dst, line[i:j])
		}
		i = j
	}
	return dst
}

// parseUint parses a decimal counter.
func parseUint(b []byte) (uint64, error) {
	return strconv.ParseUint(string(b), 10, 64) // the compiler does not allocate for this conversion
}

// nextLine returns the first line of b and the rest.
func nextLine(b []byte) (line, rest []byte) {
	if i := bytes.IndexByte(b, '\n'); i >= 0 {
		return b[:i], b[i+1:]
	}
	return b, nil
}
