package store

import (
	"errors"
	"time"
)

// DimDef is one dimension of a chart, as Netdata defines it.
type DimDef struct {
	ID, Name   string // Name is the display name (allmetrics/prometheus/shell use it)
	Algorithm  string // "absolute" or "incremental"
	Multiplier int64
	Divisor    int64
	Hidden     bool
}

// ChartDef describes one chart. Immutable once registered.
type ChartDef struct {
	ID          string // e.g. "system.cpu", "disk.sda", "disk_space._"
	Name        string // usually == ID
	Type        string // part before the first dot, e.g. "system"
	Context     string // e.g. "system.cpu", "disk.io"
	Family      string
	Title       string
	Units       string
	ChartType   string // "line", "area", "stacked"
	Plugin      string // e.g. "proc.plugin"
	Module      string // e.g. "/proc/stat"
	Priority    int
	UpdateEvery int // seconds
	Dims        []DimDef
}

// HasDims reports whether ids are d's dimension ids, in order: a window
// read by an older definition of a chart (one redefined since) does not
// match it.
func (d *ChartDef) HasDims(ids []string) bool {
	if len(ids) != len(d.Dims) {
		return false
	}
	for i, dim := range d.Dims {
		if dim.ID != ids[i] {
			return false
		}
	}
	return true
}

// Agg is one storage slot of one dimension. Tier 0 slots are 1 second and
// hold one value (Min == Max == Sum, Count 1); Count 0 means no data (gap).
// Tier 1 slots are 60 seconds and hold the aggregate of the points in them.
type Agg struct {
	Min, Max, Sum float64
	Count         uint32
	// Anomalous is the number of the slot's points flagged as anomalous
	// (MarkAnomalous; the agent's detector is agent/ml): 0 or 1 in tier 0,
	// up to Count in tier 1.
	Anomalous uint32
}

// Window is a copied range of one chart, safe to use after the call.
type Window struct {
	ChartID string
	Tier    int
	Step    int64    // seconds per slot: 1 (tier 0) or 60 (tier 1)
	Start   int64    // unix seconds of Slots[d][0]; slot i covers [Start+i*Step, Start+(i+1)*Step)
	Dims    []string // dimension ids, chart order
	Slots   [][]Agg  // [dim][slot], every dim has the same number of slots
	buf     []Agg    // tier-0 slots' backing array, reused by QueryInto
}

// SlotsIn is the slots of w in the window (after, before], the slots
// that start in it: [lo, hi) of every dimension's Slots.
func (w *Window) SlotsIn(after, before int64) (lo, hi int) {
	if len(w.Slots) == 0 || w.Step <= 0 {
		return 0, 0
	}
	n := int64(len(w.Slots[0]))
	lo = int(min(max(floorDiv(after-w.Start, w.Step)+1, 0), n))
	hi = int(min(max(floorDiv(before-w.Start, w.Step)+1, 0), n))
	return lo, max(lo, hi)
}

// Stats describes storage for /api/v3/settings, /api/v3/db and info.
type Stats struct {
	Dir                string
	Charts, Dimensions int
	Tier0Retention     time.Duration
	Tier1Retention     time.Duration
	Tier0BytesPerDim   int // memory cost per dimension of tier 0
	// Tier1BytesPerDim is an estimate of one dimension's tier-1 memory at
	// full retention: the open chunk unpacked plus the rest at the packed
	// size measured so far (unpacked until a chunk has been sealed).
	Tier1BytesPerDim      int
	MemoryBytes           int64 // bytes held now by tier-0 rings, open minutes and tier-1 chunks
	Tier1DiskBytes        int64
	FirstTime, LastTime   int64 // unix seconds of the oldest/newest tier-0 point (0 when empty)
	Tier1First, Tier1Last int64
}

// Config of the store; zero values get defaults (tier 0: 1h, tier 1: 14 days).
type Config struct {
	Dir            string // data dir; tier 1 is persisted under Dir
	Tier0Retention time.Duration
	Tier1Retention time.Duration
	// Tier1ChunkMinutes is the length of a tier-1 chunk (0: 360). The
	// chunk being filled costs 14 bytes a minute per dimension unpacked:
	// a parent holding many children's dimensions in memory only uses
	// shorter chunks (60: 840 bytes a dimension instead of 5 KB).
	Tier1ChunkMinutes int
}

// Sentinel errors callers branch on with errors.Is.
var (
	// ErrNotFound reports an unknown chart id.
	ErrNotFound = errors.New("chart not found")
	// ErrBadTier reports a tier other than 0 or 1.
	ErrBadTier = errors.New("tier must be 0 or 1")
	// ErrBadRange reports after > before in a query.
	ErrBadRange = errors.New("after is later than before")
	// ErrOld reports a point not newer than the chart's last point.
	ErrOld = errors.New("point not newer than the last one")
	// ErrNotHeld reports a time tier 0 no longer (or not yet) holds.
	ErrNotHeld = errors.New("point not held in tier 0")
	// ErrClosed reports use of a closed DB.
	ErrClosed = errors.New("store closed")
)
