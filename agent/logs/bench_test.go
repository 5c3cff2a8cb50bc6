package logs

import (
	"fmt"
	"testing"
	"time"

	"peerdns/agent/logs/journaltest"
)

// BenchmarkRingPage reads one 200-entry page with a q filter from a full
// 10,000-entry ring (the audit trail's size), from the middle of it.
func BenchmarkRingPage(b *testing.B) {
	r := NewRing(DefaultAuditCapacity)
	for i := 0; i < DefaultAuditCapacity; i++ {
		r.Add(Entry{Priority: PriNotice, Unit: "settings", Message: fmt.Sprintf("setting %d changed", i)})
	}
	q, err := ParseQuery(getter("source=audit&q=changed"), time.Now())
	if err != nil {
		b.Fatal(err)
	}
	q.Cursor = Cursor{Source: SourceAudit, Seq: DefaultAuditCapacity / 2}
	b.ReportAllocs()
	for b.Loop() {
		if p := readSeq(r, q); len(p.Entries) != DefaultLimit {
			b.Fatalf("%d entries", len(p.Entries))
		}
	}
}

// BenchmarkJournalPage is one 200-entry journal page through journalctl
// (a process start and JSON parsing) over a 5,000-entry journal.
func BenchmarkJournalPage(b *testing.B) {
	var es []journaltest.Entry
	t0 := time.Now().Add(-2 * time.Hour)
	for i := 0; i < 5000; i++ {
		es = append(es, journaltest.Entry{Time: t0.Add(time.Duration(i) * time.Second), Priority: i % 8, Unit: "bench.service", Message: fmt.Sprintf("line %d", i)})
	}
	j := &Journal{Dir: journaltest.Write(b, es)}
	q, _ := ParseQuery(getter(""), time.Now())
	b.ReportAllocs()
	for b.Loop() {
		p, err := j.Read(b.Context(), q)
		if err != nil || len(p.Entries) != DefaultLimit {
			b.Fatal(len(p.Entries), err)
		}
	}
}
