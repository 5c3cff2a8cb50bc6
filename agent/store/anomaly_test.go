package store

import (
	"errors"
	"math"
	"testing"
	"time"
)

func TestMarkAnomalous(t *testing.T) {
	dir := t.TempDir()
	db, err := Open(Config{Dir: dir, Tier0Retention: 2 * time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Register(testChart("c", "a", "b")); err != nil {
		t.Fatal(err)
	}
	base := int64(1_800_000_000) // a whole minute
	for s := int64(0); s < 60; s++ {
		mustAppend(t, db, "c", base+s, float64(s), math.NaN())
		flags := []bool{s%10 == 0, true}
		n, err := db.MarkAnomalous("c", base+s, flags)
		if err != nil {
			t.Fatalf("MarkAnomalous(%d): %v", s, err)
		}
		want := 0
		if s%10 == 0 {
			want = 1 // b is NaN: never marked
		}
		if n != want {
			t.Fatalf("MarkAnomalous(%d) set %d, want %d", s, n, want)
		}
		// Idempotent: the same marks again set nothing and count nothing.
		if n, _ := db.MarkAnomalous("c", base+s, flags); n != 0 {
			t.Fatalf("second MarkAnomalous(%d) set %d, want 0", s, n)
		}
	}
	w, err := db.Query("c", 0, base, base+59)
	if err != nil {
		t.Fatal(err)
	}
	for s, g := range w.Slots[0] {
		want := uint32(0)
		if s%10 == 0 {
			want = 1
		}
		if g.Anomalous != want {
			t.Errorf("tier 0 slot %d Anomalous = %d, want %d", s, g.Anomalous, want)
		}
	}
	// The next point closes the minute: 6 anomalous points out of 60.
	mustAppend(t, db, "c", base+60, 1, 1)
	check := func(db *DB, what string) {
		t.Helper()
		w1, err := db.Query("c", 1, base, base+59)
		if err != nil {
			t.Fatal(err)
		}
		if g := w1.Slots[0][0]; g.Count != 60 || g.Anomalous != 6 {
			t.Errorf("%s: tier-1 minute = count %d anomalous %d, want 60 and 6", what, g.Count, g.Anomalous)
		}
		if g := w1.Slots[1][0]; g.Count != 0 || g.Anomalous != 0 {
			t.Errorf("%s: tier-1 minute of the NaN dimension = %+v, want empty", what, g)
		}
	}
	check(db, "in memory")
	// A late mark for the closed minute sets the tier-0 bit only.
	if n, err := db.MarkAnomalous("c", base+1, []bool{true, false}); err != nil || n != 1 {
		t.Fatalf("late mark = %d, %v; want 1, nil", n, err)
	}
	check(db, "after a late mark")
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	db2, err := Open(Config{Dir: dir, Tier0Retention: 2 * time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	defer db2.Close()
	check(db2, "after a restart")

	// Errors: unknown chart, wrong length, a time not held.
	if _, err := db2.MarkAnomalous("nope", base, []bool{true}); !errors.Is(err, ErrNotFound) {
		t.Errorf("unknown chart: %v", err)
	}
	if err := db2.Register(testChart("c", "a", "b")); err != nil {
		t.Fatal(err)
	}
	if _, err := db2.MarkAnomalous("c", base, []bool{true}); err == nil {
		t.Error("one flag for two dimensions: no error")
	}
	if _, err := db2.MarkAnomalous("c", base, []bool{true, true}); !errors.Is(err, ErrNotHeld) {
		t.Errorf("empty tier 0: %v, want ErrNotHeld", err)
	}
}

func TestAnomalyBitClearedOnReuse(t *testing.T) {
	db := newTestDB(t, Config{Tier0Retention: 10 * time.Second})
	if err := db.Register(testChart("c", "a")); err != nil {
		t.Fatal(err)
	}
	base := int64(1_800_000_000)
	for s := int64(0); s < 10; s++ {
		mustAppend(t, db, "c", base+s, 1)
		if _, err := db.MarkAnomalous("c", base+s, []bool{true}); err != nil {
			t.Fatal(err)
		}
	}
	// The ring wraps: the reused slots (and a gap) must not inherit bits.
	mustAppend(t, db, "c", base+12, 2)
	if _, err := db.MarkAnomalous("c", base+1, []bool{true}); !errors.Is(err, ErrNotHeld) {
		t.Errorf("mark of an overwritten second: %v, want ErrNotHeld", err)
	}
	w, err := db.Query("c", 0, base+3, base+12)
	if err != nil {
		t.Fatal(err)
	}
	for k, g := range w.Slots[0] {
		ts := w.Start + int64(k)
		want := uint32(0)
		if ts < base+10 {
			want = 1
		}
		if g.Anomalous != want {
			t.Errorf("second %d: Anomalous = %d, want %d", ts-base, g.Anomalous, want)
		}
	}
	if got := db.Stats().Tier0BytesPerDim; got != 2*(64*4+12)+16 {
		t.Errorf("Tier0BytesPerDim = %d, want 552 (two dense blocks and their anomaly bits)", got)
	}
}
