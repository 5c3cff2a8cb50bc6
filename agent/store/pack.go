package store

import (
	"fmt"
	"math"
	"slices"

	"github.com/klauspost/compress/zstd"
)

// Sealed tier-1 chunks (all but the one being filled) are kept packed:
// the float32 arrays are split into byte planes (all first bytes, then all
// second bytes, ...; sign and exponent bytes repeat a lot across hours) and
// the whole chunk is compressed with zstd (klauspost/compress, already a
// dependency). A chunk is unpacked into a scratch copy to be read and
// packed again after the rare late write (a minute merged after a
// restart). See BenchmarkBytesPerDim for the resulting bytes per dimension.
var (
	zenc, _ = zstd.NewWriter(nil, zstd.WithEncoderConcurrency(1), zstd.WithLowerEncoderMem(true),
		zstd.WithEncoderLevel(zstd.SpeedBetterCompression))
	zdec, _ = zstd.NewReader(nil, zstd.WithDecoderConcurrency(1), zstd.WithDecoderLowmem(true))
)

// rawLen is the unpacked size of a chunk of n slots.
func rawLen(n int) int { return n * 14 }

func putPlanes(dst []byte, a []float32) []byte {
	for p := 0; p < 4; p++ {
		shift := uint(8 * p)
		for _, v := range a {
			dst = append(dst, byte(math.Float32bits(v)>>shift))
		}
	}
	return dst
}

func getPlanes(src []byte, a []float32) []byte {
	n := len(a)
	for i := range a {
		a[i] = math.Float32frombits(uint32(src[i]) | uint32(src[n+i])<<8 | uint32(src[2*n+i])<<16 | uint32(src[3*n+i])<<24)
	}
	return src[4*n:]
}

// seal packs a raw chunk in place.
func (c *chunk) seal() {
	if c.packed != nil {
		return
	}
	n := len(c.count)
	buf := make([]byte, 0, rawLen(n))
	buf = putPlanes(buf, c.min)
	buf = putPlanes(buf, c.max)
	buf = putPlanes(buf, c.sum)
	buf = append(buf, c.count...)
	buf = append(buf, c.anom...)
	c.packed = slices.Clip(zenc.EncodeAll(buf, make([]byte, 0, len(buf)/4)))
	c.n = n
	c.min, c.max, c.sum, c.count, c.anom = nil, nil, nil, nil, nil
}

// view returns the chunk's slots: itself when raw, else an unpacked copy.
func (c *chunk) view() *chunk {
	if c.packed == nil {
		return c
	}
	raw, err := zdec.DecodeAll(c.packed, make([]byte, 0, rawLen(c.n)))
	if err != nil || len(raw) != rawLen(c.n) {
		// Only a bug can get here: the bytes never left memory.
		panic(fmt.Sprintf("unpack tier-1 chunk: %v (%d bytes, want %d)", err, len(raw), rawLen(c.n)))
	}
	v := &chunk{min: make([]float32, c.n), max: make([]float32, c.n), sum: make([]float32, c.n), base: c.base, stride: c.stride}
	raw = getPlanes(raw, v.min)
	raw = getPlanes(raw, v.max)
	raw = getPlanes(raw, v.sum)
	v.count = raw[:c.n:c.n]
	v.anom = raw[c.n : 2*c.n : 2*c.n]
	return v
}

// unseal turns a packed chunk back into a raw one in place.
func (c *chunk) unseal() {
	if c.packed == nil {
		return
	}
	v := c.view()
	*c = *v
}
