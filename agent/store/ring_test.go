package store

import (
	"math"
	"math/rand"
	"testing"
	"time"
)

// TestRingAgainstArray writes runs of equal values, gaps and noise into a
// ring and checks every slot of the last retention seconds against a
// plain array.
func TestRingAgainstArray(t *testing.T) {
	for seed := int64(1); seed <= 20; seed++ {
		rnd := rand.New(rand.NewSource(seed))
		retention := 10 + rnd.Intn(300)
		r := newRing(3, retention)
		model := make([][]float32, 3)
		for d := range model {
			model[d] = make([]float32, r.size)
		}
		v := [3]float32{}
		for ts := int64(1); ts < 5000; ts++ {
			for d := 0; d < 3; d++ {
				switch x := rnd.Intn(100); {
				case x < 5:
					v[d] = float32(rnd.Intn(10)) // a new level, kept for a while
				case x < 8:
					v[d] = float32(math.NaN())
				case x < 10 && d == 2:
					v[d] = rnd.Float32() // noise on one dimension
				}
				i := r.slot(ts)
				r.set(d, i, v[d])
				model[d][i] = v[d]
			}
			for back := int64(0); back < int64(retention) && back < ts; back++ {
				i := r.slot(ts - back)
				for d := 0; d < 3; d++ {
					if got, want := r.get(d, i), model[d][i]; !same(got, want) {
						t.Fatalf("seed %d t %d back %d dim %d: %v, want %v", seed, ts, back, d, got, want)
					}
				}
			}
		}
	}
}

// TestIdleDimensionsCheap: an hour of one busy and 99 idle dimensions
// holds dense blocks only for the busy one.
func TestIdleDimensionsCheap(t *testing.T) {
	db := newTestDB(t, Config{Tier0Retention: time.Hour})
	dims := make([]string, 100)
	for i := range dims {
		dims[i] = string(rune('a'+i%26)) + string(rune('a'+i/26))
	}
	db.Register(testChart("c", dims...))
	vals := make([]float64, 100)
	for ts := int64(1_000_000); ts < 1_000_000+3600; ts++ {
		vals[0] = float64(ts % 7)
		mustAppend(t, db, "c", ts, vals...)
	}
	s := db.lookup("c")
	s.mu.Lock()
	dense, b := s.t0.dense, s.t0.bytes()
	s.mu.Unlock()
	if dense > s.t0.nb {
		t.Errorf("%d dense blocks, want at most %d (the busy dimension's)", dense, s.t0.nb)
	}
	flat := int64(100 * 3600 * 4)
	if b > flat/10 {
		t.Errorf("tier 0 holds %d bytes for 1 busy and 99 idle dimensions, want under a tenth of %d", b, flat)
	}
	t.Logf("tier 0: %d bytes (a flat float32 ring: %d)", b, flat)
}
