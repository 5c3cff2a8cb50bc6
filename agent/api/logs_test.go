package api

import (
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"peerdns/agent/logs"
	"peerdns/agent/logs/journaltest"
)

type logsBody struct {
	Source     string
	Count      int
	Entries    []logEntry
	NextCursor *string `json:"next_cursor"`
	More       bool
	Truncated  bool
}

func (e *testEnv) logs(t *testing.T, q string) logsBody {
	t.Helper()
	r := e.get(t, "/api/v3/logs?"+q)
	if r.status != 200 {
		t.Fatalf("logs?%s = %d %s", q, r.status, r.body)
	}
	var b logsBody
	if err := json.Unmarshal(r.body, &b); err != nil {
		t.Fatalf("logs?%s: %v\n%s", q, err, r.body)
	}
	return b
}

// pageAll follows next_cursor from the first page of q and returns every
// message.
func (e *testEnv) pageAll(t *testing.T, q string) []string {
	t.Helper()
	var msgs []string
	next := ""
	for pages := 0; ; pages++ {
		qq := q
		if next != "" {
			qq += "&cursor=" + url.QueryEscape(next)
		}
		b := e.logs(t, qq)
		if b.Count != len(b.Entries) {
			t.Fatalf("count %d for %d entries", b.Count, len(b.Entries))
		}
		for _, en := range b.Entries {
			msgs = append(msgs, en.Message)
		}
		if b.NextCursor == nil {
			return msgs
		}
		if pages > 500 {
			t.Fatal("paging does not end")
		}
		next = *b.NextCursor
	}
}

// TestLogsAudit pages the persisted audit trail over HTTP while entries
// keep arriving: every entry that existed when paging began is seen once,
// newest first. An export write is audited.
func TestLogsAudit(t *testing.T) {
	a, err := logs.OpenAudit(filepath.Join(t.TempDir(), "audit.log"), 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close() })
	for i := 0; i < 300; i++ {
		if err := a.Record(logs.Entry{Priority: logs.PriNotice, Unit: "settings", Message: fmt.Sprintf("setting %03d changed", i)}); err != nil {
			t.Fatal(err)
		}
	}
	env := newTestEnv(t, func(o *Options) { o.Audit = a })
	var stop atomic.Bool
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; !stop.Load(); i++ {
			_ = a.Record(logs.Entry{Priority: logs.PriNotice, Unit: "prune", Message: fmt.Sprintf("pruned %d", i)})
		}
	}()
	msgs := env.pageAll(t, "source=audit&limit=40&q=SETTING")
	stop.Store(true)
	wg.Wait()
	if len(msgs) != 300 {
		t.Fatalf("paged %d audit entries, want 300", len(msgs))
	}
	for i, m := range msgs {
		if want := fmt.Sprintf("setting %03d changed", 299-i); m != want {
			t.Fatalf("entry %d = %q, want %q", i, m, want)
		}
	}
	// unit and priority filters; the severity is named.
	for i := 0; i < 2; i++ {
		_ = a.Record(logs.Entry{Priority: logs.PriNotice, Unit: "prune", Message: "pruned after paging"})
	}
	b := env.logs(t, "source=audit&unit=prune&limit=1")
	if len(b.Entries) != 1 || b.Entries[0].Unit != "prune" || !b.More || b.NextCursor == nil {
		t.Errorf("unit filter: %+v", b)
	}
	if b := env.logs(t, "source=audit&priority=err"); len(b.Entries) != 0 {
		t.Errorf("priority=err shows notice entries: %+v", b.Entries[0])
	}
	if r := env.get(t, "/api/v3/export?write=1"); r.status != 200 {
		t.Fatalf("export write: %d %s", r.status, r.body)
	}
	b = env.logs(t, "source=audit&unit=export")
	if len(b.Entries) != 1 || !strings.HasPrefix(b.Entries[0].Message, "export written: ") || b.Entries[0].Severity != "notice" || b.Entries[0].Fields["file"] == "" {
		t.Errorf("export write not audited: %+v", b)
	}
	if ts, err := time.Parse(time.RFC3339Nano, b.Entries[0].Timestamp); err != nil || ts.UnixMilli() != b.Entries[0].TimeMS {
		t.Errorf("timestamp %q / %d: %v", b.Entries[0].Timestamp, b.Entries[0].TimeMS, err)
	}
}

// TestLogsAnomaly reads anomaly events from a source (a ring, as the
// detector publishes them) with since/until and paging; without a
// detector the answer says so.
func TestLogsAnomaly(t *testing.T) {
	ring := logs.NewRing(1000)
	base := time.Now().Add(-time.Hour).Truncate(time.Second)
	for i := 0; i < 120; i++ {
		ring.Add(logs.Entry{Time: base.Add(time.Duration(i) * 30 * time.Second), Priority: logs.PriWarning, Unit: "system.cpu",
			Message: fmt.Sprintf("anomalous: system.cpu dimension user (event %d)", i)})
	}
	env := newTestEnv(t, func(o *Options) { o.Anomaly = ring })
	// The detector keeps reporting while a client pages (the ring holds
	// 1000: the 120 are not pushed out during the test).
	var stop atomic.Bool
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; !stop.Load() && i < 800; i++ {
			ring.Add(logs.Entry{Priority: logs.PriWarning, Unit: "system.ram", Message: fmt.Sprintf("live %d", i)})
		}
	}()
	all := env.pageAll(t, "source=anomaly&limit=7&q=event")
	stop.Store(true)
	wg.Wait()
	if len(all) != 120 || all[0] != "anomalous: system.cpu dimension user (event 119)" || all[119] != "anomalous: system.cpu dimension user (event 0)" {
		t.Fatalf("%d anomaly events, first %q", len(all), all[0])
	}
	// The last 30 minutes hold events 60..119 (every 30 s from base).
	since := base.Add(30 * time.Minute).Unix()
	got := env.pageAll(t, fmt.Sprintf("source=anomaly&limit=2000&since=%d&until=%d", since, base.Add(time.Hour).Unix()))
	if len(got) != 60 {
		t.Errorf("since/until: %d events, want 60", len(got))
	}
	if got := env.pageAll(t, "source=anomaly&since=-1d&q=event%2011"); len(got) != 11 { // 11, 110..119
		t.Errorf("q: %d events: %v", len(got), got)
	}
	none := newTestEnv(t)
	if r := none.get(t, "/api/v1/logs?source=anomaly"); r.status != 503 || !strings.Contains(string(r.body), "no anomaly detector running") {
		t.Errorf("without a detector: %d %s", r.status, r.body)
	}
}

// TestLogsJournal reads a real journal (written for the test) over HTTP;
// turned off or missing, the answer says which.
func TestLogsJournal(t *testing.T) {
	off := newTestEnv(t, func(o *Options) { o.Journal = false })
	if r := off.get(t, "/api/v1/logs"); r.status != 503 || !strings.Contains(string(r.body), "AGENT_JOURNAL=0") {
		t.Errorf("journal off: %d %s", r.status, r.body)
	}
	empty := newTestEnv(t, func(o *Options) { o.JournalDir = t.TempDir() })
	if r := empty.get(t, "/api/v1/logs?source=journal"); r.status != 503 || !strings.Contains(string(r.body), "no journal files") {
		t.Errorf("no journal: %d %s", r.status, r.body)
	}
	var es []journaltest.Entry
	t0 := time.Now().Add(-time.Hour).Truncate(time.Second)
	for i := 0; i < 30; i++ {
		es = append(es, journaltest.Entry{Time: t0.Add(time.Duration(i) * time.Second), Priority: []int{3, 6}[i%2],
			Unit: "sshd.service", Message: fmt.Sprintf("line %d", i)})
	}
	dir := journaltest.Write(t, es)
	env := newTestEnv(t, func(o *Options) { o.JournalDir = dir })
	msgs := env.pageAll(t, "limit=4")
	if len(msgs) != 30 || msgs[0] != "line 29" || msgs[29] != "line 0" {
		t.Fatalf("journal pages: %v", msgs)
	}
	if errs := env.pageAll(t, "priority=err&unit=sshd&limit=5&since=-2h"); len(errs) != 15 {
		t.Errorf("priority=err: %d entries, want 15", len(errs))
	}
}

func TestLogsBadInput(t *testing.T) {
	env := newTestEnv(t)
	other := logs.Cursor{Source: "anomaly", Seq: 4}.Encode()
	for _, q := range []string{
		"source=audit&cursor=not-a-cursor!", "source=audit&cursor=" + other, "source=audit&limit=-1", "source=audit&limit=2001",
		"source=audit&q=" + strings.Repeat("x", 10<<10), "source=audit&since=-1h&until=-2h", "source=audit&since=last%20tuesday",
		"source=syslog", "source=audit&priority=11",
	} {
		r := env.get(t, "/api/v2/logs?"+q)
		if r.status != 400 || len(r.body) > 300 || r.header.Get("Content-Type") != "text/plain; charset=utf-8" {
			t.Errorf("%.60s = %d %q %.200s, want a short plain-text 400", q, r.status, r.header.Get("Content-Type"), r.body)
		}
	}
}

// A negative number of seconds too large for a duration must not wrap
// around into the future: since=-10000000000 (317 years back) either
// answers everything or is refused naming since, never an empty page.
func TestLogsHugeRelativeSince(t *testing.T) {
	env := newTestEnv(t)
	if err := env.srv.o.Audit.Record(logs.Entry{Priority: logs.PriNotice, Unit: "review", Message: "kept"}); err != nil {
		t.Fatal(err)
	}
	r := env.get(t, "/api/v3/logs?source=audit&since=-10000000000")
	switch r.status {
	case 400:
		if !strings.Contains(string(r.body), "since") {
			t.Fatalf("400 does not name since: %s", r.body)
		}
	case 200:
		var b logsBody
		if err := json.Unmarshal(r.body, &b); err != nil {
			t.Fatal(err)
		}
		if b.Count == 0 {
			t.Fatalf("since=-10000000000 answered no entries: the time wrapped around: %s", r.body)
		}
	default:
		t.Fatalf("status %d: %s", r.status, r.body)
	}
}

// A unit name with a NUL byte cannot be passed to journalctl: it is bad
// input (400 naming unit), not an internal error.
func TestJournalUnitNUL(t *testing.T) {
	dir := t.TempDir()
	// A journal directory as available() sees one; journalctl is not run
	// for this request.
	if err := os.WriteFile(filepath.Join(dir, "system.journal"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	env := newTestEnv(t, func(o *Options) { o.JournalDir = dir })
	r := env.get(t, "/api/v3/logs?source=journal&unit=ssh%00d")
	if r.status == 503 && strings.Contains(string(r.body), "journalctl is not installed") {
		t.Skip("no journalctl on this machine")
	}
	if r.status != 400 || !strings.Contains(string(r.body), "unit") {
		t.Fatalf("unit with a NUL byte = %d %s, want 400 naming unit", r.status, r.body)
	}
}
