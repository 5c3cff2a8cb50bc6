package store

import (
	"bufio"
	"cmp"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Defaults for a zero Config.
const (
	DefaultTier0Retention = time.Hour
	DefaultTier1Retention = 14 * 24 * time.Hour
)

// FileName is the tier-1 file inside Config.Dir.
const FileName = "tier1.dat"

// chunkMinutes is the length of a tier-1 chunk. The chunk being filled is
// unpacked (14 bytes a minute per dimension); earlier ones are packed.
// Six hours pack within a few percent of a whole day's chunk
// (BenchmarkTier1PackedDay) while the open chunk costs a quarter.
const chunkMinutes = 360

// flushEvery is how often closed minutes are written and fsynced. A crash
// loses at most this much of tier 1 (tier 0 is memory only by design).
const flushEvery = 10 * time.Second

// Further sentinel errors (additions to the contract).
var (
	// ErrOld reports a point not newer than the chart's last point.
	ErrOld = errors.New("point not newer than the last one")
	// ErrClosed reports use of a closed DB.
	ErrClosed = errors.New("store closed")
	// ErrBadRange reports after > before in a query.
	ErrBadRange = errors.New("after is later than before")
)

// series carries its own lock; see series.go for the data layout.
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

	closed atomic.Bool
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
	if cfg.Tier0Retention < time.Second {
		return nil, fmt.Errorf("tier 0 retention %v: must be at least 1s", cfg.Tier0Retention)
	}
	if cfg.Tier1Retention < time.Minute {
		return nil, fmt.Errorf("tier 1 retention %v: must be at least 1m", cfg.Tier1Retention)
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

// load replays the tier-1 file. It reports whether the file should be
// rewritten (damaged tail, or much larger than the data it still holds).
func (db *DB) load(now time.Time) (needCompact bool, err error) {
	f, err := os.Open(db.path)
	if errors.Is(err, os.ErrNotExist) {
		return true, nil // create it with a header
	}
	if err != nil {
		return false, fmt.Errorf("open tier-1 file: %w", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return false, fmt.Errorf("stat tier-1 file: %w", err)
	}
	corrupt, live, err := db.replay(bufio.NewReaderSize(f, 1<<16), now)
	if err != nil {
		return false, err
	}
	return corrupt || st.Size() > live*3/2+256<<10, nil
}

// replay decodes a tier-1 stream into db.byID. It returns whether the
// stream ended in a damaged record and how many bytes of it are still
// useful. Only a wrong header is an error.
func (db *DB) replay(r *bufio.Reader, now time.Time) (corrupt bool, live int64, err error) {
	var magic [len(fileMagic)]byte
	if _, err := io.ReadFull(r, magic[:]); err != nil {
		return true, 0, nil // empty or torn header: start over
	}
	if string(magic[:]) != fileMagic {
		return false, 0, fmt.Errorf("tier-1 file %s: not a peerdns tier-1 file", db.path)
	}
	cut := floorDiv(now.Unix(), minuteSecs) - int64(db.m) + 1
	byNum := map[uint32]*lockedSeries{}
	var payload []byte
	var acc []accum
	for {
		kind, p, n, err := readRecord(r, payload)
		if err == io.EOF {
			break
		}
		if err != nil {
			corrupt = true
			break
		}
		payload = p[:0]
		switch kind {
		case recChart:
			num, def, err := decodeChart(p)
			if err != nil {
				corrupt = true
				break
			}
			live += n
			if s := byNum[num]; s != nil {
				if s.sameDims(def) {
					s.def = def
				} else {
					s.reset(def)
				}
			} else {
				s := &lockedSeries{series: *newSeries(def, num, db.n, db.m, db.chunkLen)}
				s.persist = true
				byNum[num] = s
			}
			db.nextNum = max(db.nextNum, num+1)
		case recMinute:
			rec, err := decodeMinute(p, acc)
			if err != nil {
				corrupt = true
				break
			}
			acc = rec.acc
			s := byNum[rec.num]
			if s == nil || len(rec.acc) != s.ndims || rec.minute < cut {
				continue
			}
			live += n
			s.mergeMinute(rec.minute, rec.acc)
		default:
			corrupt = true
		}
		if corrupt {
			break
		}
	}
	for _, s := range byNum {
		s.pruneBefore(cut)
		s.sealOld()
		if s.t1Last < 0 {
			continue // nothing left in retention: forget the chart
		}
		s.defSent = true
		if old := db.byID[s.def.ID]; old == nil || old.num < s.num {
			db.byID[s.def.ID] = s
		}
	}
	return corrupt, live, nil
}

func (db *DB) openAppend() error {
	f, err := os.OpenFile(db.path, os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("open tier-1 file: %w", err)
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return fmt.Errorf("stat tier-1 file: %w", err)
	}
	db.fileMu.Lock()
	db.f, db.fileSize = f, st.Size()
	if db.compactSize == 0 {
		db.compactSize = st.Size()
	}
	db.fileMu.Unlock()
	return nil
}

// compact rewrites the tier-1 file from memory (every chart's definition
// and every minute in retention) and swaps it in with a rename.
func (db *DB) compact() error {
	db.fileMu.Lock()
	defer db.fileMu.Unlock()
	tmp := db.path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600)
	if err != nil {
		return fmt.Errorf("compact tier-1 file: %w", err)
	}
	w := bufio.NewWriterSize(f, 1<<16)
	size := int64(len(fileMagic))
	werr := func() error {
		if _, err := w.WriteString(fileMagic); err != nil {
			return err
		}
		var buf []byte
		for _, s := range db.allSeries() {
			s.mu.Lock()
			buf = appendChartRecord(buf[:0], s.num, s.def)
			s.defSent = true
			// Everything pending is already in the chunks written below.
			s.pending = s.pending[:0]
			if s.t1Last >= 0 {
				var vk int64
				var v *chunk
				for m := max(s.t1First, s.t1Cutoff()); m <= s.t1Last; m++ {
					key := floorDiv(m, int64(s.chunkLen))
					c := s.chunks[key]
					if c == nil {
						continue
					}
					if v == nil || vk != key {
						v, vk = c.view(), key
					}
					c = v
					buf, _ = appendChunkMinute(buf, s.num, m, c, s.ndims, s.chunkLen, int(m-key*int64(s.chunkLen)))
					if len(buf) > 1<<16 {
						if _, err := w.Write(buf); err != nil {
							s.mu.Unlock()
							return err
						}
						size += int64(len(buf))
						buf = buf[:0]
					}
				}
			}
			s.mu.Unlock()
			if _, err := w.Write(buf); err != nil {
				return err
			}
			size += int64(len(buf))
		}
		if err := w.Flush(); err != nil {
			return err
		}
		return f.Sync()
	}()
	if cerr := f.Close(); werr == nil {
		werr = cerr
	}
	if werr == nil {
		werr = os.Rename(tmp, db.path)
	}
	if werr != nil {
		os.Remove(tmp)
		return fmt.Errorf("compact tier-1 file: %w", werr)
	}
	syncDir(filepath.Dir(db.path))
	if db.f != nil {
		db.f.Close()
	}
	nf, err := os.OpenFile(db.path, os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		db.f = nil
		return fmt.Errorf("reopen tier-1 file: %w", err)
	}
	db.f, db.fileSize, db.compactSize = nf, size, size
	return nil
}

func syncDir(dir string) {
	if d, err := os.Open(dir); err == nil {
		d.Sync()
		d.Close()
	}
}

// flush writes every chart's pending records and fsyncs.
func (db *DB) flush() error {
	db.fileMu.Lock()
	defer db.fileMu.Unlock()
	if db.f == nil {
		return nil
	}
	db.wbuf = db.wbuf[:0]
	for _, s := range db.allSeries() {
		s.mu.Lock()
		db.wbuf = append(db.wbuf, s.pending...)
		s.pending = s.pending[:0]
		s.mu.Unlock()
	}
	if len(db.wbuf) == 0 {
		return nil
	}
	n, err := db.f.Write(db.wbuf)
	db.fileSize += int64(n)
	if err != nil {
		return fmt.Errorf("write tier-1 file: %w", err)
	}
	if err := db.f.Sync(); err != nil {
		return fmt.Errorf("sync tier-1 file: %w", err)
	}
	return nil
}

// flusher writes closed minutes every flushEvery and compacts the file
// once it has doubled since the last compaction (old minutes and charts
// out of retention are then dropped from disk).
func (db *DB) flusher() {
	defer close(db.done)
	t := time.NewTicker(flushEvery)
	defer t.Stop()
	for {
		select {
		case <-db.stop:
			return
		case <-t.C:
		}
		// Errors here are retried on the next tick; Close reports them.
		_ = db.flush()
		db.fileMu.Lock()
		grow := db.fileSize > 2*db.compactSize+1<<20
		db.fileMu.Unlock()
		if grow {
			_ = db.compact()
		}
	}
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

// checkDef validates a chart definition.
func checkDef(c *ChartDef) error {
	if c.ID == "" {
		return errors.New("chart id is empty")
	}
	if len(c.Dims) == 0 {
		return fmt.Errorf("chart %q has no dimensions", c.ID)
	}
	seen := make(map[string]bool, len(c.Dims))
	for _, d := range c.Dims {
		if d.ID == "" {
			return fmt.Errorf("chart %q has a dimension without id", c.ID)
		}
		if seen[d.ID] {
			return fmt.Errorf("chart %q repeats dimension %q", c.ID, d.ID)
		}
		seen[d.ID] = true
	}
	return nil
}

// normalize copies c and fills the defaults Netdata would show.
func normalize(c *ChartDef) *ChartDef {
	cp := *c
	cp.Dims = slices.Clone(c.Dims)
	if cp.Name == "" {
		cp.Name = cp.ID
	}
	if cp.Type == "" {
		cp.Type, _, _ = strings.Cut(cp.ID, ".")
	}
	if cp.Context == "" {
		cp.Context = cp.ID
	}
	if cp.UpdateEvery <= 0 {
		cp.UpdateEvery = 1
	}
	for i := range cp.Dims {
		d := &cp.Dims[i]
		if d.Name == "" {
			d.Name = d.ID
		}
		if d.Algorithm == "" {
			d.Algorithm = "absolute"
		}
		if d.Multiplier == 0 {
			d.Multiplier = 1
		}
		if d.Divisor == 0 {
			d.Divisor = 1
		}
	}
	return &cp
}

// Register adds a chart or replaces the definition of the chart with the
// same id. The store keeps its own copy, with empty Name, Type, Context,
// UpdateEvery, dimension names, algorithms, multipliers and divisors
// filled in. Replacing keeps the data when the dimension ids are the same
// and drops it otherwise.
func (db *DB) Register(c *ChartDef) error {
	if db.closed.Load() {
		return ErrClosed
	}
	if c == nil {
		return errors.New("register: nil chart")
	}
	if err := checkDef(c); err != nil {
		return fmt.Errorf("register: %w", err)
	}
	def := normalize(c)
	db.mu.Lock()
	s := db.byID[def.ID]
	if s == nil {
		s = &lockedSeries{series: *newSeries(def, db.nextNum, db.n, db.m, db.chunkLen)}
		s.persist = db.path != ""
		db.nextNum++
		db.byID[def.ID] = s
	}
	db.mu.Unlock()

	s.mu.Lock()
	if !s.sameDims(def) {
		s.reset(def)
	}
	changed := !s.defSent || !defEqual(s.def, def)
	s.def = def
	if changed && s.persist {
		s.pending = appendChartRecord(s.pending, s.num, def)
		s.defSent = true
	}
	s.mu.Unlock()
	db.publish()
	return nil
}

func defEqual(a, b *ChartDef) bool { return reflect.DeepEqual(a, b) }

// publish rebuilds the sorted chart list readers get from Charts.
func (db *DB) publish() {
	db.mu.RLock()
	list := make([]*lockedSeries, 0, len(db.byID))
	for _, s := range db.byID {
		list = append(list, s)
	}
	db.mu.RUnlock()
	defs := make([]*ChartDef, 0, len(list))
	for _, s := range list {
		s.mu.Lock()
		defs = append(defs, s.def)
		s.mu.Unlock()
	}
	slices.SortFunc(defs, func(a, b *ChartDef) int {
		return cmp.Or(cmp.Compare(a.Priority, b.Priority), strings.Compare(a.ID, b.ID))
	})
	db.sorted.Store(&defs)
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
	s.append(t, values)
	return nil
}

// Charts returns every chart sorted by Priority then ID. The slice and the
// definitions are shared: callers must not modify them.
func (db *DB) Charts() []*ChartDef {
	if p := db.sorted.Load(); p != nil {
		return *p
	}
	return nil
}

// Chart returns the definition of one chart.
func (db *DB) Chart(id string) (*ChartDef, bool) {
	s := db.lookup(id)
	if s == nil {
		return nil, false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.def, true
}

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
	s.mu.Lock()
	defer s.mu.Unlock()
	w := &Window{ChartID: chartID, Tier: tier, Dims: slices.Clone(s.dimIDs)}
	if tier == 0 {
		s.tier0Window(w, after, before)
	} else {
		s.tier1Window(w, after, before)
	}
	return w, nil
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
		values[d] = float64(s.vals[d*s.n+i])
	}
	return s.last, values, true
}

// Tier0BytesPerDim is the memory one dimension's tier-0 ring takes.
func (db *DB) tier0BytesPerDim() int { return db.n * 4 }

// Stats describes the store now.
func (db *DB) Stats() Stats {
	st := Stats{
		Dir:              db.cfg.Dir,
		Tier0Retention:   db.cfg.Tier0Retention,
		Tier1Retention:   db.cfg.Tier1Retention,
		Tier0BytesPerDim: db.tier0BytesPerDim(),
	}
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
	st.Tier1BytesPerDim = db.chunkLen*14 + int(perSlot*float64(db.m-db.chunkLen))
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
