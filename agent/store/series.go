package store

import (
	"math"
	"slices"
)

// minuteSecs is the width of a tier-1 slot.
const minuteSecs = 60

// accum is the open tier-1 minute of one dimension.
type accum struct {
	min, max, sum float64
	count, anom   uint32
}

func (a *accum) add(v float64) {
	if a.count == 0 || v < a.min {
		a.min = v
	}
	if a.count == 0 || v > a.max {
		a.max = v
	}
	a.sum += v
	a.count++
}

// chunk holds up to chunkLen consecutive tier-1 minutes of every
// dimension of a chart, as parallel arrays indexed by slot (d, off).
// Struct-of-arrays keeps a slot at 14 bytes (three float32 and two uint8)
// instead of a 40-byte Agg. A chunk holds only the minutes from the first
// one written (base, an offset into the chunk's chunkLen minutes): a store
// started, or a chart that appeared, in the middle of a chunk's six hours
// does not keep empty slots for the hours before it (half a chunk on
// average: 2.3 MiB over 900 dimensions). The arrays start with room for
// firstStride minutes and double as minutes come (grow); a minute at or
// beyond base+stride has no data.
type chunk struct {
	min, max, sum []float32
	count, anom   []uint8
	packed        []byte // sealed form (pack.go); the arrays are nil then
	n             int    // slots, when packed
	base          int    // offset in the chunk of the first minute the arrays hold
	stride        int    // minutes per dimension the arrays hold
}

// firstStride is the room in minutes a new chunk starts with.
const firstStride = 16

func newChunk(ndims, base, stride int) *chunk {
	n := ndims * stride
	return &chunk{
		min: make([]float32, n), max: make([]float32, n), sum: make([]float32, n),
		count: make([]uint8, n), anom: make([]uint8, n), base: base, stride: stride,
	}
}

// slot is the array index of dimension d at minute offset off of the
// chunk; ok is false when the chunk holds no slot there (no data).
func (c *chunk) slot(d, off int) (j int, ok bool) {
	i := off - c.base
	if i < 0 || i >= c.stride {
		return 0, false
	}
	return d*c.stride + i, true
}

// grow makes room for minute offset off (0 <= off < chunkLen) in a raw
// chunk, keeping what it holds: the arrays at least double, and start
// earlier when off is before base (a late minute after a restart).
func (c *chunk) grow(ndims, off, chunkLen int) {
	if off >= c.base && off < c.base+c.stride {
		return
	}
	nb := min(c.base, off)
	end := max(c.base+c.stride, off+1)
	ns := min(chunkLen-nb, max(2*c.stride, end-nb))
	g := newChunk(ndims, nb, ns)
	shift := c.base - nb
	for d := 0; d < ndims; d++ {
		o, n := d*c.stride, d*ns+shift
		copy(g.min[n:n+c.stride], c.min[o:o+c.stride])
		copy(g.max[n:n+c.stride], c.max[o:o+c.stride])
		copy(g.sum[n:n+c.stride], c.sum[o:o+c.stride])
		copy(g.count[n:n+c.stride], c.count[o:o+c.stride])
		copy(g.anom[n:n+c.stride], c.anom[o:o+c.stride])
	}
	*c = *g
}

func (c *chunk) bytes() int {
	if c.packed != nil {
		return cap(c.packed)
	}
	return len(c.min)*12 + len(c.count)*2
}

// series is the storage of one chart. mu guards every field; the DB's map
// lock is never held while a series lock is taken for long.
type series struct {
	def    *ChartDef
	num    uint32 // chart number in the tier-1 file
	ndims  int
	dimIDs []string

	// tier 0: n seconds (the retention) per dimension in a ring of blocks
	// (ring.go); NaN is a gap. anom is the parallel anomaly bitset (bit
	// d*size + slot over the ring's slots, one bit a second), set by
	// MarkAnomalous and cleared whenever the slot is reused.
	n           int
	t0          *ring
	anom        []uint64
	first, last int64 // unix seconds of the oldest/newest point held; last 0 = empty

	// tier 1: the minute being filled, then chunks keyed by minute/chunkLen.
	accMinute int64 // unix minute of acc; -1 = none
	acc       []accum
	chunkLen  int
	m         int // tier-1 retention in minutes
	chunks    map[int64]*chunk
	t1First   int64 // unix minute of the oldest closed minute held (-1 none)
	t1Last    int64 // unix minute of the newest closed minute held (-1 none)

	// pending holds encoded tier-1 file records not yet written.
	pending []byte
	defSent bool // the current def was queued for the file
	persist bool // closed minutes are queued for the file
}

func newSeries(def *ChartDef, num uint32, n, m, chunkLen int) *series {
	s := &series{def: def, num: num, n: n, m: m, chunkLen: chunkLen}
	s.reset(def)
	return s
}

// reset drops all data and sizes the series for def.
func (s *series) reset(def *ChartDef) {
	s.def = def
	s.ndims = len(def.Dims)
	s.dimIDs = dimIDs(def)
	s.t0 = newRing(s.ndims, s.n)
	s.anom = make([]uint64, (s.ndims*s.t0.size+63)/64)
	s.first, s.last = 0, 0
	s.accMinute = -1
	s.acc = make([]accum, s.ndims)
	s.chunks = map[int64]*chunk{}
	s.t1First, s.t1Last = -1, -1
}

func dimIDs(def *ChartDef) []string {
	ids := make([]string, len(def.Dims))
	for i, d := range def.Dims {
		ids[i] = d.ID
	}
	return ids
}

// sameDims reports whether def keeps the dimension ids of the series, so
// its data stays meaningful.
func (s *series) sameDims(def *ChartDef) bool {
	return slices.Equal(s.dimIDs, dimIDs(def))
}

func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b != 0 && (a < 0) != (b < 0) {
		q--
	}
	return q
}

func (s *series) idx(t int64) int { return s.t0.slot(t) }

// anomalous reports the anomaly bit of dimension d at ring slot i.
func (s *series) anomalous(d, i int) bool {
	b := d*s.t0.size + i
	return s.anom[b>>6]&(1<<(b&63)) != 0
}

func (s *series) setAnomalous(d, i int) {
	b := d*s.t0.size + i
	s.anom[b>>6] |= 1 << (b & 63)
}

func (s *series) clearAnomalous(d, i int) {
	b := d*s.t0.size + i
	s.anom[b>>6] &^= 1 << (b & 63)
}

// append stores one point at t (> s.last), closing the tier-1 minute
// before it when t is in a later minute.
// append stores values at t; it returns how many tier-1 points a minute
// it closed on the way wrote (0 when t is in the open minute).
func (s *series) append(t int64, values []float64) (tier1 int) {
	nan := float32(math.NaN())
	switch {
	case s.last == 0 || t-s.last >= int64(s.n):
		// Empty or everything held is older than the ring: start over.
		s.t0.fillNaN()
		clear(s.anom)
		s.first = t
	default:
		for g := s.last + 1; g < t; g++ {
			i := s.idx(g)
			for d := 0; d < s.ndims; d++ {
				s.t0.set(d, i, nan)
				s.clearAnomalous(d, i)
			}
		}
		if lo := t - int64(s.n) + 1; s.first < lo {
			s.first = lo
		}
	}
	i := s.idx(t)
	for d := 0; d < s.ndims; d++ {
		s.t0.set(d, i, float32(values[d]))
		s.clearAnomalous(d, i)
	}
	s.last = t

	minute := floorDiv(t, minuteSecs)
	if minute != s.accMinute {
		tier1 = s.closeMinute()
		s.accMinute = minute
	}
	for d := 0; d < s.ndims; d++ {
		if v := values[d]; !math.IsNaN(v) {
			s.acc[d].add(v)
		}
	}
	return tier1
}

// closeMinute moves the open minute into its chunk, queues it for the file
// and drops chunks that fell out of retention. It returns the number of
// tier-1 points written (dimensions with data in the minute).
func (s *series) closeMinute() (points int) {
	if s.accMinute < 0 {
		return 0
	}
	for d := range s.acc {
		if s.acc[d].count > 0 {
			points++
		}
	}
	if points > 0 {
		s.mergeMinute(s.accMinute, s.acc)
		if s.persist {
			s.pending = appendMinuteRecord(s.pending, s.num, s.accMinute, s.acc)
		}
	}
	for d := range s.acc {
		s.acc[d] = accum{}
	}
	s.accMinute = -1
	s.prune()
	s.sealOld()
	return points
}

// sealOld packs every raw chunk before the one holding the newest minute.
func (s *series) sealOld() {
	cur := floorDiv(s.newestMinute(), int64(s.chunkLen))
	for k, c := range s.chunks {
		if k < cur && c.packed == nil {
			c.seal()
		}
	}
}

// mergeMinute adds aggregates of one minute to what the chunk holds (a
// minute can arrive in two parts around a restart).
func (s *series) mergeMinute(minute int64, a []accum) {
	key := floorDiv(minute, int64(s.chunkLen))
	c := s.chunks[key]
	off := int(minute - key*int64(s.chunkLen))
	if c == nil {
		c = newChunk(s.ndims, off, min(firstStride, s.chunkLen-off))
		s.chunks[key] = c
	}
	c.unseal() // a late minute for a sealed chunk; sealOld packs it again
	c.grow(s.ndims, off, s.chunkLen)
	for d := range a {
		if a[d].count == 0 {
			continue
		}
		j, _ := c.slot(d, off)
		if c.count[j] == 0 {
			c.min[j], c.max[j], c.sum[j] = float32(a[d].min), float32(a[d].max), float32(a[d].sum)
		} else {
			c.min[j] = min(c.min[j], float32(a[d].min))
			c.max[j] = max(c.max[j], float32(a[d].max))
			c.sum[j] += float32(a[d].sum)
		}
		c.count[j] = uint8(min(uint32(c.count[j])+a[d].count, 255))
		c.anom[j] = uint8(min(uint32(c.anom[j])+a[d].anom, 255))
	}
	if s.t1First < 0 || minute < s.t1First {
		s.t1First = minute
	}
	if minute > s.t1Last {
		s.t1Last = minute
	}
}

// newestMinute is the latest tier-1 minute held, open or closed (-1 none).
func (s *series) newestMinute() int64 { return max(s.accMinute, s.t1Last) }

// t1Cutoff is the oldest minute inside tier-1 retention.
func (s *series) t1Cutoff() int64 { return s.newestMinute() - int64(s.m) + 1 }

func (s *series) prune() { s.pruneBefore(s.t1Cutoff()) }

// pruneBefore drops the chunks that end before minute cut.
func (s *series) pruneBefore(cut int64) {
	if s.t1Last < 0 {
		return
	}
	for k := range s.chunks {
		if (k+1)*int64(s.chunkLen)-1 < cut {
			delete(s.chunks, k)
		}
	}
	if s.t1First < cut {
		s.t1First = cut
		if s.t1First > s.t1Last {
			s.t1First, s.t1Last = -1, -1
		}
	}
}

// tier0Window copies seconds [after, before] clamped to what is held.
func (s *series) tier0Window(w *Window, after, before int64) {
	w.Step = 1
	w.Start = after
	if s.last == 0 {
		w.Slots = emptySlots(s.ndims)
		return
	}
	lo, hi := max(after, s.first), min(before, s.last)
	if lo > hi {
		w.Slots = emptySlots(s.ndims)
		return
	}
	w.Start = lo
	cnt := int(hi - lo + 1)
	// A window passed again (QueryInto) keeps its arrays when they are
	// large enough.
	if cap(w.Slots) >= s.ndims {
		w.Slots = w.Slots[:s.ndims]
	} else {
		w.Slots = make([][]Agg, s.ndims)
	}
	buf := w.buf
	if cap(buf) >= s.ndims*cnt {
		buf = buf[:s.ndims*cnt]
	} else {
		buf = make([]Agg, s.ndims*cnt)
	}
	w.buf = buf
	for d := 0; d < s.ndims; d++ {
		row := buf[d*cnt : (d+1)*cnt : (d+1)*cnt]
		for k := 0; k < cnt; k++ {
			i := s.idx(lo + int64(k))
			v := s.t0.get(d, i)
			row[k] = Agg{}
			if v == v { // not NaN
				f := float64(v)
				row[k] = Agg{Min: f, Max: f, Sum: f, Count: 1}
				if s.anomalous(d, i) {
					row[k].Anomalous = 1
				}
			}
		}
		w.Slots[d] = row
	}
}

// tier1Window copies the minutes holding [after, before], clamped to what
// is held, including the minute still being filled.
func (s *series) tier1Window(w *Window, after, before int64) {
	w.Step = minuteSecs
	amin, bmin := floorDiv(after, minuteSecs), floorDiv(before, minuteSecs)
	w.Start = amin * minuteSecs
	newest := s.newestMinute()
	if newest < 0 {
		w.Slots = emptySlots(s.ndims)
		return
	}
	oldest := s.t1First
	if oldest < 0 || (s.accMinute >= 0 && s.accMinute < oldest) {
		oldest = s.accMinute
	}
	oldest = max(oldest, s.t1Cutoff())
	lo, hi := max(amin, oldest), min(bmin, newest)
	if lo > hi {
		w.Slots = emptySlots(s.ndims)
		return
	}
	w.Start = lo * minuteSecs
	cnt := int(hi - lo + 1)
	w.Slots = make([][]Agg, s.ndims)
	buf := make([]Agg, s.ndims*cnt)
	for d := 0; d < s.ndims; d++ {
		w.Slots[d] = buf[d*cnt : (d+1)*cnt : (d+1)*cnt]
	}
	for m := lo; m <= hi; {
		key := floorDiv(m, int64(s.chunkLen))
		end := min(hi, (key+1)*int64(s.chunkLen)-1)
		if c := s.chunks[key]; c != nil {
			c = c.view()
			for d := 0; d < s.ndims; d++ {
				row := w.Slots[d]
				for mm := m; mm <= end; mm++ {
					j, ok := c.slot(d, int(mm-key*int64(s.chunkLen)))
					if ok && c.count[j] > 0 {
						row[mm-lo] = Agg{Min: float64(c.min[j]), Max: float64(c.max[j]), Sum: float64(c.sum[j]),
							Count: uint32(c.count[j]), Anomalous: uint32(c.anom[j])}
					}
				}
			}
		}
		m = end + 1
	}
	if s.accMinute >= lo && s.accMinute <= hi {
		k := s.accMinute - lo
		for d := 0; d < s.ndims; d++ {
			a := s.acc[d]
			if a.count == 0 {
				continue
			}
			g := &w.Slots[d][k]
			if g.Count == 0 {
				*g = Agg{Min: a.min, Max: a.max, Sum: a.sum, Count: a.count, Anomalous: a.anom}
				continue
			}
			g.Min, g.Max = min(g.Min, a.min), max(g.Max, a.max)
			g.Sum += a.sum
			g.Count += a.count
			g.Anomalous += a.anom
		}
	}
}

func emptySlots(ndims int) [][]Agg {
	s := make([][]Agg, ndims)
	for i := range s {
		s[i] = []Agg{}
	}
	return s
}

// memBytes is what the series' arrays hold.
func (s *series) memBytes() int64 {
	b := s.t0.bytes() + int64(len(s.anom)*8+len(s.acc)*32)
	for _, c := range s.chunks {
		b += int64(c.bytes())
	}
	return b
}
