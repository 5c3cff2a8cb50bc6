package store

import (
	"errors"
	"math"
	"testing"
	"time"
)

// One dimension's values agree with the window's points over wraps and
// gaps, append to the caller's buffer, and are counted as one read.
func TestTier0ValuesMatchWindow(t *testing.T) {
	db := newTestDB(t, Config{Tier0Retention: 100 * time.Second})
	db.Register(testChart("v", "a", "b", "c"))
	for ts := int64(1000); ts <= 1150; ts++ {
		if ts%7 == 0 {
			continue // a gap
		}
		mustAppend(t, db, "v", ts, float64(ts), -float64(ts), float64(ts%5))
	}
	w, err := db.Query("v", 0, 1060, 1140)
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]float32, 0, 8)
	for d := range 3 {
		q0, p0 := db.Reads()
		var start int64
		var ndims int
		buf, start, ndims, err = db.Tier0ValuesFor(ReadML, "v", d, 1060, 1140, buf[:0])
		if err != nil || ndims != 3 || start != w.Start || len(buf) != len(w.Slots[d]) {
			t.Fatalf("dim %d: %d values from %d, %d dims, %v; the window has %d from %d", d, len(buf), start, ndims, err, len(w.Slots[d]), w.Start)
		}
		for i, g := range w.Slots[d] {
			v := buf[i]
			if (g.Count == 0) != math.IsNaN(float64(v)) || (g.Count == 1 && float64(v) != g.Sum) {
				t.Fatalf("dim %d second %d: %v, window %+v", d, w.Start+int64(i), v, g)
			}
		}
		q1, p1 := db.Reads()
		if q1[ReadML]-q0[ReadML] != 1 || p1[ReadML]-p0[ReadML] != uint64(len(buf)) {
			t.Fatalf("counted %d queries and %d points for %d values", q1[ReadML]-q0[ReadML], p1[ReadML]-p0[ReadML], len(buf))
		}
	}
	if n := testing.AllocsPerRun(10, func() { buf, _, _, _ = db.Tier0ValuesFor(ReadML, "v", 1, 0, 2000, buf[:0]) }); n != 0 {
		t.Fatalf("%v allocations per read into a buffer large enough", n)
	}
	if _, _, _, err := db.Tier0ValuesFor(ReadML, "v", 3, 0, 2000, nil); !errors.Is(err, ErrNotFound) {
		t.Fatalf("a dimension past the chart's: %v", err)
	}
	if _, _, _, err := db.Tier0ValuesFor(ReadML, "nope", 0, 0, 2000, nil); !errors.Is(err, ErrNotFound) {
		t.Fatalf("an unknown chart: %v", err)
	}
	if _, _, _, err := db.Tier0ValuesFor(ReadML, "v", 0, 10, 5, nil); !errors.Is(err, ErrBadRange) {
		t.Fatalf("after later than before: %v", err)
	}
	if got, _, _, err := db.Tier0ValuesFor(ReadML, "v", 0, 0, 10, buf[:0]); err != nil || len(got) != 0 {
		t.Fatalf("a range the chart holds nothing of: %d values, %v", len(got), err)
	}
}
