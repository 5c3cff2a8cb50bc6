package ml

import (
	"hash/fnv"
	"log/slog"
	"math"
	"strings"
	"sync"
	"time"

	"peerdns/agent/store"
)

// Config of the detector; zero values get the defaults in New.
type Config struct {
	// GUID and Hostname name the detector's own charts the way Netdata
	// does: id anomaly_detection.<what>_on_<GUID>, name ..._on_<Hostname>.
	GUID, Hostname string
	// MinTrainSamples is how many feature vectors a dimension needs before
	// its first model (default 900: 15 minutes, Netdata's minimum).
	MinTrainSamples int
	// MaxTrainSeconds is the history a model is trained on (default one
	// hour, the default tier-0 retention; Netdata trains on up to 6 h).
	MaxTrainSeconds int
	// TrainEvery is how often each chart's models are retrained (default
	// 30 minutes, so a model is at most half its training window old).
	TrainEvery time.Duration
	// Percentile and Margin set the threshold on a point's distance:
	// median + Margin × (Percentile quantile − median) of the training
	// distances (defaults 0.99 and 1.5). A negative Percentile selects
	// Netdata 1.37's rule instead (0.99 of the range between the smallest
	// and largest training distance); see the package doc for why it is
	// not the default.
	Percentile float64
	Margin     float64
	// SampleEvery: k-means runs on every SampleEvery-th training vector
	// (default 5, Netdata's 20% sampling ratio).
	SampleEvery int
	// MaxIterations bounds k-means (default 100).
	MaxIterations int
	Log           *slog.Logger
}

func (c *Config) defaults() {
	if c.MinTrainSamples <= 0 {
		c.MinTrainSamples = 900
	}
	if c.MaxTrainSeconds <= 0 {
		c.MaxTrainSeconds = 3600
	}
	if c.TrainEvery <= 0 {
		c.TrainEvery = 30 * time.Minute
	}
	if c.Percentile == 0 {
		c.Percentile = 0.99
	}
	if c.Margin <= 0 {
		c.Margin = 1.5
	}
	if c.SampleEvery <= 0 {
		c.SampleEvery = 5
	}
	if c.MaxIterations <= 0 {
		c.MaxIterations = 100
	}
	if c.GUID == "" {
		c.GUID = "localhost"
	}
	if c.Hostname == "" {
		c.Hostname = "localhost"
	}
	if c.Log == nil {
		c.Log = slog.New(slog.DiscardHandler)
	}
}

// ChartType is the type (id prefix) of the detector's own charts; they are
// never themselves analysed.
const ChartType = "anomaly_detection"

// dimState is what the detector keeps per dimension: the last histLen raw
// values (a ring) and the model.
type dimState struct {
	hist    [histLen]float32
	run     int // finite values in a row ending at the newest
	trained bool
	flagged bool // the newest point was anomalous
	m       model
}

// chartState is the detector's state for one chart.
type chartState struct {
	def       *store.ChartDef // the definition the state was built for
	last      int64           // unix second of the newest point seen
	seen      int64           // unix second of the last tick the chart was listed
	pos       int             // next ring position
	dims      []dimState
	nextTrain int64 // unix second the chart is next due for training
	flags     []bool
}

// Stats is the detector's view of the last tick.
type Stats struct {
	Time      int64 // unix second of the tick (0: none yet)
	Total     int   // dimensions with a point this tick
	Trained   int   // of those, with a model
	Anomalous int   // of those, flagged
	// AnomalousDims are "chart.dimension" ids flagged this tick.
	AnomalousDims []string
	// Rate is Anomalous/Total in percent (0 when Total is 0).
	Rate float64
}

// Detector flags each new point of every chart as anomalous or not, marks
// it in the store and keeps two charts of its own. Tick is called once a
// second after collection, from one goroutine; Stats may be called from
// any.
type Detector struct {
	db     *store.DB
	cfg    Config
	p      trainParams
	charts map[string]*chartState
	dimDef *store.ChartDef
	rateDf *store.ChartDef
	reg    bool

	rows    []float32 // training scratch
	dists   []float64
	series  []float32
	feature [featLen]float32

	mu     sync.Mutex // guards the fields below
	stats  Stats
	events []Event // ring of the newest maxEvents (events.go)
	evHead int     // index of the oldest event once the ring is full
	seq    uint64
}

// New returns a detector over db.
func New(db *store.DB, cfg Config) *Detector {
	cfg.defaults()
	p := trainParams{sampleEvery: cfg.SampleEvery, maxIter: cfg.MaxIterations, percentile: cfg.Percentile, margin: cfg.Margin}
	if cfg.Percentile < 0 {
		p.percentile = 0
	}
	d := &Detector{db: db, cfg: cfg, p: p, charts: map[string]*chartState{}}
	d.dimDef, d.rateDf = chartDefs(cfg.GUID, cfg.Hostname)
	return d
}

// chartDefs are Netdata 1.37's anomaly detection charts (ml/Host.cc:
// updateDimensionsChart, updateRateChart).
func chartDefs(guid, host string) (dims, rate *store.ChartDef) {
	abs := func(id string, div int64) store.DimDef {
		return store.DimDef{ID: id, Name: id, Algorithm: "absolute", Multiplier: 1, Divisor: div}
	}
	dims = &store.ChartDef{
		ID: ChartType + ".dimensions_on_" + guid, Name: ChartType + ".dimensions_on_" + host,
		Type: ChartType, Context: ChartType + ".dimensions", Family: "dimensions",
		Title: "Anomaly detection dimensions", Units: "dimensions", ChartType: "line",
		Plugin: "netdata", Module: "ml", Priority: 39183, UpdateEvery: 1,
		Dims: []store.DimDef{abs("total", 1), abs("trained", 1), abs("normal", 1), abs("anomalous", 1)},
	}
	// Netdata collects the rate times 10000 with divisor 100; the store
	// keeps converted values, so the percentage is stored as is.
	rate = &store.ChartDef{
		ID: ChartType + ".anomaly_rate_on_" + guid, Name: ChartType + ".anomaly_rate_on_" + host,
		Type: ChartType, Context: ChartType + ".anomaly_rate", Family: "anomaly_rate",
		Title: "Percentage of anomalous dimensions", Units: "percentage", ChartType: "line",
		Plugin: "netdata", Module: "ml", Priority: 39184, UpdateEvery: 1,
		Dims: []store.DimDef{abs("anomaly_rate", 100)},
	}
	return dims, rate
}

// Charts returns the ids of the detector's own charts (dimensions, rate).
func (d *Detector) Charts() (dimensions, anomalyRate string) { return d.dimDef.ID, d.rateDf.ID }

// Stats returns the counts of the last tick.
func (d *Detector) Stats() Stats {
	d.mu.Lock()
	defer d.mu.Unlock()
	s := d.stats
	s.AnomalousDims = append([]string(nil), s.AnomalousDims...)
	return s
}

// phase spreads the charts' training over TrainEvery: a chart's retraining
// falls at a fixed offset of the period, taken from its id.
func (d *Detector) phase(id string) int64 {
	h := fnv.New32a()
	h.Write([]byte(id))
	return int64(h.Sum32()) % max(int64(d.cfg.TrainEvery/time.Second), 1)
}

// Tick runs detection on the newest point of every chart (those stored at
// sec; charts without a new point are skipped), marks anomalous points in
// the store, trains at most one due chart, and appends the detector's
// charts at sec.
func (d *Detector) Tick(sec int64) {
	if !d.reg {
		for _, def := range []*store.ChartDef{d.dimDef, d.rateDf} {
			if err := d.db.Register(def); err != nil {
				d.cfg.Log.Warn("register anomaly chart", "chart", def.ID, "err", err)
				return
			}
		}
		d.reg = true
	}
	st := Stats{Time: sec}
	trainedOne := false
	for _, def := range d.db.Charts() {
		if skipChart(def) {
			continue
		}
		cs := d.charts[def.ID]
		if cs == nil || cs.def != def {
			if cs == nil || !sameDims(cs.def, def) {
				cs = &chartState{def: def, dims: make([]dimState, len(def.Dims)), flags: make([]bool, len(def.Dims))}
				cs.nextTrain = sec + int64(d.cfg.MinTrainSamples+histLen) + d.phase(def.ID)%60
				d.charts[def.ID] = cs
			}
			cs.def = def
		}
		cs.seen = sec
		t, vals, ok := d.db.Latest(def.ID)
		if !ok || t <= cs.last || len(vals) != len(cs.dims) {
			continue
		}
		gap := cs.last != 0 && t != cs.last+1
		cs.last = t
		any := false
		for i := range cs.dims {
			ds := &cs.dims[i]
			v := float32(vals[i])
			if gap {
				ds.run = 0
			}
			ds.hist[cs.pos] = v
			cs.flags[i] = false
			was := ds.flagged
			ds.flagged = false
			if v != v || math.IsInf(float64(v), 0) {
				ds.run = 0
				continue
			}
			ds.run++
			st.Total++
			if !ds.trained {
				continue
			}
			st.Trained++
			if ds.run < histLen {
				continue
			}
			d.featureFrom(ds, cs.pos)
			if dist := ds.m.distance(d.feature[:]); dist > float64(ds.m.threshold) {
				cs.flags[i] = true
				ds.flagged = true
				any = true
				st.Anomalous++
				st.AnomalousDims = append(st.AnomalousDims, def.ID+"."+def.Dims[i].ID)
				if !was {
					// A constant metric's threshold is 0: keep the score
					// finite (JSON has no infinity).
					score := dist / max(float64(ds.m.threshold), 1e-9)
					d.record(Event{Time: t, Chart: def.ID, Context: def.Context, Dimension: def.Dims[i].ID,
						Name: def.Dims[i].Name, Value: vals[i], Score: score})
				}
			}
		}
		cs.pos = (cs.pos + 1) % histLen
		if any {
			if _, err := d.db.MarkAnomalous(def.ID, t, cs.flags); err != nil {
				d.cfg.Log.Debug("mark anomalies", "chart", def.ID, "err", err)
			}
		}
		if !trainedOne && t >= cs.nextTrain {
			d.trainChart(cs, t)
			trainedOne = true
		}
	}
	if st.Total > 0 {
		st.Rate = 100 * float64(st.Anomalous) / float64(st.Total)
	}
	if sec%600 == 0 {
		// Forget charts no longer listed (a network interface gone).
		for id, cs := range d.charts {
			if cs.seen < sec-600 {
				delete(d.charts, id)
			}
		}
	}
	d.mu.Lock()
	d.stats = st
	d.mu.Unlock()
	d.appendOwn(sec, st)
}

// skipChart: the detector's own charts, and the agent's own netdata.*
// charts (Netdata's default "charts to skip from training").
func skipChart(def *store.ChartDef) bool {
	return def.Type == ChartType || def.Type == "netdata" ||
		strings.HasPrefix(def.ID, ChartType+".") || strings.HasPrefix(def.ID, "netdata.")
}

func sameDims(a, b *store.ChartDef) bool {
	if len(a.Dims) != len(b.Dims) {
		return false
	}
	for i := range a.Dims {
		if a.Dims[i].ID != b.Dims[i].ID {
			return false
		}
	}
	return true
}

// featureFrom builds the feature of the newest value (at ring position
// pos) into d.feature.
func (d *Detector) featureFrom(ds *dimState, pos int) {
	var h [histLen]float32
	for k := 0; k < histLen; k++ {
		h[k] = ds.hist[(pos+1+k)%histLen] // oldest first
	}
	featureOf(&d.feature, h[:])
}

// trainChart fits new models for every dimension of a chart from its last
// MaxTrainSeconds of tier 0 and schedules the next training.
func (d *Detector) trainChart(cs *chartState, now int64) {
	// The next training falls on the chart's own phase of the period, at
	// least half a period away: after the first round (all charts become
	// trainable together) retraining spreads over the whole period.
	period := max(int64(d.cfg.TrainEvery/time.Second), 1)
	base := now + period/2
	next := base - base%period + d.phase(cs.def.ID)
	if next <= base {
		next += period
	}
	cs.nextTrain = next
	// One dimension at a time into the detector's own buffer: a window of
	// the whole chart would hold every dimension's hour at once.
	short := false
	for i := range cs.dims {
		var ndims int
		var err error
		d.series, _, ndims, err = d.db.Tier0ValuesFor(store.ReadML, cs.def.ID, i, now-int64(d.cfg.MaxTrainSeconds)+1, now, d.series[:0])
		if err != nil || ndims != len(cs.dims) {
			return
		}
		var n int
		d.rows, n = features(d.rows[:0], d.series)
		if n < d.cfg.MinTrainSamples {
			// Retry soon only when the history held is too short yet; a
			// dimension short of vectors in a long enough history (gaps, a
			// key never collected) waits for the period like the rest.
			short = short || len(d.series) < d.cfg.MinTrainSamples+histLen-1
			continue
		}
		cs.dims[i].m, d.dists = train(d.rows, n, d.p, d.dists)
		cs.dims[i].trained = true
	}
	if short {
		// Not enough history yet: try again in a minute.
		cs.nextTrain = min(cs.nextTrain, now+60)
	}
}

// appendOwn stores the detector's charts for second sec.
func (d *Detector) appendOwn(sec int64, st Stats) {
	dims := []float64{float64(st.Total), float64(st.Trained), float64(st.Total - st.Anomalous), float64(st.Anomalous)}
	if err := d.db.Append(d.dimDef.ID, sec, dims); err != nil {
		d.cfg.Log.Debug("append anomaly chart", "err", err)
	}
	if err := d.db.Append(d.rateDf.ID, sec, []float64{st.Rate}); err != nil {
		d.cfg.Log.Debug("append anomaly chart", "err", err)
	}
}
