package logs

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unicode/utf8"
)

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

// TestRingPagesStablyWhileInserting pages through a ring with a small
// limit while another goroutine keeps adding: every entry that existed
// when paging started is seen exactly once, in order, and no page repeats
// or skips one.
func TestRingPagesStablyWhileInserting(t *testing.T) {
	r := NewRing(100000)
	for i := 0; i < 500; i++ {
		r.Add(Entry{Message: fmt.Sprintf("before %d", i), Priority: i % 8})
	}
	var stop atomic.Bool
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; !stop.Load(); i++ {
			r.Add(Entry{Message: fmt.Sprintf("during %d", i)})
		}
	}()
	reader := &Reader{Anomaly: r}
	q, err := ParseQuery(getter("source=anomaly&limit=7&q=before"), time.Now())
	if err != nil {
		t.Fatal(err)
	}
	var seen []uint64
	for pages := 0; ; pages++ {
		p, err := reader.Read(t.Context(), q)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range p.Entries {
			seen = append(seen, e.Seq)
		}
		if p.Next.IsZero() {
			break
		}
		if pages > 1000 {
			t.Fatal("paging does not end")
		}
		next, err := ParseQuery(getter("source=anomaly&limit=7&q=before&cursor="+p.Next.Encode()), time.Now())
		if err != nil {
			t.Fatal(err)
		}
		q = next
	}
	stop.Store(true)
	wg.Wait()
	if len(seen) != 500 {
		t.Fatalf("saw %d entries, want the 500 that existed", len(seen))
	}
	for i, s := range seen {
		if s != uint64(500-i) {
			t.Fatalf("entry %d has seq %d, want %d (newest first, no gaps, no repeats)", i, s, 500-i)
		}
	}
}

func TestRingWraps(t *testing.T) {
	r := NewRing(10)
	for i := 0; i < 25; i++ {
		r.Add(Entry{Message: fmt.Sprint(i)})
	}
	es, more := r.Before(0, 100, nil)
	if len(es) != 10 || es[0].Seq != 25 || es[9].Seq != 16 || es[0].Message != "24" || more {
		t.Fatalf("after wrapping: %d entries, first %+v, more %v", len(es), es[0], more)
	}
	es, more = r.Before(20, 3, nil)
	if len(es) != 3 || es[0].Seq != 19 || !more {
		t.Fatalf("Before(20, 3) = %v more %v", es, more)
	}
	if es, _ := r.Before(16, 5, nil); len(es) != 0 {
		t.Fatalf("entries older than what the ring holds: %v", es)
	}
}

func TestAuditPersists(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.log")
	a, err := OpenAudit(path, 3, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 10; i++ {
		if err := a.Record(Entry{Unit: "settings", Message: fmt.Sprintf("change %d", i), Fields: map[string]string{"n": fmt.Sprint(i)}}); err != nil {
			t.Fatal(err)
		}
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	if st, err := os.Stat(path); err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("audit file %v, %v: want mode 0600", st, err)
	}
	b, _ := os.ReadFile(path)
	if n := strings.Count(string(b), "\n"); n > 6 {
		t.Errorf("file holds %d lines for capacity 3, want at most 6 (compacted)", n)
	}
	// A crash mid-write leaves half a line: it is skipped.
	f, _ := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	f.WriteString(`{"seq":11,"time":"2026-`)
	f.Close()
	a, err = OpenAudit(path, 3, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	es, _ := a.Before(0, 10, nil)
	if len(es) != 3 || es[0].Seq != 10 || es[0].Message != "change 9" || es[2].Seq != 8 || es[0].Fields["n"] != "9" {
		t.Fatalf("reopened trail = %+v", es)
	}
	if err := a.Record(Entry{Message: "after restart"}); err != nil {
		t.Fatal(err)
	}
	if es, _ := a.Before(0, 1, nil); es[0].Seq != 11 {
		t.Errorf("sequence after restart = %d, want 11", es[0].Seq)
	}
	mem, err := OpenAudit("", 0, nil)
	if err != nil || mem.Record(Entry{Message: "x"}) != nil || mem.Close() != nil {
		t.Errorf("in-memory audit: %v", err)
	}
}

func TestParseQuery(t *testing.T) {
	now := time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)
	for _, tt := range []struct {
		q     string
		check func(Query) bool
	}{
		{"", func(q Query) bool { return q.Source == "journal" && q.Limit == 200 && q.Priority == -1 }},
		{"source=AUDIT&limit=2000", func(q Query) bool { return q.Source == "audit" && q.Limit == 2000 }},
		{"since=-1h&until=now", func(q Query) bool { return q.Since.Equal(now.Add(-time.Hour)) && q.Until.Equal(now) }},
		{"since=-30m", func(q Query) bool { return q.Since.Equal(now.Add(-30 * time.Minute)) }},
		{"since=-2d", func(q Query) bool { return q.Since.Equal(now.Add(-48 * time.Hour)) }},
		{"since=-1w", func(q Query) bool { return q.Since.Equal(now.Add(-7 * 24 * time.Hour)) }},
		{"since=-90", func(q Query) bool { return q.Since.Equal(now.Add(-90 * time.Second)) }},
		{"since=1795000000", func(q Query) bool { return q.Since.Equal(time.Unix(1795000000, 0)) }},
		{"since=1795000000123", func(q Query) bool { return q.Since.Equal(time.UnixMilli(1795000000123)) }},
		{"since=2026-11-25T10:00:00Z", func(q Query) bool { return q.Since.Equal(now.Add(-2 * time.Hour)) }},
		{"since=2026-11-25T13:00:00+03:00", func(q Query) bool { return q.Since.Equal(now.Add(-2 * time.Hour)) }},
		{"since=2026-11-25T10:00:00.5Z", func(q Query) bool { return q.Since.Equal(now.Add(-2*time.Hour + 500*time.Millisecond)) }},
		{"since=2026-11-25 10:00:00", func(q Query) bool { return q.Since.Equal(now.Add(-2 * time.Hour)) }},
		{"since=2026-11-25", func(q Query) bool { return q.Since.Equal(now.Add(-12 * time.Hour)) }},
		{"priority=err", func(q Query) bool { return q.Priority == 3 }},
		{"priority=4", func(q Query) bool { return q.Priority == 4 }},
		{"q=Disk FULL", func(q Query) bool { return q.Q == "disk full" }},
		{"unit=ssh", func(q Query) bool { return q.Unit == "ssh" }},
	} {
		q, err := ParseQuery(getter(tt.q), now)
		if err != nil || !tt.check(q) {
			t.Errorf("ParseQuery(%q) = %+v, %v", tt.q, q, err)
		}
	}
	c := Cursor{Source: "audit", Seq: 42}
	if q, err := ParseQuery(getter("source=audit&cursor="+c.Encode()), now); err != nil || q.Cursor != c {
		t.Errorf("cursor round trip = %+v, %v", q.Cursor, err)
	}
	jc := Cursor{Source: "journal", Journal: "s=abc;i=4;b=0123;m=3d0900;t=60a24184c06c0;x=34b0"}
	if q, err := ParseQuery(getter("cursor="+jc.Encode()), now); err != nil || q.Cursor != jc {
		t.Errorf("journal cursor round trip = %+v, %v", q.Cursor, err)
	}
}

func TestBadQuery(t *testing.T) {
	now := time.Now()
	other := Cursor{Source: "anomaly", Seq: 3}.Encode()
	for _, q := range []string{
		"limit=-1", "limit=0", "limit=2001", "limit=ten", "source=syslog", "priority=9", "priority=loud",
		"since=yesterday", "since=-1y", "since=-99999w", "since=-NaNd", "until=-nanw", "until=2026-13-01", "since=-1h&until=-2h",
		"cursor=!!!", "cursor=YWJj", "cursor=" + Cursor{Source: "audit"}.Encode(), "source=audit&cursor=" + other,
		"cursor=" + strings.Repeat("A", 2000), "q=" + strings.Repeat("x", 10<<10), "unit=" + strings.Repeat("u", 2000),
	} {
		_, err := ParseQuery(getter(q), now)
		if err == nil {
			t.Errorf("ParseQuery(%.50q) accepted", q)
		} else if len(err.Error()) > 300 {
			t.Errorf("ParseQuery(%.50q): %d-byte error", q, len(err.Error()))
		}
	}
}

func FuzzParseQuery(f *testing.F) {
	for _, s := range []string{"source=audit&since=-1h&limit=5", "since=2026-11-25T10:00:00Z&until=now", "cursor=YXVkaXQ6NQ", "since=-1.5d&priority=warning", "cursor=am91cm5hbDpzPWE7aT0x"} {
		f.Add(s)
	}
	now := time.Unix(1795000000, 0)
	f.Fuzz(func(t *testing.T, s string) {
		q, err := ParseQuery(getter(s), now)
		if err != nil {
			return
		}
		if q.Limit < 1 || q.Limit > MaxLimit || q.Priority > 7 {
			t.Fatalf("%q: %+v", s, q)
		}
		if !q.Cursor.IsZero() {
			if c, err := decodeCursor(q.Cursor.Encode()); err != nil || c != q.Cursor {
				t.Fatalf("cursor %+v does not round-trip: %v", q.Cursor, err)
			}
		}
	})
}

func TestMissingSources(t *testing.T) {
	r := &Reader{}
	for src, want := range map[string]error{"journal": ErrJournalOff, "anomaly": ErrNoAnomaly} {
		q, _ := ParseQuery(getter("source="+src), time.Now())
		if _, err := r.Read(t.Context(), q); err != want {
			t.Errorf("%s without a source: %v, want %v", src, err, want)
		}
	}
}

// TestAuditEntryAfterTornLine: a crash mid-write leaves the file without
// its final newline; the entry recorded after the restart is a line of
// its own and is still there after the next restart.
func TestAuditEntryAfterTornLine(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.log")
	a, err := OpenAudit(path, 10, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Record(Entry{Message: "before the crash"}); err != nil {
		t.Fatal(err)
	}
	a.Close()
	f, _ := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	f.WriteString(`{"seq":2,"time":"2026-`)
	f.Close()
	if a, err = OpenAudit(path, 10, nil); err != nil {
		t.Fatal(err)
	}
	if err := a.Record(Entry{Message: "after the crash"}); err != nil {
		t.Fatal(err)
	}
	a.Close()
	if a, err = OpenAudit(path, 10, nil); err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	if es, _ := a.Before(0, 10, nil); seqs(es) != "2:after the crash 1:before the crash " {
		t.Fatalf("trail after two restarts = %q", seqs(es))
	}
}

// TestAuditReloadsAGap: an entry whose write failed is missing from the
// file (it was kept in memory only), so the reloaded sequence has a gap;
// the trail still shows every entry of the file, once, and no blanks.
func TestAuditReloadsAGap(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.log")
	var b strings.Builder
	for _, s := range []int{1, 2, 3, 5} {
		fmt.Fprintf(&b, `{"seq":%d,"time":"2026-01-02T03:04:05Z","priority":5,"unit":"agent","message":"m%d"}`+"\n", s, s)
	}
	if err := os.WriteFile(path, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	a, err := OpenAudit(path, 10, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	if es, _ := a.Before(0, 10, nil); seqs(es) != "5:m5 3:m3 2:m2 1:m1 " {
		t.Fatalf("reloaded trail = %q", seqs(es))
	}
	if es, more := a.Before(5, 2, nil); seqs(es) != "3:m3 2:m2 " || !more {
		t.Fatalf("second page = %q, more %v", seqs(es), more)
	}
	if err := a.Record(Entry{Message: "m6"}); err != nil {
		t.Fatal(err)
	}
	if es, _ := a.Before(0, 10, nil); seqs(es) != "6:m6 5:m5 3:m3 2:m2 1:m1 " {
		t.Fatalf("after one more = %q", seqs(es))
	}
}

// TestAuditHugeEntry: an entry carrying a caller's megabytes (an rpc
// method name from an unknown peer) is kept short, so the trail stays
// small and the next start still reads it.
func TestAuditHugeEntry(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.log")
	a, err := OpenAudit(path, 10, nil)
	if err != nil {
		t.Fatal(err)
	}
	huge := strings.Repeat("é", 1<<20)
	if err := a.Record(Entry{Unit: "rpc", Message: "rpc " + huge, Fields: map[string]string{"method": huge}}); err != nil {
		t.Fatal(err)
	}
	if err := a.Record(Entry{Unit: "rpc", Message: "next"}); err != nil {
		t.Fatal(err)
	}
	a.Close()
	if st, err := os.Stat(path); err != nil || st.Size() > 64<<10 {
		t.Fatalf("audit file: %v, %v: want under 64 KiB", st.Size(), err)
	}
	if a, err = OpenAudit(path, 10, nil); err != nil {
		t.Fatalf("reopen after a huge entry: %v", err)
	}
	defer a.Close()
	es, _ := a.Before(0, 10, nil)
	if len(es) != 2 || es[0].Message != "next" || !strings.HasPrefix(es[1].Message, "rpc éé") || !utf8.ValidString(es[1].Message) || !strings.HasPrefix(es[1].Fields["method"], "éé") {
		t.Fatalf("reopened trail = %.200q", seqs(es))
	}
}

// TestAuditLongDamagedLine: a damaged stretch longer than any entry (a
// crash that left a run of zero bytes) is skipped like any damaged line;
// the agent still starts with the entries around it.
func TestAuditLongDamagedLine(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.log")
	line := func(s int) string {
		return fmt.Sprintf(`{"seq":%d,"time":"2026-01-02T03:04:05Z","priority":5,"unit":"agent","message":"m%d"}`+"\n", s, s)
	}
	text := line(1) + strings.Repeat("\x00", 3<<20) + "\n" + line(2)
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	a, err := OpenAudit(path, 10, nil)
	if err != nil {
		t.Fatalf("open a trail with a 3 MiB damaged line: %v", err)
	}
	defer a.Close()
	if es, _ := a.Before(0, 10, nil); seqs(es) != "2:m2 1:m1 " {
		t.Fatalf("trail = %q", seqs(es))
	}
}
