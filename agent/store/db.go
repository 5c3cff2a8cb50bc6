package store

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"
)

// Defaults for a zero Config.
const (
	DefaultTier0Retention = time.Hour
	DefaultTier1Retention = 14 * 24 * time.Hour
)

// The longest retentions taken. Tier 0 is a ring of one slot a second
// per dimension, sized at once: a day is 86,400 slots, about 1.4 MB a
// dimension, already a few GB for a host's couple of thousand. Tier 1
// grows with its data; ten years bounds it where a duration still
// holds it.
const (
	MaxTier0Retention = 24 * time.Hour
	MaxTier1Retention = 10 * 366 * 24 * time.Hour
)

// Seconds is n seconds (a retention as the RPC and retention.json give
// it) as a duration; n past what a duration holds in nanoseconds is the
// longest duration, which CheckRetention refuses, where n*time.Second
// would wrap to a short or negative one.
func Seconds(n int64) time.Duration {
	if n > math.MaxInt64/int64(time.Second) {
		return math.MaxInt64
	}
	return time.Duration(n) * time.Second
}

// CheckRetention refuses retentions out of range; 0 keeps the value.
func CheckRetention(tier0, tier1 time.Duration) error {
	switch {
	case tier0 != 0 && tier0 < time.Second:
		return fmt.Errorf("tier 0 retention %v: must be at least 1s", tier0)
	case tier0 > MaxTier0Retention:
		return fmt.Errorf("tier 0 retention %v: must be at most %v", tier0, MaxTier0Retention)
	case tier1 != 0 && tier1 < time.Minute:
		return fmt.Errorf("tier 1 retention %v: must be at least 1m", tier1)
	case tier1 > MaxTier1Retention:
		return fmt.Errorf("tier 1 retention %v: must be at most %v", tier1, MaxTier1Retention)
	}
	return nil
}

// chunkMinutes is the length of a tier-1 chunk. The chunk being filled is
// unpacked (14 bytes a minute per dimension); earlier ones are packed.
// Six hours pack within a few percent of a whole day's chunk
// (BenchmarkTier1PackedDay) while the open chunk costs a quarter.
const chunkMinutes = 360

// lockedSeries is a series with its own lock; see series.go for the data
// layout.
type lockedSeries struct {
	mu sync.Mutex
	series
}

// DB is the agent's metric store: tier 0 in memory, tier 1 in memory and in
// an append-only file. Safe for concurrent use. Locking: mu guards the chart
// map (held only for lookups and registration); each chart has its own lock,
// so collectors appending to one chart never wait for a query on another.
type DB struct {
	cfg      Config
	n        int // tier-0 slots (seconds)
	m        int // tier-1 slots (minutes)
	chunkLen int
	path     string // "" = memory only

	mu      sync.RWMutex
	byID    map[string]*lockedSeries
	nextNum uint32
	sorted  atomic.Pointer[[]*ChartDef]

	fileMu      sync.Mutex // guards the fields below
	f           *os.File
	fileSize    int64
	compactSize int64 // size right after the last compaction
	wbuf        []byte

	gen    atomic.Uint64 // Prune and SetRetention calls (Generation)
	closed atomic.Bool
	stored [2]atomic.Uint64                                    // points written to tier 0 and tier 1 (PointsStored)
	reads  [NumReaders]struct{ queries, points atomic.Uint64 } // QueryFor
	stop   chan struct{}
	done   chan struct{}
}

// Open creates the store and, when cfg.Dir is set, loads tier 1 from
// Dir/tier1.dat (creating it) and starts the background flusher.
func Open(cfg Config) (*DB, error) {
	if cfg.Tier0Retention == 0 {
		cfg.Tier0Retention = DefaultTier0Retention
	}
	if cfg.Tier1Retention == 0 {
		cfg.Tier1Retention = DefaultTier1Retention
	}
	if err := CheckRetention(cfg.Tier0Retention, cfg.Tier1Retention); err != nil {
		return nil, err
	}
	db := &DB{
		cfg:  cfg,
		n:    int(cfg.Tier0Retention / time.Second),
		m:    int(cfg.Tier1Retention / time.Minute),
		byID: map[string]*lockedSeries{},
		stop: make(chan struct{}),
		done: make(chan struct{}),
	}
	db.chunkLen = min(chunkMinutes, db.m)
	if cfg.Tier1ChunkMinutes > 0 {
		db.chunkLen = min(cfg.Tier1ChunkMinutes, db.m)
	}
	if cfg.Dir == "" {
		close(db.done)
		db.publish()
		return db, nil
	}
	if err := os.MkdirAll(cfg.Dir, 0o700); err != nil {
		return nil, fmt.Errorf("store dir: %w", err)
	}
	db.path = filepath.Join(cfg.Dir, FileName)
	needCompact, err := db.load(time.Now())
	if err != nil {
		return nil, err
	}
	db.publish()
	if needCompact {
		if err := db.compact(); err != nil {
			return nil, err
		}
	} else if err := db.openAppend(); err != nil {
		return nil, err
	}
	go db.flusher()
	return db, nil
}

// Close closes the open minutes, writes them with everything pending,
// fsyncs and closes the file. Later calls return ErrClosed.
func (db *DB) Close() error {
	if !db.closed.CompareAndSwap(false, true) {
		return ErrClosed
	}
	close(db.stop)
	<-db.done
	for _, s := range db.allSeries() {
		s.mu.Lock()
		s.closeMinute()
		s.mu.Unlock()
	}
	err := db.flush()
	db.fileMu.Lock()
	defer db.fileMu.Unlock()
	if db.f != nil {
		if cerr := db.f.Close(); err == nil {
			err = cerr
		}
		db.f = nil
	}
	return err
}

func (db *DB) allSeries() []*lockedSeries {
	db.mu.RLock()
	defer db.mu.RUnlock()
	out := make([]*lockedSeries, 0, len(db.byID))
	for _, s := range db.byID {
		out = append(out, s)
	}
	return out
}

func (db *DB) lookup(id string) *lockedSeries {
	db.mu.RLock()
	s := db.byID[id]
	db.mu.RUnlock()
	return s
}

// Append stores one point per dimension at unix second t, values in Dims
// order (NaN = missing). t must be later than the chart's last point.
func (db *DB) Append(chartID string, t int64, values []float64) error {
	if db.closed.Load() {
		return ErrClosed
	}
	s := db.lookup(chartID)
	if s == nil {
		return fmt.Errorf("append %q: %w", chartID, ErrNotFound)
	}
	if t <= 0 {
		return fmt.Errorf("append %q: time %d is not a unix second", chartID, t)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(values) != s.ndims {
		return fmt.Errorf("append %q: %d values for %d dimensions", chartID, len(values), s.ndims)
	}
	if t <= s.last {
		return fmt.Errorf("append %q at %d (last %d): %w", chartID, t, s.last, ErrOld)
	}
	n1 := s.append(t, values)
	db.stored[0].Add(uint64(len(values)))
	db.stored[1].Add(uint64(n1))
	return nil
}

// PointsStored counts the points written to tier 0 (one per dimension per
// Append) and tier 1 (one per dimension with data per closed minute) since
// the store opened: what netdata.db_points_stored charts.
func (db *DB) PointsStored() (tier0, tier1 uint64) {
	return db.stored[0].Load(), db.stored[1].Load()
}
