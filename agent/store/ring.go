package store

import "math"

// blockLen is the number of seconds in one tier-0 block.
const blockLen = 64

// block is one dense run of blockLen seconds of one dimension.
type block [blockLen]float32

// ring is the tier 0 of one chart: per dimension a ring of seconds, kept
// in blocks of blockLen seconds. A block whose seconds all hold the same
// value (an idle dimension: all 0, or all NaN for a gap) is one float32
// (uni); only a block that holds different values gets a dense array. So
// an idle dimension costs ~12 bytes per 64 seconds instead of 256: most
// of Netdata's system dimensions (error counters, unused interrupts,
// empty cgroups) are idle.
//
// Seconds are written in order, every second (gaps as NaN): the first
// write of a block's new lap resets it to uniform, dropping what it held
// from one lap ago. The ring holds one block more than the retention
// needs, so that reset only drops seconds older than the retention.
type ring struct {
	ndims, nb int       // dimensions, blocks per dimension
	size      int       // seconds in the ring: nb*blockLen
	uni       []float32 // per block [d*nb+b]: the value of a uniform block
	blk       []*block  // per block: the dense array, nil when uniform
	free      []*block  // dense arrays to reuse
	dense     int       // dense blocks held
}

func newRing(ndims, retention int) *ring {
	nb := (retention+blockLen-1)/blockLen + 1
	r := &ring{ndims: ndims, nb: nb, size: nb * blockLen,
		uni: make([]float32, ndims*nb), blk: make([]*block, ndims*nb)}
	r.fillNaN()
	return r
}

// slot is the ring position of unix second t.
func (r *ring) slot(t int64) int { return int(t % int64(r.size)) }

// fillNaN makes every block a uniform gap.
func (r *ring) fillNaN() {
	nan := float32(math.NaN())
	for k := range r.uni {
		r.uni[k] = nan
		r.release(k)
	}
}

// release makes block k uniform, keeping its array for reuse (a few per
// dimension at most: the rest go to the garbage collector).
func (r *ring) release(k int) {
	p := r.blk[k]
	if p == nil {
		return
	}
	r.blk[k] = nil
	r.dense--
	if len(r.free) < 2*r.ndims+4 {
		r.free = append(r.free, p)
	}
}

// same compares two float32 bit for bit (NaN equals NaN).
func same(a, b float32) bool { return math.Float32bits(a) == math.Float32bits(b) }

// set writes v at slot i of dimension d.
func (r *ring) set(d, i int, v float32) {
	k := d*r.nb + i/blockLen
	off := i % blockLen
	if off == 0 {
		// a new lap of this block: what it holds is older than retention
		r.release(k)
		r.uni[k] = v
		return
	}
	p := r.blk[k]
	if p == nil {
		if same(r.uni[k], v) {
			return
		}
		if n := len(r.free); n > 0 {
			p = r.free[n-1]
			r.free = r.free[:n-1]
		} else {
			p = new(block)
		}
		u := r.uni[k]
		for j := range p {
			p[j] = u
		}
		r.blk[k] = p
		r.dense++
	}
	p[off] = v
}

// get reads slot i of dimension d.
func (r *ring) get(d, i int) float32 {
	k := d*r.nb + i/blockLen
	if p := r.blk[k]; p != nil {
		return p[i%blockLen]
	}
	return r.uni[k]
}

// bytes is the memory the ring holds.
func (r *ring) bytes() int64 {
	return int64(len(r.uni)*4+len(r.blk)*8) + int64(r.dense+len(r.free))*blockLen*4
}
