package store

import (
	"cmp"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
)

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

// Remove drops a chart and its data (a disk unplugged, an interface or a
// container gone), as Netdata drops an obsolete chart. Minutes of it not
// yet written to the tier-1 file are lost; minutes already written stay
// in the file until the next compaction and come back at the next Open.
// It reports whether the chart existed.
func (db *DB) Remove(id string) bool {
	db.mu.Lock()
	_, ok := db.byID[id]
	delete(db.byID, id)
	db.mu.Unlock()
	if ok {
		db.publish()
	}
	return ok
}
