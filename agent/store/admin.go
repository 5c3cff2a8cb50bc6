package store

import (
	"fmt"
	"math"
	"time"
)

// Prune drops every point before unix second before: tier-0 seconds and
// tier-1 minutes that end before it, of chart chartID or of every chart
// when chartID is "". It returns how many charts it touched. The tier-1
// file is rewritten at once (compacted), so pruned minutes do not come
// back at the next start.
func (db *DB) Prune(chartID string, before int64) (int, error) {
	if db.closed.Load() {
		return 0, ErrClosed
	}
	var list []*lockedSeries
	if chartID == "" {
		list = db.allSeries()
	} else {
		s := db.lookup(chartID)
		if s == nil {
			return 0, fmt.Errorf("prune %q: %w", chartID, ErrNotFound)
		}
		list = []*lockedSeries{s}
	}
	defer db.gen.Add(1)
	for _, s := range list {
		s.mu.Lock()
		s.pruneTier0(before)
		// Minute m covers [60m, 60m+60): it ends before `before` when
		// m < floor(before/60).
		cut := floorDiv(before, minuteSecs)
		if s.accMinute >= 0 && s.accMinute < cut {
			for d := range s.acc {
				s.acc[d] = accum{}
			}
			s.accMinute = -1
		}
		s.pruneBefore(cut)
		s.mu.Unlock()
	}
	if db.path != "" {
		if err := db.compact(); err != nil {
			return len(list), err
		}
	}
	return len(list), nil
}

// pruneTier0 turns the seconds before `before` into gaps and moves first
// past them; last stays, so later appends keep their order. A before past
// the newest point moves first to the second after it, not to before:
// points appended later are new, not pruned.
func (s *series) pruneTier0(before int64) {
	if s.last == 0 || before <= s.first {
		return
	}
	nan := float32(math.NaN())
	hi := min(before-1, s.last)
	for t := s.first; t <= hi; t++ {
		i := s.idx(t)
		for d := 0; d < s.ndims; d++ {
			s.t0.set(d, i, nan)
			s.clearAnomalous(d, i)
		}
	}
	s.first = min(before, s.last+1)
}

// SetRetention changes the retention of tier 0 and tier 1 (0 keeps a
// tier's current value). Shrinking drops the oldest data at once; growing
// keeps everything held and lets the rings fill. New charts get the new
// sizes.
func (db *DB) SetRetention(tier0, tier1 time.Duration) error {
	if db.closed.Load() {
		return ErrClosed
	}
	if err := CheckRetention(tier0, tier1); err != nil {
		return err
	}
	defer db.gen.Add(1)
	// Holding db.mu for writing keeps Register (which sizes new series
	// from db.n and db.m) and Stats out while the sizes change.
	db.mu.Lock()
	if tier0 != 0 {
		db.cfg.Tier0Retention = tier0
		db.n = int(tier0 / time.Second)
	}
	if tier1 != 0 {
		db.cfg.Tier1Retention = tier1
		db.m = int(tier1 / time.Minute)
	}
	n, m := db.n, db.m
	for _, s := range db.byID {
		s.mu.Lock()
		s.resizeTier0(n)
		s.m = m
		s.prune()
		s.mu.Unlock()
	}
	db.mu.Unlock()
	if db.path != "" && tier1 != 0 {
		return db.compact()
	}
	return nil
}

// resizeTier0 moves the ring to n slots, keeping the newest seconds that
// fit.
func (s *series) resizeTier0(n int) {
	if n == s.n {
		return
	}
	t0 := newRing(s.ndims, n)
	anom := make([]uint64, (s.ndims*t0.size+63)/64)
	if s.last != 0 {
		lo := max(s.first, s.last-int64(n)+1)
		for t := lo; t <= s.last; t++ {
			oi, ni := s.t0.slot(t), t0.slot(t)
			for d := 0; d < s.ndims; d++ {
				t0.set(d, ni, s.t0.get(d, oi))
				if s.anomalous(d, oi) {
					b := d*t0.size + ni
					anom[b>>6] |= 1 << (b & 63)
				}
			}
		}
		s.first = lo
	}
	s.t0, s.anom, s.n = t0, anom, n
}

// Generation counts Prune and SetRetention calls: readers that cache
// answers (the API's per-second data cache) key them by it.
func (db *DB) Generation() uint64 { return db.gen.Load() }
