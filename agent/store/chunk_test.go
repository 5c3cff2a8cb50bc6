package store

import "testing"

// TestChunkGrowKeepsSlots: a chunk opened in the middle of its window
// holds only the minutes from the first one written; later and earlier
// (late, after a restart) minutes make it grow without losing a slot.
func TestChunkGrowKeepsSlots(t *testing.T) {
	const ndims, chunkLen = 3, 360
	c := newChunk(ndims, 200, firstStride)
	put := func(off int) {
		c.grow(ndims, off, chunkLen)
		for d := 0; d < ndims; d++ {
			j, ok := c.slot(d, off)
			if !ok {
				t.Fatalf("slot(%d, %d) missing after grow (base %d stride %d)", d, off, c.base, c.stride)
			}
			c.min[j], c.count[j] = float32(off*10+d), 1
		}
	}
	offs := []int{200, 201, 215, 216, 250, 359, 150, 0}
	for i, off := range offs {
		put(off)
		for _, o := range offs[:i+1] {
			for d := 0; d < ndims; d++ {
				j, ok := c.slot(d, o)
				if !ok || c.count[j] != 1 || c.min[j] != float32(o*10+d) {
					t.Fatalf("after writing offset %d: slot (%d, %d) = ok %v count %d min %v", off, d, o, ok, c.count[j], c.min[j])
				}
			}
		}
		if c.base < 0 || c.base+c.stride > chunkLen {
			t.Fatalf("after offset %d: base %d stride %d leaves the chunk", off, c.base, c.stride)
		}
	}
	if j, ok := c.slot(1, 100); !ok || c.count[j] != 0 {
		t.Errorf("offset 100 was never written: ok %v count %d", ok, c.count[j])
	}
}

// TestChunkStartsAtFirstMinute: the open chunk of a store that starts
// late in a chunk's window holds room for a few minutes, not the hours
// before its first minute.
func TestChunkStartsAtFirstMinute(t *testing.T) {
	s := newSeries(&ChartDef{ID: "x.y", Dims: []DimDef{{ID: "a"}, {ID: "b"}}}, 1, 60, 2*chunkMinutes, chunkMinutes)
	minute := int64(1000*chunkMinutes + chunkMinutes - 20) // 20 minutes before the chunk ends
	s.mergeMinute(minute, []accum{{min: 1, max: 1, sum: 1, count: 1}, {min: 2, max: 2, sum: 2, count: 1}})
	c := s.chunks[1000]
	if c == nil {
		t.Fatal("no chunk for the minute")
	}
	if c.stride > firstStride || c.bytes() > 2*firstStride*14 {
		t.Errorf("chunk holds %d minutes (%d bytes) per dimension for one minute written", c.stride, c.bytes()/2)
	}
	var w Window
	s.tier1Window(&w, minute*minuteSecs, minute*minuteSecs+59)
	if got := w.Slots[1][0]; got.Count != 1 || got.Max != 2 {
		t.Errorf("read back %+v", got)
	}
}
