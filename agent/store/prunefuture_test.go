package store

import "testing"

// TestPruneBeyondNewestKeepsLaterPoints: a prune whose before lies past
// the newest point drops every point held, and only those: points
// appended after it are read from tier 0 as from tier 1, not hidden
// until the clock reaches before.
func TestPruneBeyondNewestKeepsLaterPoints(t *testing.T) {
	db, err := Open(Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if err := db.Register(&ChartDef{ID: "c", Dims: []DimDef{{ID: "a"}}}); err != nil {
		t.Fatal(err)
	}
	for ts := int64(6000); ts < 6100; ts++ {
		if err := db.Append("c", ts, []float64{1}); err != nil {
			t.Fatal(err)
		}
	}
	// A before in milliseconds by mistake: far past every point.
	if _, err := db.Prune("c", 6100*1000); err != nil {
		t.Fatal(err)
	}
	w, err := db.Query("c", 0, 0, 1<<40)
	if err != nil {
		t.Fatal(err)
	}
	for k, s := range w.Slots[0] {
		if s.Count > 0 {
			t.Fatalf("tier 0 holds %d after the prune", w.Start+int64(k))
		}
	}
	for ts := int64(6100); ts < 6110; ts++ {
		if err := db.Append("c", ts, []float64{2}); err != nil {
			t.Fatal(err)
		}
	}
	w, err = db.Query("c", 0, 6100, 6109)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, s := range w.Slots[0] {
		if s.Count > 0 && s.Sum == 2 {
			n++
		}
	}
	if n != 10 {
		t.Errorf("tier 0 reads %d of the 10 points appended after the prune (window start %d, %d slots)", n, w.Start, len(w.Slots[0]))
	}
	if first, last, ok := db.Held("c"); !ok || first != 6100 || last != 6109 {
		t.Errorf("Held = %d, %d, %v, want 6100, 6109, true", first, last, ok)
	}
}
