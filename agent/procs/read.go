package procs

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"syscall"
)

// ErrUnsupported reports a system without a Linux /proc.
var ErrUnsupported = errors.New("the process table needs Linux /proc, which this system does not have")

// userHZ is USER_HZ, the unit of the tick counts in /proc/<pid>/stat: 100
// on every Linux architecture (the kernel converts from its internal HZ).
const userHZ = 100

// maxCmdline bounds the command line kept per process.
const maxCmdline = 4096

// raw is one process as read from /proc, before CPU % is known.
type raw struct {
	pid, ppid  int
	name       string
	cmdline    string
	state      byte
	uid        uint32
	ticks      uint64 // utime + stime
	threads    int
	startTicks uint64 // since boot
	rssPages   int64
}

// reader reads /proc under root ("/proc" on the host; tests may point it
// at another tree). buf is reused between files: a scan runs under the
// sampler's lock, never concurrently.
type reader struct {
	root string
	buf  []byte
}

func newReader(root string) *reader { return &reader{root: root, buf: make([]byte, 0, 4096)} }

// readFile reads a small /proc file (they report size 0, so it reads
// until EOF) into r.buf, reused between files, stopping past limit bytes.
func (r *reader) readFile(path string, limit int) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b := r.buf[:0]
	for len(b) < limit {
		if len(b) == cap(b) {
			b = slices.Grow(b, cap(b)+512)
		}
		n, err := f.Read(b[len(b):cap(b)])
		b = b[:len(b)+n]
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, err
		}
	}
	r.buf = b
	return b[:min(len(b), limit)], nil
}

// pids lists the numeric entries of /proc.
func (r *reader) pids() ([]int, error) {
	d, err := os.Open(r.root)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, ErrUnsupported
		}
		return nil, err
	}
	defer d.Close()
	names, err := d.Readdirnames(-1)
	if err != nil {
		return nil, err
	}
	out := make([]int, 0, len(names))
	for _, n := range names {
		if n == "" || n[0] < '0' || n[0] > '9' {
			continue
		}
		if pid, err := strconv.Atoi(n); err == nil {
			out = append(out, pid)
		}
	}
	return out, nil
}

// bootTime is btime from /proc/stat (unix seconds).
func (r *reader) bootTime() (int64, error) {
	b, err := r.readFile(r.root+"/stat", 1<<20)
	if err != nil {
		return 0, err
	}
	i := bytes.Index(b, []byte("\nbtime "))
	if i < 0 {
		return 0, fmt.Errorf("no btime in %s/stat", r.root)
	}
	rest := b[i+len("\nbtime "):]
	if j := bytes.IndexByte(rest, '\n'); j >= 0 {
		rest = rest[:j]
	}
	return strconv.ParseInt(string(bytes.TrimSpace(rest)), 10, 64)
}

// read reads one process. A process that exited meanwhile is an error the
// caller skips.
func (r *reader) read(pid int) (raw, error) {
	dir := r.root + "/" + strconv.Itoa(pid)
	p := raw{pid: pid}
	var st syscall.Stat_t
	if err := syscall.Stat(dir, &st); err != nil {
		return p, err
	}
	p.uid = st.Uid
	b, err := r.readFile(dir+"/stat", 4096)
	if err != nil {
		return p, err
	}
	if err := parseStat(b, &p); err != nil {
		return p, fmt.Errorf("%s/stat: %w", dir, err)
	}
	b, err = r.readFile(dir+"/cmdline", maxCmdline)
	if err == nil {
		p.cmdline = cmdline(b)
	}
	return p, nil
}

// parseStat reads /proc/<pid>/stat: "pid (comm) state ppid ..." where comm
// may itself hold spaces and parentheses, so the fields start after the
// last ')'. Field numbers are proc(5)'s.
func parseStat(b []byte, p *raw) error {
	open := bytes.IndexByte(b, '(')
	end := bytes.LastIndexByte(b, ')')
	if open < 0 || end < open || end+2 >= len(b) {
		return errors.New("malformed")
	}
	p.name = string(b[open+1 : end])
	f := bytes.Fields(b[end+2:]) // f[0] is field 3 (state)
	if len(f) < 22 {
		return errors.New("too few fields")
	}
	field := func(n int) uint64 { // n: proc(5) field number
		v, _ := strconv.ParseUint(string(f[n-3]), 10, 64)
		return v
	}
	p.state = f[0][0]
	p.ppid = int(field(4))
	p.ticks = field(14) + field(15)
	p.threads = int(field(20))
	p.startTicks = field(22)
	rss, _ := strconv.ParseInt(string(f[24-3]), 10, 64)
	p.rssPages = rss
	return nil
}

// cmdline turns the NUL-separated arguments into one line.
func cmdline(b []byte) string {
	b = bytes.TrimRight(b, "\x00")
	out := make([]byte, len(b))
	for i, c := range b {
		if c == 0 {
			c = ' '
		}
		out[i] = c
	}
	return string(out)
}
