package stats

import (
	"encoding/json"
	"path/filepath"
	"testing"
	"time"

	"peerdns/internal/store"
)

// Samples are kept a minute apart, read back oldest first within the
// asked window, and dropped after a day.
func TestHistoryKeepsADay(t *testing.T) {
	db, err := store.Open(filepath.Join(t.TempDir(), "node.db"), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	now := time.Unix(1_800_000_000, 0)
	for _, ago := range []time.Duration{25 * time.Hour, 90 * time.Minute, 30 * time.Minute, time.Minute} {
		b, _ := json.Marshal(map[string]any{"ago": ago.String()})
		keep(db, now.Add(-ago), b)
	}
	keep(db, now, []byte(`{"ago":"0s"}`))
	got := History(db, now, 60)
	if len(got) != 3 {
		t.Fatalf("last hour: %d samples, want 3 (30m, 1m, now): %s", len(got), got)
	}
	var first struct {
		Timestamp int64
		Data      map[string]string
	}
	if err := json.Unmarshal(got[0], &first); err != nil || first.Data["ago"] != "30m0s" || first.Timestamp != now.Add(-30*time.Minute).UnixMilli() {
		t.Fatalf("oldest of the hour: %s (%v)", got[0], err)
	}
	if all := History(db, now, 26*60); len(all) != 4 {
		t.Fatalf("a day and more: %d samples, want 4 (the 25 h one dropped)", len(all))
	}
}

// A window of minutes holds that many samples, one a minute, none older
// than the window.
func TestHistoryWindowHoldsMinutesSamples(t *testing.T) {
	db, err := store.Open(filepath.Join(t.TempDir(), "node.db"), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	now := time.Unix(1_800_000_030, 0) // 30 s into a minute
	for ago := 120; ago >= 0; ago-- {
		keep(db, now.Add(-time.Duration(ago)*time.Minute), []byte(`{}`))
	}
	for _, minutes := range []int{1, 60, 24 * 60} {
		got := History(db, now, minutes)
		want := min(minutes, 121)
		if len(got) != want {
			t.Fatalf("%d minutes: %d samples, want %d", minutes, len(got), want)
		}
		var first struct{ Timestamp int64 }
		if err := json.Unmarshal(got[0], &first); err != nil || now.Sub(time.UnixMilli(first.Timestamp)) > time.Duration(minutes)*time.Minute {
			t.Fatalf("%d minutes: oldest sample %s (%v) is older than the window", minutes, got[0], err)
		}
	}
}

// After the clock is set back, the samples kept at the later time are
// not in the window: it holds at most minutes samples, none after now.
func TestHistoryAfterClockSetBack(t *testing.T) {
	db, err := store.Open(filepath.Join(t.TempDir(), "node.db"), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	now := time.Unix(1_800_000_030, 0)
	for ago := 10; ago >= -10; ago-- { // ten minutes kept before the clock went back ten minutes
		keep(db, now.Add(-time.Duration(ago)*time.Minute), []byte(`{}`))
	}
	got := History(db, now, 5)
	if len(got) != 5 {
		t.Fatalf("5 minutes: %d samples, want 5", len(got))
	}
	for _, s := range got {
		var v struct{ Timestamp int64 }
		if err := json.Unmarshal(s, &v); err != nil || time.UnixMilli(v.Timestamp).After(now) {
			t.Fatalf("sample %s (%v) is after now", s, err)
		}
	}
}
