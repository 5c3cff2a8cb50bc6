package store

import (
	"math"
	"testing"
	"time"
)

// TestPruneSurvivesReopen: pruned tier-1 minutes are gone from the file
// too, so they do not come back at the next start.
func TestPruneSurvivesReopen(t *testing.T) {
	dir := t.TempDir()
	db, err := Open(Config{Dir: dir, Tier0Retention: 10 * time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Register(&ChartDef{ID: "c", Dims: []DimDef{{ID: "a"}}}); err != nil {
		t.Fatal(err)
	}
	now := time.Now().Unix()
	for ts := now - 3*3600; ts <= now; ts += 10 {
		if err := db.Append("c", ts, []float64{1}); err != nil {
			t.Fatal(err)
		}
	}
	cut := now - 3600
	if n, err := db.Prune("", cut); err != nil || n != 1 {
		t.Fatalf("Prune = %d, %v", n, err)
	}
	check := func(db *DB, when string) {
		w, err := db.Query("c", 1, 0, now)
		if err != nil {
			t.Fatal(err)
		}
		if w.Start < cut-60 {
			t.Errorf("%s: tier 1 starts at %d, want >= %d", when, w.Start, cut-60)
		}
		w, _ = db.Query("c", 0, 0, now)
		for k, s := range w.Slots[0] {
			if s.Count > 0 && w.Start+int64(k) < cut {
				t.Fatalf("%s: tier 0 holds %d, before the cut", when, w.Start+int64(k))
			}
		}
	}
	check(db, "after prune")
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	db, err = Open(Config{Dir: dir, Tier0Retention: 10 * time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	check(db, "after reopen")
}

// TestSetRetentionKeepsNewest: shrinking tier 0 keeps the newest seconds,
// growing keeps what is held.
func TestSetRetentionKeepsNewest(t *testing.T) {
	db, err := Open(Config{Tier0Retention: 100 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if err := db.Register(&ChartDef{ID: "c", Dims: []DimDef{{ID: "a"}, {ID: "b"}}}); err != nil {
		t.Fatal(err)
	}
	for ts := int64(1000); ts < 1100; ts++ {
		if err := db.Append("c", ts, []float64{float64(ts), -float64(ts)}); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.SetRetention(30*time.Second, 0); err != nil {
		t.Fatal(err)
	}
	w, _ := db.Query("c", 0, 0, 2000)
	if w.Start != 1070 || len(w.Slots[1]) != 30 || w.Slots[1][29].Sum != -1099 {
		t.Fatalf("after shrink: start %d, %d slots, last %v", w.Start, len(w.Slots[1]), w.Slots[1][len(w.Slots[1])-1])
	}
	if err := db.SetRetention(200*time.Second, 0); err != nil {
		t.Fatal(err)
	}
	if err := db.Append("c", 1100, []float64{1, 2}); err != nil {
		t.Fatal(err)
	}
	w, _ = db.Query("c", 0, 0, 2000)
	if w.Start != 1070 || len(w.Slots[0]) != 31 || w.Slots[0][0].Sum != 1070 || math.IsNaN(w.Slots[0][30].Sum) {
		t.Fatalf("after grow: start %d, %d slots", w.Start, len(w.Slots[0]))
	}
	if db.Stats().Tier0Retention != 200*time.Second || db.Generation() != 2 {
		t.Errorf("stats retention %v, generation %d", db.Stats().Tier0Retention, db.Generation())
	}
	if err := db.SetRetention(0, time.Second); err == nil {
		t.Error("tier 1 retention of 1s accepted")
	}
}
