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

	names   *userNames
	asked   []<-chan struct{} // lookups started by the scans of this Table call
	unnamed []int             // rows of the last scan whose user is not known yet

	scans atomic.Uint64
}

// NewSampler reads the host's /proc.
func NewSampler() *Sampler { return newSampler("/proc") }

func newSampler(root string) *Sampler {
	return &Sampler{MaxAge: time.Second, root: root, now: time.Now, rd: newReader(root), names: newUserNames(lookupUser)}
}

// Scans is how many times /proc was scanned (for tests and metrics).
func (s *Sampler) Scans() uint64 { return s.scans.Load() }

// staleAfter: a previous scan older than this is not a useful baseline.
const staleAfter = 10 * time.Second

// firstGap is the wait between the two scans of a first request.
const firstGap = 200 * time.Millisecond

// nameWait is how long a table waits for the user names it asked for.
const nameWait = 100 * time.Millisecond

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
		s.asked = s.asked[:0]
		return nil, err
	}
	s.nameRows(t)
	s.last = t
	return t, nil
}

// nameRows waits up to nameWait for the lookups the scans of this call
// started, then names the rows it can. A lookup that takes longer leaves
// its uid's number in this table, and its name in the next after it
// returns: it must not hold every request for seconds.
func (s *Sampler) nameRows(t *Table) {
	if len(s.unnamed) > 0 && len(s.asked) > 0 {
		timer := time.NewTimer(nameWait)
	wait:
		for _, done := range s.asked {
			select {
			case <-done:
			case <-timer.C:
				break wait
			}
		}
		timer.Stop()
	}
	s.asked = s.asked[:0]
	for _, i := range s.unnamed {
		if n, ok := s.names.name(t.Processes[i].UID); ok {
			t.Processes[i].User = n
		}
	}
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
	s.unnamed = s.unnamed[:0]
	var unknown []uint32
	for _, pid := range pids {
		r, err := s.rd.read(pid)
		if err != nil {
			continue // exited between listing and reading
		}
		next[pid] = r.ticks
		nextStart[pid] = r.startTicks
		p := Process{
			PID: r.pid, PPID: r.ppid, Name: r.name, Cmdline: r.cmdline, UID: r.uid,
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
		if n, ok := s.names.name(r.uid); ok {
			p.User = n
		} else {
			p.User = strconv.FormatUint(uint64(r.uid), 10)
			s.unnamed = append(s.unnamed, len(t.Processes))
			unknown = append(unknown, r.uid)
		}
		t.Processes = append(t.Processes, p)
	}
	if done := s.names.ask(unknown); done != nil {
		s.asked = append(s.asked, done)
	}
	s.prev, s.start, s.prevAt = next, nextStart, at
	return t, nil
}

// userNames names uids from the system user database, each once and off
// the sampler's lock: through NSS a lookup may ask LDAP or SSSD and take
// seconds, or as long as their timeouts when they are down.
type userNames struct {
	lookup func(uid uint32) string

	mu    sync.Mutex // guards the fields below
	known map[uint32]string
	asked map[uint32]bool
}

func newUserNames(lookup func(uint32) string) *userNames {
	return &userNames{lookup: lookup, known: map[uint32]string{}, asked: map[uint32]bool{}}
}

// name is uid's name, false until its lookup has returned.
func (n *userNames) name(uid uint32) (string, bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	name, ok := n.known[uid]
	return name, ok
}

// ask looks up, on a goroutine, the uids that were never asked for, one
// after the other; done is closed once all have returned, nil when there
// was nothing new to ask.
func (n *userNames) ask(uids []uint32) (done <-chan struct{}) {
	n.mu.Lock()
	var todo []uint32
	for _, uid := range uids {
		if !n.asked[uid] {
			n.asked[uid] = true
			todo = append(todo, uid)
		}
	}
	n.mu.Unlock()
	if len(todo) == 0 {
		return nil
	}
	ch := make(chan struct{})
	go func() {
		defer close(ch)
		for _, uid := range todo {
			name := n.lookup(uid)
			n.mu.Lock()
			n.known[uid] = name
			n.mu.Unlock()
		}
	}()
	return ch
}

// lookupUser names uid from the system user database, or by its number
// when it has no entry there.
func lookupUser(uid uint32) string {
	id := strconv.FormatUint(uint64(uid), 10)
	if u, err := user.LookupId(id); err == nil {
		return u.Username
	}
	return id
}
