package logs

import (
	"sync"
	"time"
)

// Ring keeps the newest Cap entries in memory, numbered by an increasing
// sequence so a cursor (the sequence of the last entry a page showed)
// pages stably while new entries arrive: they get higher numbers and never
// shift an older page. Safe for concurrent use.
//
// The anomaly detector can publish its events through one (NewRing) and
// pass it as the API's anomaly source (api.Options.Anomaly). Its entries
// should carry the chart id in Unit (the AI snapshot counts events per
// Unit), a Priority (PriWarning for an anomaly; the zero value is emerg),
// a readable Message, and the dimension, score or rate in Fields.
type Ring struct {
	mu   sync.RWMutex // guards the fields below
	buf  []Entry      // entry of sequence s at buf[(s-base-1)%len(buf)]; grows up to max
	max  int          // capacity: the buffer grows to it as entries come
	base uint64       // sequence before the first entry added
	n    int
	next uint64 // sequence of the next entry (first is 1)
	now  func() time.Time
}

// NewRing returns a ring holding at most capacity entries (at least 1).
// The buffer grows as entries come (appended in sequence order until it
// is full, so the index rule holds throughout): a ring sized for the worst
// hour costs nothing on a quiet host.
func NewRing(capacity int) *Ring {
	return &Ring{max: max(capacity, 1), next: 1, now: time.Now}
}

// Add appends e, numbering it (and stamping it now when e.Time is zero),
// and returns its sequence. The oldest entry goes when the ring is full.
func (r *Ring) Add(e Entry) uint64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.addLocked(e)
}

func (r *Ring) addLocked(e Entry) uint64 {
	if e.Time.IsZero() {
		e.Time = r.now()
	}
	e.Seq = r.next
	r.next++
	if r.n == 0 {
		r.base = e.Seq - 1
	}
	i := e.Seq - r.base - 1
	switch {
	case len(r.buf) == r.max:
		r.buf[i%uint64(len(r.buf))] = e
	case i == uint64(len(r.buf)):
		r.buf = append(r.buf, e) // in sequence order: nothing has wrapped yet
	default:
		// A jump in sequence while growing (a loaded trail missing an
		// entry whose write failed): take the whole buffer now, as a
		// fixed ring would; walk passes over the slots of the gap.
		r.buf = append(r.buf, make([]Entry, r.max-len(r.buf))...)
		r.buf[i%uint64(len(r.buf))] = e
	}
	if r.n < len(r.buf) {
		r.n++
	}
	return e.Seq
}

// Len is the number of entries held.
func (r *Ring) Len() int {
	r.mu.RLock()
	defer r.mu.RUnlock()
	n := 0
	r.walk(0, func(*Entry) bool { n++; return true })
	return n
}

// Before returns up to limit entries with a sequence below before (0: from
// the newest), newest first, that keep accepts (nil keeps all), and
// whether more such entries remain.
func (r *Ring) Before(before uint64, limit int, keep func(*Entry) bool) ([]Entry, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	var out []Entry
	more := false
	r.walk(before, func(e *Entry) bool {
		if keep != nil && !keep(e) {
			return true
		}
		if len(out) == limit {
			more = true
			return false
		}
		out = append(out, *e)
		return true
	})
	return out, more
}

// walk calls fn with the entries below before (0: from the newest),
// newest first, until fn returns false. The sequences held are the last
// len(buf) ones at most; a sequence that is missing (a gap in a loaded
// trail) has a slot holding another sequence or none, and is passed over.
func (r *Ring) walk(before uint64, fn func(*Entry) bool) {
	if r.n == 0 {
		return
	}
	newest := r.next - 1
	oldest := r.base + 1
	if span := uint64(len(r.buf)); newest-oldest >= span {
		oldest = newest - span + 1
	}
	seq := newest
	if before != 0 && before <= newest {
		seq = before - 1 // skip what the previous pages showed
	}
	for ; seq >= oldest; seq-- {
		e := &r.buf[(seq-r.base-1)%uint64(len(r.buf))]
		if e.Seq != seq {
			continue
		}
		if !fn(e) {
			return
		}
	}
}

// Source is a log that pages by sequence number: a *Ring, the *Audit
// trail, or the anomaly detector's events.
type Source interface {
	// Before returns up to limit entries with a sequence below before
	// (0: from the newest), newest first, that keep accepts, and whether
	// more remain. Entries (and their Fields) are not changed afterwards.
	Before(before uint64, limit int, keep func(*Entry) bool) ([]Entry, bool)
}

var _ Source = (*Ring)(nil)
