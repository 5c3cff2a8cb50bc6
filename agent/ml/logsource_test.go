package ml

import (
	"strings"
	"testing"

	"peerdns/agent/logs"
)

// The detector's events page newest first through the log source, each
// page starting below the last sequence shown, and keep filters.
func TestLogSourcePages(t *testing.T) {
	d := New(newTestDB(t), Config{})
	for i := 1; i <= 25; i++ {
		chart := "system.cpu"
		if i%5 == 0 {
			chart = "system.ram"
		}
		d.record(Event{Time: int64(1000 + i), Chart: chart, Name: "user", Dimension: "user", Value: float64(i), Score: 2})
	}
	src := d.LogSource()
	page, more := src.Before(0, 10, nil)
	if len(page) != 10 || !more || page[0].Seq != 25 || page[9].Seq != 16 {
		t.Fatalf("first page: %d entries (more %v) from %d", len(page), more, page[0].Seq)
	}
	if page[0].Priority != logs.PriWarning || page[0].Unit != "system.ram" || !strings.Contains(page[0].Message, "system.ram.user is anomalous") {
		t.Fatalf("entry %+v", page[0])
	}
	next, more := src.Before(page[9].Seq, 10, nil)
	if len(next) != 10 || !more || next[0].Seq != 15 {
		t.Fatalf("second page: %d entries from %d", len(next), next[0].Seq)
	}
	ram, more := src.Before(0, 100, func(e *logs.Entry) bool { return e.Unit == "system.ram" })
	if len(ram) != 5 || more {
		t.Fatalf("filtered: %d entries (more %v), want 5", len(ram), more)
	}
}
