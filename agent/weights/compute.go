package weights

import (
	"cmp"
	"math"
	"slices"
	"time"

	"peerdns/agent/health"
	"peerdns/agent/ml"
	"peerdns/agent/store"
)

// Source is the store the weights read (*store.DB).
type Source interface {
	Charts() []*store.ChartDef
	Query(chartID string, tier int, after, before int64) (*store.Window, error)
}

// AlertSource is the alert engine the alerts method reads (*health.Engine).
type AlertSource interface {
	Alerts() []health.Alert
	Transitions(after uint64) []health.Transition
}

// Result is one scored dimension (or, for alerts, one chart).
type Result struct {
	// ID is "<chart>.<dimension>" (the chart id for alerts).
	ID              string
	Chart           string
	Dimension, Name string // "" for alerts
	Context, Family string
	// Weight: higher means more changed (see the package doc per method).
	Weight float64
	Info   map[string]any
}

// Stats count the work a query did (Netdata's statistics member).
type Stats struct {
	DBQueries     int
	DBPoints      [2]int // stored slots read, per tier
	ResultPoints  int    // grouped points compared
	Examined      int    // dimensions (charts for alerts) looked at
	Duration      time.Duration
	HighlightPts  int // points per dimension in the highlight (the largest seen): grouped for ks2, slots for volume
	BaselinePts   int
	GroupSlots    int // stored slots per grouped point
	TimedOutAfter time.Duration
}

// Answer is the result of a weights query.
type Answer struct {
	Request Request
	Results []Result // sorted by weight, highest first; at most Limit
	// Total is how many results there were before Limit.
	Total int
	// Partial is set when the time budget ran out before every chart
	// was examined.
	Partial bool
	Stats   Stats
}

// Compute runs a weights query. now is the clock (for the budget); the
// request's times are already absolute.
func Compute(src Source, alerts AlertSource, req Request, now func() time.Time) *Answer {
	start := now()
	ans := &Answer{Request: req}
	var deadline time.Time
	if req.Timeout > 0 {
		deadline = start.Add(req.Timeout)
	}
	if req.Method == Alerts {
		ans.Results = alertResults(alerts, req, &ans.Stats)
	} else {
		c := &chartScorer{req: req, stats: &ans.Stats}
		for _, def := range src.Charts() {
			if !deadline.IsZero() && now().After(deadline) {
				ans.Partial = true
				ans.Stats.TimedOutAfter = req.Timeout
				break
			}
			if !req.Charts.Match(def.ID, def.Name) || !req.Contexts.Match(def.Context, def.Context) {
				continue
			}
			// The detector's own charts sum up every other dimension, so
			// they move with any change and would crowd the top: only
			// when a filter names them.
			if def.Type == ml.ChartType && req.Charts == nil && req.Contexts == nil {
				continue
			}
			ans.Results = c.chart(src, def, ans.Results)
		}
	}
	slices.SortFunc(ans.Results, func(a, b Result) int {
		return cmp.Or(cmp.Compare(b.Weight, a.Weight), cmp.Compare(a.ID, b.ID))
	})
	ans.Total = len(ans.Results)
	if req.Limit > 0 && len(ans.Results) > req.Limit {
		ans.Results = ans.Results[:req.Limit]
	}
	ans.Stats.Duration = now().Sub(start)
	return ans
}

// chartScorer scores the dimensions of one chart at a time, reusing its
// scratch slices.
type chartScorer struct {
	req    Request
	stats  *Stats
	hv, bv []float64
}

// grouped averages runs of g slots into points (a run without data gives
// no point).
func grouped(dst []float64, slots []store.Agg, g int) []float64 {
	for i := 0; i < len(slots); i += g {
		sum, n := 0.0, 0
		for _, a := range slots[i:min(i+g, len(slots))] {
			sum += a.Sum
			n += int(a.Count)
		}
		if n > 0 {
			dst = append(dst, sum/float64(n))
		}
	}
	return dst
}

// stored counts the slots that hold a point.
func stored(slots []store.Agg) int {
	n := 0
	for _, a := range slots {
		if a.Count > 0 {
			n++
		}
	}
	return n
}

func (c *chartScorer) chart(src Source, def *store.ChartDef, out []Result) []Result {
	req := c.req
	// One read covers both windows: the baseline is usually right before
	// the highlight, but an explicit one may leave a gap, overlap it or
	// follow it. Methods that do not compare read the highlight alone.
	lo, hi := req.ReadWindow()
	w, err := src.Query(def.ID, req.Tier, lo+1, hi)
	if err != nil {
		return out
	}
	c.stats.DBQueries++
	hiLo, hiHi := w.SlotsIn(req.After, req.Before)
	baseLo, baseHi := w.SlotsIn(req.BaselineAfter, req.BaselineBefore)
	hiSlots := hiHi - hiLo
	g := max((hiSlots+req.Points-1)/max(req.Points, 1), 1)
	c.stats.GroupSlots = max(c.stats.GroupSlots, g)
	for d, dim := range def.Dims {
		if d >= len(w.Slots) || dim.Hidden && req.Dimensions == nil {
			continue // hidden dimensions only when asked for, as in data queries
		}
		if !req.Dimensions.Match(dim.ID, dim.Name) {
			continue
		}
		c.stats.Examined++
		slots := w.Slots[d]
		c.stats.DBPoints[req.Tier] += len(slots)
		base, high := slots[baseLo:baseHi], slots[hiLo:hiHi]
		weight, info, ok := c.score(base, high, g)
		if !ok || math.IsNaN(weight) || math.IsInf(weight, 0) {
			continue
		}
		out = append(out, Result{
			ID: def.ID + "." + dim.ID, Chart: def.ID, Dimension: dim.ID, Name: dim.Name,
			Context: def.Context, Family: def.Family, Weight: weight, Info: info,
		})
	}
	return out
}

// score is one dimension's weight under the request's method.
func (c *chartScorer) score(base, high []store.Agg, g int) (float64, map[string]any, bool) {
	switch c.req.Method {
	case KS2:
		c.hv = grouped(c.hv[:0], high, g)
		c.bv = grouped(c.bv[:0], base, g)
		c.stats.ResultPoints += len(c.hv) + len(c.bv)
		c.stats.HighlightPts = max(c.stats.HighlightPts, len(c.hv))
		c.stats.BaselinePts = max(c.stats.BaselinePts, len(c.bv))
		return ks2(c.bv, c.hv)
	case Volume:
		// Volume reads every slot, ungrouped: those are its points.
		c.stats.ResultPoints += 3
		c.stats.HighlightPts = max(c.stats.HighlightPts, stored(high))
		c.stats.BaselinePts = max(c.stats.BaselinePts, stored(base))
		return volume(base, high)
	case AnomalyRate:
		c.stats.ResultPoints++
		return anomalyRate(high)
	case Value:
		c.stats.ResultPoints++
		return value(high, c.req.TimeGroup, &c.hv)
	}
	return 0, nil, false
}
