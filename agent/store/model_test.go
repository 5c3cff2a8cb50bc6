package store

import (
	"math"
	"math/rand"
	"testing"
	"time"
)

// TestAgainstModel appends random series (gaps, NaNs, jumps longer than
// the ring) to small rings with small sealed chunks, and checks random
// tier-0 and tier-1 windows against a naive model that keeps every point.
func TestAgainstModel(t *testing.T) {
	for seed := int64(1); seed <= 40; seed++ {
		r := rand.New(rand.NewSource(seed))
		n := 20 + r.Intn(100) // tier-0 seconds
		m := 3 + r.Intn(10)   // tier-1 minutes
		db := newTestDB(t, Config{Tier0Retention: time.Duration(n) * time.Second, Tier1Retention: time.Duration(m) * time.Minute})
		db.chunkLen = 1 + r.Intn(4)
		if seed%2 == 0 {
			db.chunkLen = firstStride + r.Intn(3*firstStride) // chunks that grow while filled
		}
		db.Register(testChart("m", "a", "b"))

		type pt struct {
			t int64
			v [2]float64
		}
		var pts []pt
		ts := int64(1_000_000 + r.Intn(100))
		for i := 0; i < 2000; i++ {
			switch x := r.Intn(100); {
			case x < 3:
				ts += int64(n + r.Intn(3*n)) // longer than the ring
			case x < 15:
				ts += int64(2 + r.Intn(5)) // a short gap
			default:
				ts++
			}
			v := [2]float64{float64(r.Intn(1000)) / 4, float64(r.Intn(50))}
			if r.Intn(10) == 0 {
				v[1] = math.NaN()
			}
			mustAppend(t, db, "m", ts, v[0], v[1])
			pts = append(pts, pt{ts, v})
		}
		last := pts[len(pts)-1].t

		// Tier 0. The ring covers from the first point after the last jump
		// longer than the ring, or the last n seconds, whichever is later
		// (leading slots may be gaps).
		first := pts[0].t
		for i := 1; i < len(pts); i++ {
			if pts[i].t-pts[i-1].t >= int64(n) {
				first = pts[i].t
			}
		}
		first = max(first, last-int64(n)+1)
		byT := map[int64][2]float64{}
		for _, p := range pts {
			byT[p.t] = p.v
		}
		for q := 0; q < 30; q++ {
			after := last - int64(r.Intn(3*n))
			before := after + int64(r.Intn(2*n))
			w, err := db.Query("m", 0, after, before)
			if err != nil {
				t.Fatal(err)
			}
			lo, hi := max(after, first), min(before, last)
			if lo > hi {
				if len(w.Slots[0]) != 0 {
					t.Fatalf("seed %d: tier 0 [%d,%d]: %d slots, want none", seed, after, before, len(w.Slots[0]))
				}
				continue
			}
			if w.Start != lo || len(w.Slots[0]) != int(hi-lo+1) {
				t.Fatalf("seed %d: tier 0 [%d,%d]: start %d len %d, want %d len %d", seed, after, before, w.Start, len(w.Slots[0]), lo, hi-lo+1)
			}
			for i := range w.Slots[0] {
				v, ok := byT[lo+int64(i)]
				for d := 0; d < 2; d++ {
					g := w.Slots[d][i]
					if !ok || math.IsNaN(v[d]) {
						if g.Count != 0 {
							t.Fatalf("seed %d: tier 0 t=%d dim %d = %+v, want gap", seed, lo+int64(i), d, g)
						}
						continue
					}
					if g.Count != 1 || g.Sum != float64(float32(v[d])) {
						t.Fatalf("seed %d: tier 0 t=%d dim %d = %+v, want %v", seed, lo+int64(i), d, g, v[d])
					}
				}
			}
		}

		// Tier 1.
		type agg struct {
			min, max, sum float64
			n             uint32
		}
		mins := map[int64]*[2]agg{}
		for _, p := range pts {
			mm := p.t / 60
			a := mins[mm]
			if a == nil {
				a = &[2]agg{}
				mins[mm] = a
			}
			for d := 0; d < 2; d++ {
				v := p.v[d]
				if math.IsNaN(v) {
					continue
				}
				if a[d].n == 0 || v < a[d].min {
					a[d].min = v
				}
				if a[d].n == 0 || v > a[d].max {
					a[d].max = v
				}
				a[d].sum += v
				a[d].n++
			}
		}
		newest := last / 60
		oldest := newest
		for mm := range mins {
			oldest = min(oldest, mm)
		}
		oldest = max(oldest, newest-int64(m)+1)
		for q := 0; q < 30; q++ {
			after := last - int64(r.Intn(120*m))
			before := after + int64(r.Intn(120*m))
			w, err := db.Query("m", 1, after, before)
			if err != nil {
				t.Fatal(err)
			}
			lo, hi := max(after/60, oldest), min(before/60, newest)
			if lo > hi {
				if len(w.Slots[0]) != 0 {
					t.Fatalf("seed %d: tier 1 [%d,%d]: %d slots, want none", seed, after, before, len(w.Slots[0]))
				}
				continue
			}
			if w.Start != lo*60 || len(w.Slots[0]) != int(hi-lo+1) {
				t.Fatalf("seed %d: tier 1 [%d,%d]: start %d len %d, want %d len %d", seed, after, before, w.Start, len(w.Slots[0]), lo*60, hi-lo+1)
			}
			for i := range w.Slots[0] {
				a := mins[lo+int64(i)]
				for d := 0; d < 2; d++ {
					g := w.Slots[d][i]
					if a == nil || a[d].n == 0 {
						if g.Count != 0 {
							t.Fatalf("seed %d: tier 1 minute %d dim %d = %+v, want gap", seed, lo+int64(i), d, g)
						}
						continue
					}
					if g.Count != a[d].n || g.Min != float64(float32(a[d].min)) || g.Max != float64(float32(a[d].max)) ||
						math.Abs(g.Sum-a[d].sum) > 1e-5*math.Max(1, math.Abs(a[d].sum)) {
						t.Fatalf("seed %d: tier 1 minute %d dim %d = %+v, want %+v", seed, lo+int64(i), d, g, a[d])
					}
				}
			}
		}
	}
}
