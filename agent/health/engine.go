package health

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"math"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"peerdns/agent/store"
	istore "peerdns/internal/store"
)

// FileName is the transitions file inside the data dir (buntdb, via
// internal/store, fsynced once a second: a crash loses at most the last
// second of transitions).
const FileName = "health.db"

// MaxTransitions bounds the transition log (Netdata keeps 5 days by
// default; this keeps the newest MaxTransitions whatever their age).
const MaxTransitions = 10000

// Engine evaluates the built-in rules against the store and records every
// status change. Safe for concurrent use; mu guards the fields below it.
type Engine struct {
	db    *store.DB
	kv    *istore.DB // nil: transitions kept in memory only
	rules []*rule

	mu         sync.Mutex
	alerts     map[alertKey]*instance
	trans      []Transition // ascending UniqueID
	nextUID    uint64
	restored   map[alertKey]Transition // last persisted transition per alert
	persistErr error
	closed     bool
}

type alertKey struct{ name, chart string }

type instance struct {
	rule  *rule
	def   *store.ChartDef
	alert Alert
	next  int64 // unix second of the next evaluation
}

// New returns an engine over db. With dir set, transitions are kept in
// dir/health.db and reloaded: each alert starts from the status of its last
// recorded transition, so hysteresis and the log continue across restarts.
func New(db *store.DB, dir string) (*Engine, error) {
	if db == nil {
		return nil, errors.New("health: nil store")
	}
	e := &Engine{
		db: db, rules: builtinRules(),
		alerts:   map[alertKey]*instance{},
		restored: map[alertKey]Transition{},
		nextUID:  uint64(time.Now().Unix()), // Netdata's unique ids start at the start time too
	}
	if dir == "" {
		return e, nil
	}
	kv, err := istore.Open(filepath.Join(dir, FileName), istore.Options{})
	if err != nil {
		return nil, fmt.Errorf("health: %w", err)
	}
	e.kv = kv
	kvs, err := kv.List(trPrefix)
	if err != nil {
		kv.Close()
		return nil, fmt.Errorf("health: load transitions: %w", err)
	}
	for _, x := range kvs {
		var t Transition
		if err := decodeTransition(x.Value, &t); err != nil {
			continue // one damaged entry does not cost the log
		}
		e.trans = append(e.trans, t)
	}
	sort.Slice(e.trans, func(i, j int) bool { return e.trans[i].UniqueID < e.trans[j].UniqueID })
	for _, t := range e.trans {
		e.restored[alertKey{t.Name, t.Chart}] = t
		e.nextUID = max(e.nextUID, t.UniqueID+1)
	}
	return e, nil
}

// alertID is stable across restarts: a hash of rule name and chart.
func alertID(name, chart string) uint32 {
	h := fnv.New32a()
	h.Write([]byte(name))
	h.Write([]byte{0})
	h.Write([]byte(chart))
	return h.Sum32()
}

// Run evaluates the rules every second until ctx is done.
func (e *Engine) Run(ctx context.Context) {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		e.Evaluate(time.Now().Unix())
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// cpuNumber is Netdata's $load_cpu_number: the number of CPUs, at least 2.
func (e *Engine) cpuNumber() int {
	n := 0
	for _, c := range e.db.Charts() {
		if c.Context == "cpu.cpu" {
			n++
		}
	}
	if n == 0 {
		n = runtime.NumCPU()
	}
	return max(n, 2)
}

// Evaluate runs every rule whose time has come at unix second now. Run
// calls it every second; tests call it with their own clock.
func (e *Engine) Evaluate(now int64) {
	charts := e.db.Charts()
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		return
	}
	live := make(map[string]bool, len(charts))
	for _, def := range charts {
		live[def.ID] = true
		for _, r := range e.rules {
			if r.chart != def.ID && (r.context == "" || r.context != def.Context) {
				continue
			}
			k := alertKey{r.name, def.ID}
			in := e.alerts[k]
			if in == nil {
				in = e.newInstance(r, def, now)
				e.alerts[k] = in
			}
			in.def = def // a re-registered chart may have a new definition
		}
	}
	for k := range e.alerts {
		if !live[k.chart] {
			// The chart went away (an unmounted disk): its alerts go with
			// it, and start afresh if it returns.
			delete(e.alerts, k)
			delete(e.restored, k)
		}
	}
	type result struct {
		in  *instance
		def *store.ChartDef
		v   float64
	}
	var results []result
	for _, in := range e.alerts {
		if in.next <= now {
			results = append(results, result{in: in, def: in.def})
		}
	}
	e.mu.Unlock()
	// A stable order gives the transitions of one round stable ids.
	sort.Slice(results, func(i, j int) bool {
		a, b := results[i], results[j]
		return a.in.rule.name < b.in.rule.name || a.in.rule.name == b.in.rule.name && a.def.ID < b.def.ID
	})

	// Values are computed without e.mu: they query the store.
	for i := range results {
		results[i].v = results[i].in.rule.value(e, results[i].def, now)
	}

	var fresh []Transition
	e.mu.Lock()
	for _, r := range results {
		in, a := r.in, &r.in.alert
		cmp := r.v
		if in.rule.cmp != nil && !math.IsNaN(cmp) {
			cmp = in.rule.cmp(e, cmp)
		}
		st := in.rule.status(a.Status, cmp)
		if st != a.Status {
			t := Transition{
				UniqueID: e.nextUID, AlertID: a.ID, Name: a.Name, Chart: a.Chart, Context: a.Context, Family: a.Family,
				When: now, OldStatus: a.Status, NewStatus: st, OldValue: a.Value, NewValue: r.v,
				Units: a.Units, Info: a.Info,
			}
			e.nextUID++
			e.trans = append(e.trans, t)
			fresh = append(fresh, t)
			a.Status, a.LastStatusChange = st, now
		}
		a.Value, a.LastUpdated = r.v, now
		in.next = now + in.rule.every
	}
	var drop []Transition
	if len(e.trans) > MaxTransitions+MaxTransitions/10 {
		n := len(e.trans) - MaxTransitions
		drop = slices.Clone(e.trans[:n])
		e.trans = slices.Delete(e.trans, 0, n)
	}
	e.mu.Unlock()
	e.persist(fresh, drop)
}

func (e *Engine) newInstance(r *rule, def *store.ChartDef, now int64) *instance {
	a := Alert{
		ID: alertID(r.name, def.ID), Name: r.name, Chart: def.ID, Context: def.Context, Family: def.Family,
		Class: r.class, Component: r.component, Type: r.typ, Units: r.units, Info: r.info(def),
		Status: StatusUninitialized, Value: math.NaN(), Warn: r.warnExpr, Crit: r.critExpr,
		LastStatusChange: now, UpdateEvery: int(r.every),
		Calc: r.calc, LookupDimensions: r.lookupDims, LookupMethod: r.lookupMeth, LookupAfter: r.lookupAfter,
	}
	if r.lookupMeth != "" {
		a.LookupOptions = "unaligned"
	}
	if t, ok := e.restored[alertKey{r.name, def.ID}]; ok {
		a.Status, a.Value, a.LastStatusChange = t.NewStatus, t.NewValue, t.When
	}
	return &instance{rule: r, def: def, alert: a, next: now}
}

// Alerts returns a copy of every alert, sorted by name then chart.
func (e *Engine) Alerts() []Alert {
	e.mu.Lock()
	out := make([]Alert, 0, len(e.alerts))
	for _, in := range e.alerts {
		out = append(out, in.alert)
	}
	e.mu.Unlock()
	sort.Slice(out, func(i, j int) bool {
		if out[i].Name != out[j].Name {
			return out[i].Name < out[j].Name
		}
		return out[i].Chart < out[j].Chart
	})
	return out
}

// Transitions returns a copy of the recorded status changes with
// UniqueID > after, oldest first.
func (e *Engine) Transitions(after uint64) []Transition {
	e.mu.Lock()
	defer e.mu.Unlock()
	i := sort.Search(len(e.trans), func(i int) bool { return e.trans[i].UniqueID > after })
	return slices.Clone(e.trans[i:])
}

// PersistErr is the last error writing transitions to disk (nil when all
// writes succeeded). Transitions stay in memory either way.
func (e *Engine) PersistErr() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.persistErr
}

// Close stops evaluation and closes the transitions file.
func (e *Engine) Close() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return nil
	}
	e.closed = true
	if e.kv != nil {
		return e.kv.Close()
	}
	return nil
}

const trPrefix = "tr/"

func trKey(uid uint64) string { return fmt.Sprintf("%s%020d", trPrefix, uid) }

func (e *Engine) persist(fresh, drop []Transition) {
	if e.kv == nil || (len(fresh) == 0 && len(drop) == 0) {
		return
	}
	// e.mu is held so Close cannot close the file under the write.
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return
	}
	err := e.kv.Update(func(tx *istore.Tx) error {
		for _, t := range fresh {
			if err := tx.Set(trKey(t.UniqueID), encodeTransition(t)); err != nil {
				return err
			}
		}
		for _, t := range drop {
			if err := tx.Delete(trKey(t.UniqueID)); err != nil {
				return err
			}
		}
		return nil
	})
	e.persistErr = err
}

// storedTransition is a Transition as JSON: NaN values become null.
type storedTransition struct {
	Transition
	OldValue *float64 `json:"OldValue"`
	NewValue *float64 `json:"NewValue"`
}

func optFloat(v float64) *float64 {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return nil
	}
	return &v
}

func encodeTransition(t Transition) string {
	b, err := json.Marshal(storedTransition{Transition: t, OldValue: optFloat(t.OldValue), NewValue: optFloat(t.NewValue)})
	if err != nil { // only NaN/Inf can fail, and they are nulls here
		panic(fmt.Sprintf("encode transition: %v", err))
	}
	return string(b)
}

func decodeTransition(s string, t *Transition) error {
	var st storedTransition
	dec := json.NewDecoder(strings.NewReader(s))
	if err := dec.Decode(&st); err != nil {
		return err
	}
	*t = st.Transition
	t.OldValue, t.NewValue = math.NaN(), math.NaN()
	if st.OldValue != nil {
		t.OldValue = *st.OldValue
	}
	if st.NewValue != nil {
		t.NewValue = *st.NewValue
	}
	if t.UniqueID == 0 || t.Name == "" || t.Chart == "" {
		return errors.New("incomplete transition")
	}
	return nil
}
