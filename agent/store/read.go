package store

import (
	"fmt"
	"math"
)

// Query copies the slots of one chart covering unix seconds [after, before]
// (inclusive) from tier 0 or 1. The window is clamped to what the tier
// covers: Start is the later of after and the oldest slot the chart's ring
// covers, the end is the earlier of before and the newest point, slots
// without data inside have Count 0, and a range outside gives zero slots
// per dimension. Tier 1 slots are whole
// minutes, so Start is a multiple of 60 and the window covers the minutes
// of after and before; the minute being filled is included with the points
// so far.
func (db *DB) Query(chartID string, tier int, after, before int64) (*Window, error) {
	if tier != 0 && tier != 1 {
		return nil, fmt.Errorf("query %q tier %d: %w", chartID, tier, ErrBadTier)
	}
	if after > before {
		return nil, fmt.Errorf("query %q: %w", chartID, ErrBadRange)
	}
	s := db.lookup(chartID)
	if s == nil {
		return nil, fmt.Errorf("query %q: %w", chartID, ErrNotFound)
	}
	w := &Window{}
	s.window(w, chartID, tier, after, before)
	return w, nil
}

// QueryInto is Query into w, reusing its arrays (a caller reading many
// charts one after the other allocates one window's worth, not one per
// chart). w's previous contents are overwritten; on error w is unchanged.
func (db *DB) QueryInto(w *Window, chartID string, tier int, after, before int64) error {
	if tier != 0 && tier != 1 {
		return fmt.Errorf("query %q tier %d: %w", chartID, tier, ErrBadTier)
	}
	if after > before {
		return fmt.Errorf("query %q: %w", chartID, ErrBadRange)
	}
	s := db.lookup(chartID)
	if s == nil {
		return fmt.Errorf("query %q: %w", chartID, ErrNotFound)
	}
	s.window(w, chartID, tier, after, before)
	return nil
}

func (s *lockedSeries) window(w *Window, chartID string, tier int, after, before int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	w.ChartID, w.Tier = chartID, tier
	w.Dims = append(w.Dims[:0], s.dimIDs...)
	if tier == 0 {
		s.tier0Window(w, after, before)
	} else {
		s.tier1Window(w, after, before)
	}
}

// Latest returns the newest tier-0 point of a chart (NaN for missing
// dimensions); ok is false for an unknown chart or one with no points.
func (db *DB) Latest(chartID string) (t int64, values []float64, ok bool) {
	s := db.lookup(chartID)
	if s == nil {
		return 0, nil, false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.last == 0 {
		return 0, nil, false
	}
	values = make([]float64, s.ndims)
	i := s.idx(s.last)
	for d := range values {
		values[d] = float64(s.t0.get(d, i))
	}
	return s.last, values, true
}

// Held returns the oldest and newest seconds the tier-0 ring of a chart
// holds; ok is false for an unknown chart or one with no points.
func (db *DB) Held(chartID string) (first, last int64, ok bool) {
	s := db.lookup(chartID)
	if s == nil {
		return 0, 0, false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.first, s.last, s.last != 0
}

// tier0BytesPerDim is the memory one busy dimension's tier-0 ring takes
// (every block dense; an idle one takes ~12 bytes per 64 seconds), plus
// its anomaly bit a second of the ring.
func (db *DB) tier0BytesPerDim() int {
	blocks := (db.n+blockLen-1)/blockLen + 1
	return blocks*(blockLen*4+12) + blocks*blockLen/8
}

// Stats describes the store now.
func (db *DB) Stats() Stats {
	// db.n, db.m and the retentions change under db.mu (SetRetention).
	db.mu.RLock()
	st := Stats{
		Dir:              db.cfg.Dir,
		Tier0Retention:   db.cfg.Tier0Retention,
		Tier1Retention:   db.cfg.Tier1Retention,
		Tier0BytesPerDim: db.tier0BytesPerDim(),
	}
	dbm := db.m
	db.mu.RUnlock()
	// Tier-1 cost per dimension at full retention: the open chunk unpacked
	// (14 bytes a minute) plus the rest at the packed size measured so far
	// (unpacked size until a chunk has been sealed).
	var packedBytes, packedSlots int64
	first, t1first := int64(math.MaxInt64), int64(math.MaxInt64)
	for _, s := range db.allSeries() {
		s.mu.Lock()
		for _, c := range s.chunks {
			if c.packed != nil {
				packedBytes += int64(c.bytes())
				packedSlots += int64(c.n)
			}
		}
		st.Charts++
		st.Dimensions += s.ndims
		st.MemoryBytes += s.memBytes()
		if s.last != 0 {
			first = min(first, s.first)
			st.LastTime = max(st.LastTime, s.last)
		}
		if nm := s.newestMinute(); nm >= 0 {
			lo := s.t1First
			if lo < 0 || (s.accMinute >= 0 && s.accMinute < lo) {
				lo = s.accMinute
			}
			t1first = min(t1first, max(lo, s.t1Cutoff())*minuteSecs)
			st.Tier1Last = max(st.Tier1Last, nm*minuteSecs)
		}
		s.mu.Unlock()
	}
	perSlot := 14.0
	if packedSlots > 0 {
		perSlot = float64(packedBytes) / float64(packedSlots)
	}
	st.Tier1BytesPerDim = db.chunkLen*14 + int(perSlot*float64(max(dbm-db.chunkLen, 0)))
	if first != math.MaxInt64 {
		st.FirstTime = first
	}
	if t1first != math.MaxInt64 {
		st.Tier1First = t1first
	}
	db.fileMu.Lock()
	st.Tier1DiskBytes = db.fileSize
	db.fileMu.Unlock()
	return st
}
