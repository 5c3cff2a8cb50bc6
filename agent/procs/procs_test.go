package procs

import (
	"fmt"
	"os"
	"os/user"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"peerdns/internal/testutil"
)

func needProc(t testing.TB) {
	t.Helper()
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		t.Skip("needs Linux /proc (run on Linux)")
	}
}

func TestParseStat(t *testing.T) {
	for _, tt := range []struct {
		name, line string
		want       raw
		wantErr    bool
	}{
		{"plain", "42 (nginx) S 1 42 42 0 -1 4194560 100 0 0 0 150 50 0 0 20 0 3 0 1234 1000000 250 18446744073709551615",
			raw{name: "nginx", state: 'S', ppid: 1, ticks: 200, threads: 3, startTicks: 1234, rssPages: 250}, false},
		{"spaces and parentheses in the name", "7 (a (b) c)) R 2 7 7 0 -1 0 0 0 0 0 5 6 0 0 20 0 1 0 99 0 10",
			raw{name: "a (b) c)", state: 'R', ppid: 2, ticks: 11, threads: 1, startTicks: 99, rssPages: 10}, false},
		{"truncated", "7 (x) R 2 7", raw{}, true},
		{"no parentheses", "7 x R 2", raw{}, true},
		{"empty", "", raw{}, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var got raw
			err := parseStat([]byte(tt.line), &got)
			if (err != nil) != tt.wantErr {
				t.Fatalf("parseStat(%q) err = %v, wantErr %v", tt.line, err, tt.wantErr)
			}
			if err == nil && got != tt.want {
				t.Fatalf("parseStat(%q) = %+v, want %+v", tt.line, got, tt.want)
			}
		})
	}
}

func FuzzParseStat(f *testing.F) {
	for _, s := range []string{"42 (nginx) S 1 42 42 0 -1 4194560 100 0 0 0 150 50 0 0 20 0 3 0 1234 1000000 250", "7 (a (b) c)) R 2", "((", ")", "1 () R"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		var r raw
		_ = parseStat([]byte(s), &r) // must not panic
	})
}

// TestOwnProcess finds the test binary in the table with the values the
// runtime knows about itself.
func TestOwnProcess(t *testing.T) {
	needProc(t)
	s := NewSampler()
	tab, err := s.Table()
	if err != nil {
		t.Fatal(err)
	}
	var me *Process
	for i := range tab.Processes {
		if tab.Processes[i].PID == os.Getpid() {
			me = &tab.Processes[i]
		}
	}
	if me == nil {
		t.Fatalf("pid %d not in a table of %d processes", os.Getpid(), len(tab.Processes))
	}
	comm, _ := os.ReadFile("/proc/self/comm")
	u, _ := user.Current()
	switch {
	case me.PPID != os.Getppid():
		t.Errorf("ppid = %d, want %d", me.PPID, os.Getppid())
	case me.Name != strings.TrimSpace(string(comm)):
		t.Errorf("name = %q, want %q", me.Name, strings.TrimSpace(string(comm)))
	case !strings.Contains(me.Cmdline, os.Args[0]):
		t.Errorf("cmdline = %q, want it to hold %q", me.Cmdline, os.Args[0])
	case u != nil && me.User != u.Username:
		t.Errorf("user = %q, want %q", me.User, u.Username)
	case me.Threads < 2 || me.RSSBytes < 1<<20:
		t.Errorf("threads %d, rss %d: a Go test binary has several threads and megabytes resident", me.Threads, me.RSSBytes)
	case me.State != "R" && me.State != "S":
		t.Errorf("state = %q", me.State)
	case me.StartTime > time.Now().Unix()+1 || me.StartTime < time.Now().Add(-time.Hour).Unix():
		t.Errorf("start time %v is not within this test's run", time.Unix(me.StartTime, 0))
	}
	if tab.Interval < firstGap {
		t.Errorf("first table measured over %v, want two scans at least %v apart", tab.Interval, firstGap)
	}
}

// TestSlowUserLookup: a user name lookup that does not return (NSS asking
// an LDAP server that is down) holds no request: the table shows the uid's
// number until the name comes, then the name.
func TestSlowUserLookup(t *testing.T) {
	needProc(t)
	release := make(chan struct{})
	t.Cleanup(func() {
		select {
		case <-release:
		default:
			close(release)
		}
	})
	s := NewSampler()
	s.MaxAge = 0 // every request scans
	s.names = newUserNames(func(uid uint32) string { <-release; return "ldap-user" })
	uid := strconv.Itoa(os.Getuid())
	own := func() (string, error) {
		tab, err := s.Table()
		if err != nil {
			return "", err
		}
		q := Query{PIDs: []int{os.Getpid()}, Limit: 1}
		r := q.Apply(tab)
		if r.Total != 1 {
			return "", fmt.Errorf("own pid %d not in the table", os.Getpid())
		}
		return r.Processes[0].User, nil
	}
	for i := 0; i < 2; i++ {
		got := make(chan string, 1)
		go func() {
			u, err := own()
			if err != nil {
				t.Error(err)
			}
			got <- u
		}()
		select {
		case u := <-got:
			if u != uid {
				t.Errorf("request %d: user = %q while its lookup has not returned, want the uid %q", i, u, uid)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("request %d has not returned after 10 s: it waits for the user name lookup", i)
		}
	}
	close(release) // the lookups return
	testutil.Eventually(t, 10*time.Second, func() error {
		if u, err := own(); err != nil || u != "ldap-user" {
			return fmt.Errorf("user = %q (%v), want ldap-user once the lookup returned", u, err)
		}
		return nil
	})
}

// TestCPUPercent: a goroutine spinning on one CPU shows as tens of percent
// on the test's own pid.
func TestCPUPercent(t *testing.T) {
	needProc(t)
	var stop atomic.Bool
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { // spins on one CPU until the test ends
		defer wg.Done()
		runtime.LockOSThread()
		for !stop.Load() {
		}
	}()
	t.Cleanup(func() { stop.Store(true); wg.Wait() })
	s := NewSampler()
	testutil.Eventually(t, 10*time.Second, func() error {
		tab, err := s.Table()
		if err != nil {
			return err
		}
		q := Query{PIDs: []int{os.Getpid()}, Sort: "cpu", Limit: 1}
		r := q.Apply(tab)
		if r.Total != 1 {
			return fmt.Errorf("own pid %d not in the table", os.Getpid())
		}
		if c := r.Processes[0].CPUPercent; c < 30 || c > float64(runtime.NumCPU())*100+5 {
			return fmt.Errorf("own cpu_percent %.2f while spinning, want 30..%d", c, runtime.NumCPU()*100)
		}
		return nil
	})
}

// TestBurstCostsOneScan: concurrent requests within MaxAge share a scan.
func TestBurstCostsOneScan(t *testing.T) {
	needProc(t)
	s := NewSampler()
	s.MaxAge = time.Hour // the burst must not outlive the scan
	var wg sync.WaitGroup
	for i := 0; i < 32; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := s.Table(); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	if n := s.Scans(); n != 2 { // the first table is two scans (CPU % needs a baseline)
		t.Errorf("%d scans for a burst of 32, want 2", n)
	}
	if _, err := s.Table(); err != nil || s.Scans() != 2 {
		t.Errorf("a request within MaxAge scanned again (%d scans, err %v)", s.Scans(), err)
	}
}

func TestNoProc(t *testing.T) {
	s := newSampler(t.TempDir() + "/nothing")
	if _, err := s.Table(); err != ErrUnsupported {
		t.Errorf("Table without /proc = %v, want ErrUnsupported", err)
	}
}

func table() *Table {
	return &Table{Processes: []Process{
		{PID: 1, PPID: 0, Name: "systemd", Cmdline: "/sbin/init splash", User: "root", State: "S", CPUPercent: 0.5, RSSBytes: 12 << 20, Threads: 1, StartTime: 100},
		{PID: 20, PPID: 1, Name: "nginx", Cmdline: "nginx: master process /usr/sbin/nginx", User: "root", State: "S", CPUPercent: 2, RSSBytes: 8 << 20, Threads: 1, StartTime: 200},
		{PID: 21, PPID: 20, Name: "nginx", Cmdline: "nginx: worker process", User: "www-data", State: "R", CPUPercent: 40, RSSBytes: 30 << 20, Threads: 4, StartTime: 201},
		{PID: 300, PPID: 1, Name: "postgres", Cmdline: "/usr/lib/postgresql/15/bin/postgres -D /var/lib/postgresql", User: "postgres", State: "S", CPUPercent: 7.25, RSSBytes: 120 << 20, Threads: 1, StartTime: 300},
		{PID: 4000, PPID: 1, Name: "Web Content", Cmdline: "/usr/lib/firefox/firefox -contentproc", User: "alice", State: "S", CPUPercent: 40, RSSBytes: 300 << 20, Threads: 30, StartTime: 400},
	}}
}

func TestQuery(t *testing.T) {
	for _, tt := range []struct {
		q     string
		pids  []int
		total int
	}{
		{"", []int{21, 4000, 300, 20, 1}, 5}, // cpu desc, ties by pid
		{"sort=pid", []int{1, 20, 21, 300, 4000}, 5},
		{"sort=pid&order=desc", []int{4000, 300, 21, 20, 1}, 5},
		{"sort=name", []int{4000, 20, 21, 300, 1}, 5},
		{"sort=rss", []int{4000, 300, 21, 1, 20}, 5},
		{"sort=memory&order=asc", []int{20, 1, 21, 300, 4000}, 5},
		{"sort=threads&limit=2", []int{4000, 21}, 5},
		{"sort=start&order=asc&offset=3", []int{300, 4000}, 5},
		{"sort=user", []int{4000, 300, 1, 20, 21}, 5},
		{"filter=nginx", []int{21, 20}, 2},
		{"filter=post*|sys*", []int{300, 1}, 2},
		{"filter=!nginx|*", []int{4000, 300, 1}, 3},
		{"filter=firefox", []int{4000}, 1}, // the command's first word
		{"q=WORKER", []int{21}, 1},
		{"q=www-data", []int{21}, 1},
		{"q=/var/lib", []int{300}, 1},
		{"pid=20,1&sort=pid", []int{1, 20}, 2},
		{"pid=99", []int{}, 0},
		{"offset=10", []int{}, 5},
	} {
		t.Run(tt.q, func(t *testing.T) {
			q, err := ParseQuery(getter(tt.q))
			if err != nil {
				t.Fatal(err)
			}
			r := q.Apply(table())
			var got []int
			for _, p := range r.Processes {
				got = append(got, p.PID)
			}
			if fmt.Sprint(got) != fmt.Sprint(tt.pids) || r.Total != tt.total {
				t.Errorf("%s: pids %v total %d, want %v total %d", tt.q, got, r.Total, tt.pids, tt.total)
			}
		})
	}
}

func TestBadQuery(t *testing.T) {
	for _, q := range []string{"limit=-1", "limit=0", "limit=10001", "limit=x", "offset=-1", "sort=bogus", "order=up",
		"pid=abc", "pid=0", "pid=-5", "q=" + strings.Repeat("a", 10<<10), "filter=" + strings.Repeat("a*", 200)} {
		if _, err := ParseQuery(getter(q)); err == nil {
			t.Errorf("ParseQuery(%.40q) accepted", q)
		} else if len(err.Error()) > 200 {
			t.Errorf("ParseQuery(%.40q) error is %d bytes long", q, len(err.Error()))
		}
	}
}

func FuzzParseQuery(f *testing.F) {
	for _, s := range []string{"sort=cpu&order=asc&limit=5", "pid=1,2,3", "filter=!a|b*&q=x", "offset=99999999999"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		q, err := ParseQuery(getter(s))
		if err != nil {
			return
		}
		r := q.Apply(table())
		if len(r.Processes) > q.Limit || r.Total > 5 {
			t.Fatalf("%q: %d rows for limit %d, total %d", s, len(r.Processes), q.Limit, r.Total)
		}
	})
}

func getter(q string) Getter {
	m := map[string]string{}
	for _, kv := range strings.Split(q, "&") {
		if kv == "" {
			continue
		}
		k, v, _ := strings.Cut(kv, "=")
		m[k] = v
	}
	return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
}
