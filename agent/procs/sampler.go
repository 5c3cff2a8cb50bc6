package procs

import (
	"math"
	"os"
	"os/user"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// Process is one row of the table.
type Process struct {
	PID        int     `json:"pid"`
	PPID       int     `json:"ppid"`
	Name       string  `json:"name"`
	Cmdline    string  `json:"cmdline"`
	User       string  `json:"user"`
	UID        uint32  `json:"uid"`
	State      string  `json:"state"`
	CPUPercent float64 `json:"cpu_percent"` // of one CPU, between the last two scans
	RSSBytes   int64   `json:"rss_bytes"`
	Threads    int     `json:"threads"`
	StartTime  int64   `json:"start_time"` // unix seconds
}

// Table is one scan of every process with CPU % against the scan before.
// Never changed after the sampler publishes it.
type Table struct {
	At        time.Time     // when this scan ran
	Interval  time.Duration // wall time the CPU % is measured over
	Processes []Process     // in pid order
}

// Sampler scans /proc on demand, reusing a scan for MaxAge. Safe for
// concurrent use.
type Sampler struct {
	// MaxAge is how long a scan is reused (default one second).
	MaxAge time.Duration

	root string
	now  func() time.Time

	mu     sync.Mutex // guards the fields below; held during a scan
	rd     *reader
	prev   map[int]uint64 // pid → ticks at prevAt
	start  map[int]uint64 // pid → start ticks (a reused pid is a new process)
	prevAt time.Time
	last   *Table
	boot   int64
	users  map[uint32]string

	scans atomic.Uint64
}

// NewSampler reads the host's /proc.
func NewSampler() *Sampler { return newSampler("/proc") }

func newSampler(root string) *Sampler {
	return &Sampler{MaxAge: time.Second, root: root, now: time.Now, rd: newReader(root), users: map[uint32]string{}}
}

// Scans is how many times /proc was scanned (for tests and metrics).
func (s *Sampler) Scans() uint64 { return s.scans.Load() }

// staleAfter: a previous scan older than this is not a useful baseline.
const staleAfter = 10 * time.Second

// firstGap is the wait between the two scans of a first request.
const firstGap = 200 * time.Millisecond

// Table returns a scan at most MaxAge old, scanning if needed. Callers
// that arrive during a scan wait for it and share it.
func (s *Sampler) Table() (*Table, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	if s.last != nil && now.Sub(s.last.At) < s.MaxAge {
		return s.last, nil
	}
	if s.prev == nil || now.Sub(s.prevAt) > staleAfter {
		if _, err := s.scan(); err != nil {
			return nil, err
		}
		time.Sleep(firstGap)
	}
	t, err := s.scan()
	if err != nil {
		return nil, err
	}
	s.last = t
	return t, nil
}

// scan reads every process and computes CPU % against the previous scan.
func (s *Sampler) scan() (*Table, error) {
	s.scans.Add(1)
	if s.boot == 0 {
		b, err := s.rd.bootTime()
		if err != nil {
			if _, perr := os.Stat(s.root); perr != nil {
				return nil, ErrUnsupported
			}
			return nil, err
		}
		s.boot = b
	}
	pids, err := s.rd.pids()
	if err != nil {
		return nil, err
	}
	slices.Sort(pids)
	at := s.now()
	interval := at.Sub(s.prevAt)
	havePrev := s.prev != nil && interval > 0
	next := make(map[int]uint64, len(pids))
	nextStart := make(map[int]uint64, len(pids))
	t := &Table{At: at, Processes: make([]Process, 0, len(pids))}
	if havePrev {
		t.Interval = interval
	}
	page := int64(os.Getpagesize())
	for _, pid := range pids {
		r, err := s.rd.read(pid)
		if err != nil {
			continue // exited between listing and reading
		}
		next[pid] = r.ticks
		nextStart[pid] = r.startTicks
		p := Process{
			PID: r.pid, PPID: r.ppid, Name: r.name, Cmdline: r.cmdline, UID: r.uid, User: s.userName(r.uid),
			State: string(r.state), RSSBytes: r.rssPages * page, Threads: r.threads,
			StartTime: s.boot + int64(r.startTicks/userHZ),
		}
		if havePrev {
			if old, ok := s.prev[pid]; ok && s.start[pid] == r.startTicks && r.ticks >= old {
				p.CPUPercent = float64(r.ticks-old) / userHZ / interval.Seconds() * 100
			} else {
				// Started since the previous scan: its whole life so far.
				life := at.Sub(time.Unix(p.StartTime, 0)).Seconds()
				if life > 0 && life <= interval.Seconds()+1 {
					p.CPUPercent = float64(r.ticks) / userHZ / max(life, interval.Seconds()) * 100
				}
			}
		}
		p.CPUPercent = math.Round(p.CPUPercent*100) / 100
		t.Processes = append(t.Processes, p)
	}
	s.prev, s.start, s.prevAt = next, nextStart, at
	return t, nil
}

// userName names a uid from the user database, cached (a scan asks for
// the same few uids hundreds of times).
func (s *Sampler) userName(uid uint32) string {
	if n, ok := s.users[uid]; ok {
		return n
	}
	id := strconv.FormatUint(uint64(uid), 10)
	n := id
	if u, err := user.LookupId(id); err == nil {
		n = u.Username
	}
	s.users[uid] = n
	return n
}
