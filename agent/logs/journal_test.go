package logs

import (
	"bufio"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"peerdns/agent/logs/journaltest"
)

var t0 = time.Date(2026, 11, 25, 10, 0, 0, 0, time.UTC)

// testJournal writes 50 entries a second apart: priority i%8, unit
// a.service or b.service, message "entry <i>" (every tenth says "disk
// full").
func testJournal(t *testing.T) *Journal {
	var es []journaltest.Entry
	for i := 0; i < 50; i++ {
		msg := fmt.Sprintf("entry %d", i)
		if i%10 == 0 {
			msg += " disk FULL"
		}
		es = append(es, journaltest.Entry{Time: t0.Add(time.Duration(i) * time.Second), Priority: i % 8,
			Unit: []string{"a.service", "b.service"}[i%2], Message: msg})
	}
	return &Journal{Dir: journaltest.Write(t, es)}
}

func readAll(t *testing.T, j *Journal, q string) []string {
	t.Helper()
	r := &Reader{Journal: j}
	query, err := ParseQuery(getter(q), t0.Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	var msgs []string
	for pages := 0; ; pages++ {
		p, err := r.Read(t.Context(), query)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range p.Entries {
			msgs = append(msgs, e.Message)
		}
		if p.Next.IsZero() {
			return msgs
		}
		if pages > 100 {
			t.Fatal("paging does not end")
		}
		query.Cursor = p.Next
	}
}

func TestJournal(t *testing.T) {
	j := testJournal(t)
	for _, tt := range []struct {
		q     string
		first string
		n     int
	}{
		{"limit=7", "entry 49", 50}, // paged by cursor, newest first
		{"limit=3&q=disk full", "entry 40 disk FULL", 5},
		{"unit=a&limit=10", "entry 48", 25}, // journalctl's unit matching: a = a.service
		{"priority=1", "entry 49", 14},      // 0 and 1
		{"priority=err&since=2026-11-25T10:00:30Z", "entry 49", 10},
		{"since=2026-11-25T10:00:10Z&until=2026-11-25T10:00:19Z", "entry 19", 10},
		{"q=WARNING&limit=4", "entry 44", 6},                   // severity matches q
		{"since=2026-11-25T10:00:40Z&limit=3", "entry 49", 10}, // since with a cursor (journalctl takes only one)
	} {
		t.Run(tt.q, func(t *testing.T) {
			msgs := readAll(t, j, tt.q)
			if len(msgs) != tt.n || msgs[0] != tt.first {
				t.Fatalf("%d entries from %q, want %d from %q: %v", len(msgs), msgs[0:min(len(msgs), 3)], tt.n, tt.first, msgs)
			}
			seen := map[string]bool{}
			for _, m := range msgs {
				if seen[m] {
					t.Fatalf("%q shown twice across pages", m)
				}
				seen[m] = true
			}
		})
	}
	// A q search reads at most MaxScan entries per page and says so.
	j.MaxScan = 5
	q, _ := ParseQuery(getter("q=disk"), t0)
	p, err := (&Reader{Journal: j}).Read(t.Context(), q)
	if err != nil || !p.Truncated || p.Next.IsZero() || len(p.Entries) != 0 {
		t.Fatalf("scan-limited page over entries 49..45 = %+v, %v", p, err)
	}
	// Its cursor continues the search: 44..40 holds "entry 40 disk FULL".
	q.Cursor = p.Next
	p, err = (&Reader{Journal: j}).Read(t.Context(), q)
	if err != nil || len(p.Entries) != 1 || p.Entries[0].Message != "entry 40 disk FULL" {
		t.Fatalf("continued search = %+v, %v", p, err)
	}
}

func TestJournalEntryFields(t *testing.T) {
	j := testJournal(t)
	q, _ := ParseQuery(getter("limit=1"), t0)
	p, err := (&Reader{Journal: j}).Read(t.Context(), q)
	if err != nil || len(p.Entries) != 1 {
		t.Fatal(p, err)
	}
	e := p.Entries[0]
	if !e.Time.Equal(t0.Add(49*time.Second)) || e.Priority != 1 || e.Unit != "b.service" || e.Fields["SYSLOG_IDENTIFIER"] != "journaltest" || !strings.HasPrefix(e.Cursor, "s=") {
		t.Errorf("entry = %+v", e)
	}
}

func TestNoJournal(t *testing.T) {
	j := &Journal{Dir: t.TempDir()}
	q, _ := ParseQuery(getter(""), t0)
	if _, err := j.Read(t.Context(), q); err == nil || !strings.Contains(err.Error(), "no journal files") {
		t.Errorf("empty dir: %v", err)
	}
	j = &Journal{Bin: "", Dir: t.TempDir()}
	t.Setenv("PATH", t.TempDir())
	if _, err := j.Read(t.Context(), q); err == nil || !strings.Contains(err.Error(), "journalctl is not installed") {
		t.Errorf("no journalctl: %v", err)
	}
}

// TestSystemJournal reads this machine's own journal where it has one.
func TestSystemJournal(t *testing.T) {
	j := &Journal{}
	if _, err := j.available(); err != nil {
		t.Skipf("this machine has no readable journal: %v", err)
	}
	q, _ := ParseQuery(getter("limit=5"), time.Now())
	p, err := j.Read(t.Context(), q)
	if err != nil {
		t.Fatal(err)
	}
	for i, e := range p.Entries {
		if e.Cursor == "" || e.Time.IsZero() || (i > 0 && e.Time.After(p.Entries[i-1].Time)) {
			t.Errorf("entry %d = %+v (newest first, with cursor and time)", i, e)
		}
	}
}

func TestParseJournalLine(t *testing.T) {
	e, err := parseJournalLine([]byte(`{"__CURSOR":"s=1;i=2","__REALTIME_TIMESTAMP":"1700000000123456","PRIORITY":"3","MESSAGE":[104,105,255],"SYSLOG_IDENTIFIER":"kernel"}`))
	if err != nil || e.Message != "hi\uFFFD" || e.Priority != 3 || e.Unit != "kernel" || !e.Time.Equal(time.UnixMicro(1700000000123456)) {
		t.Errorf("binary message entry = %+v, %v", e, err)
	}
	for _, bad := range []string{`{}`, `{"__CURSOR":"x"}`, `{"__CURSOR":"x","__REALTIME_TIMESTAMP":"soon"}`, `[`, ``} {
		if _, err := parseJournalLine([]byte(bad)); err == nil {
			t.Errorf("parseJournalLine(%q) accepted", bad)
		}
	}
}

func FuzzParseJournalLine(f *testing.F) {
	for _, s := range []string{`{"__CURSOR":"s=1","__REALTIME_TIMESTAMP":"1","MESSAGE":"m","PRIORITY":"9"}`, `{"MESSAGE":null}`, `{"MESSAGE":[1,2,300]}`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		e, err := parseJournalLine([]byte(s))
		if err == nil && (e.Cursor == "" || e.Priority < 0 || e.Priority > 7) {
			t.Fatalf("%q: %+v", s, e)
		}
	})
}

// TestJournalLongMessage: a message over 4096 bytes (a stack trace) is
// shown whole; journalctl -o json prints such a field as null unless
// asked for all of it.
func TestJournalLongMessage(t *testing.T) {
	long := "panic: " + strings.Repeat("goroutine 1 [running] ", 400)
	dir := journaltest.Write(t, []journaltest.Entry{
		{Time: t0, Priority: 3, Unit: "a.service", Message: long},
		{Time: t0.Add(time.Second), Priority: 6, Unit: "a.service", Message: "short"},
	})
	q, _ := ParseQuery(getter("limit=5"), t0.Add(time.Hour))
	p, err := (&Reader{Journal: &Journal{Dir: dir}}).Read(t.Context(), q)
	if err != nil || len(p.Entries) != 2 {
		t.Fatalf("page = %+v, %v", p, err)
	}
	if got := p.Entries[1].Message; got != long {
		t.Errorf("long message = %d bytes %.40q, want %d bytes", len(got), got, len(long))
	}
}

// TestParseJournalLineBounds: with --all a field comes whole, so the
// message is kept up to maxJournalMessage and the others up to
// maxJournalField, cut at a UTF-8 boundary and marked.
func TestParseJournalLineBounds(t *testing.T) {
	msg := strings.Repeat("é", maxJournalMessage)
	ident := strings.Repeat("i", 2*maxJournalField)
	line := fmt.Sprintf(`{"__CURSOR":"s=1","__REALTIME_TIMESTAMP":"1","MESSAGE":%q,"SYSLOG_IDENTIFIER":%q}`, msg, ident)
	e, err := parseJournalLine([]byte(line))
	if err != nil {
		t.Fatal(err)
	}
	if len(e.Message) > maxJournalMessage || !strings.HasSuffix(e.Message, "é...") {
		t.Errorf("message = %d bytes ending %q", len(e.Message), e.Message[max(0, len(e.Message)-8):])
	}
	if len(e.Unit) != maxJournalField || len(e.Fields["SYSLOG_IDENTIFIER"]) != maxJournalField {
		t.Errorf("unit %d bytes, identifier %d bytes; want %d", len(e.Unit), len(e.Fields["SYSLOG_IDENTIFIER"]), maxJournalField)
	}
}

// TestJournalHugeMessage: an entry whose line is past maxJournalLine (a
// message of megabytes through the native protocol) is left out; the
// page around it is still read.
func TestJournalHugeMessage(t *testing.T) {
	dir := journaltest.Write(t, []journaltest.Entry{
		{Time: t0, Priority: 6, Unit: "a.service", Message: "before"},
		{Time: t0.Add(time.Second), Priority: 3, Unit: "a.service", Message: strings.Repeat("x", maxJournalLine)},
		{Time: t0.Add(2 * time.Second), Priority: 6, Unit: "a.service", Message: "after"},
	})
	q, _ := ParseQuery(getter("limit=5"), t0.Add(time.Hour))
	p, err := (&Reader{Journal: &Journal{Dir: dir}}).Read(t.Context(), q)
	if err != nil || len(p.Entries) != 2 || p.Entries[0].Message != "after" || p.Entries[1].Message != "before" {
		t.Fatalf("page = %d entries, %v", len(p.Entries), err)
	}
}

func TestReadLine(t *testing.T) {
	r := bufio.NewReaderSize(strings.NewReader("ab\n"+strings.Repeat("y", 40)+"\ncd\nlast"), 16)
	var got []string
	var line []byte
	for {
		var long bool
		var err error
		if line, long, err = readLine(r, line, 10); err != nil {
			if err != io.EOF {
				t.Fatal(err)
			}
			break
		}
		got = append(got, fmt.Sprintf("%s/%v", line, long))
	}
	if want := "ab/false,/true,cd/false,last/false"; strings.Join(got, ",") != want {
		t.Errorf("lines = %v, want %s", got, want)
	}
}

// TestJournalTimesOutOfRange: a since before 1970 or an until past what
// journalctl parses (it refuses "@-1" and "@9000000000000000") is a
// window holding every entry, not a journalctl failure.
func TestJournalTimesOutOfRange(t *testing.T) {
	j := testJournal(t)
	for _, q := range []string{"since=1960-01-01T00:00:00Z", "until=9000000000000000000", "since=1960-01-01&until=9000000000000000000&limit=20"} {
		if msgs := readAll(t, j, q); len(msgs) != 50 {
			t.Errorf("%s: %d entries, want 50", q, len(msgs))
		}
	}
}
