package store

import (
	"fmt"
	"math"
)

// MarkAnomalous sets the anomaly bit of the dimensions flagged in
// anomalous (Dims order) for the tier-0 point at unix second t, and counts
// each newly set bit in the tier-1 minute being filled. Marking is
// idempotent: a bit already set is not counted twice, and a missing point
// (NaN) is never marked. It returns how many bits it set.
//
// The tier-1 count is only raised while t's minute is still open: the
// detector marks a point right after it is collected, before the next
// point can close the minute. A mark for a minute already closed (and
// queued for the file) sets the tier-0 bit only, so the persisted minute
// never changes after it was written.
func (db *DB) MarkAnomalous(chartID string, t int64, anomalous []bool) (int, error) {
	if db.closed.Load() {
		return 0, ErrClosed
	}
	s := db.lookup(chartID)
	if s == nil {
		return 0, fmt.Errorf("mark %q: %w", chartID, ErrNotFound)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(anomalous) != s.ndims {
		return 0, fmt.Errorf("mark %q: %d flags for %d dimensions", chartID, len(anomalous), s.ndims)
	}
	if s.last == 0 || t > s.last || t < s.first || t <= s.last-int64(s.n) {
		return 0, fmt.Errorf("mark %q at %d: %w", chartID, t, ErrNotHeld)
	}
	i := s.idx(t)
	open := floorDiv(t, minuteSecs) == s.accMinute
	set := 0
	for d, a := range anomalous {
		if !a || s.anomalous(d, i) || math.IsNaN(float64(s.t0.get(d, i))) {
			continue
		}
		s.setAnomalous(d, i)
		if open {
			s.acc[d].anom++
		}
		set++
	}
	return set, nil
}
