package weights

import (
	"math"
	"slices"

	"gonum.org/v1/gonum/stat"

	"peerdns/agent/health"
	"peerdns/agent/store"
)

// ks2 is the two-sample Kolmogorov–Smirnov statistic D between the
// baseline and highlight points (gonum's stat.KolmogorovSmirnov: the
// largest distance between the two empirical CDFs), with the asymptotic
// p-value in info. Weight = D, in [0, 1].
func ks2(base, high []float64) (float64, map[string]any, bool) {
	if len(base) < 2 || len(high) < 2 {
		return 0, nil, false
	}
	slices.Sort(base)
	slices.Sort(high)
	d := stat.KolmogorovSmirnov(base, nil, high, nil)
	n, m := float64(len(base)), float64(len(high))
	return d, map[string]any{
		"d": d, "p_value": ksPValue(d, n*m/(n+m)),
		"baseline_points": len(base), "highlight_points": len(high),
	}, true
}

// ksPValue is the asymptotic probability of a KS statistic at least d for
// an effective sample size en (Kolmogorov's distribution with Stephens'
// small-sample correction, Numerical Recipes' probks). gonum has the
// statistic but not its distribution.
func ksPValue(d, en float64) float64 {
	s := math.Sqrt(en)
	lambda := (s + 0.12 + 0.11/s) * d
	if lambda < 0.2 {
		return 1
	}
	sum, sign, prev := 0.0, 1.0, 0.0
	for j := 1; j <= 100; j++ {
		term := sign * 2 * math.Exp(-2*float64(j*j)*lambda*lambda)
		sum += term
		if math.Abs(term) <= 1e-10*math.Abs(sum) || math.Abs(term) <= 1e-8*prev {
			return min(max(sum, 0), 1)
		}
		sign = -sign
		prev = math.Abs(term)
	}
	return 1 // did not converge: no evidence either way
}

func meanSD(slots []store.Agg) (mean, sd float64, n int) {
	var sum float64
	for _, a := range slots {
		sum += a.Sum
		n += int(a.Count)
	}
	if n == 0 {
		return math.NaN(), math.NaN(), 0
	}
	mean = sum / float64(n)
	var ss float64
	for _, a := range slots {
		if a.Count == 0 {
			continue
		}
		v := a.Sum/float64(a.Count) - mean
		ss += v * v * float64(a.Count)
	}
	return mean, math.Sqrt(ss / float64(n)), n
}

// volume is Netdata's volume method made scale-aware: how far the
// highlight average moved from the baseline average, relative to the
// baseline's size (the larger of its |average| and its standard
// deviation, so a series around zero is not inflated), times the share of
// highlight points on the far side of the baseline average. A flat zero
// baseline gives just that share (Netdata's percentage of time).
func volume(base, high []store.Agg) (float64, map[string]any, bool) {
	havg, _, hn := meanSD(high)
	if hn == 0 {
		return 0, nil, false
	}
	bavg, bsd, bn := meanSD(base)
	if bn == 0 {
		bavg, bsd = 0, 0 // no baseline data: assume zero, as Netdata does
	}
	info := map[string]any{"baseline_average": bavg, "highlight_average": havg}
	if havg == bavg {
		info["percentage_of_time"] = 0.0
		return 0, info, true
	}
	far := 0
	for _, a := range high {
		if a.Count == 0 {
			continue
		}
		v := a.Sum / float64(a.Count)
		if (havg > bavg && v > bavg) || (havg < bavg && v < bavg) {
			far += int(a.Count)
		}
	}
	share := float64(far) / float64(hn)
	info["percentage_of_time"] = 100 * share
	scale := max(math.Abs(bavg), bsd)
	if scale == 0 {
		return share, info, true
	}
	return math.Abs(havg-bavg) / scale * share, info, true
}

// anomalyRate is the share of the highlight's points the detector flagged.
func anomalyRate(high []store.Agg) (float64, map[string]any, bool) {
	var anom, n uint64
	for _, a := range high {
		anom += uint64(a.Anomalous)
		n += uint64(a.Count)
	}
	if n == 0 {
		return 0, nil, false
	}
	r := float64(anom) / float64(n)
	return r, map[string]any{"anomalous_points": anom, "points": n, "anomaly_rate": 100 * r}, true
}

// value aggregates the highlight with the time group; weight = |value|.
// cv is the coefficient of variation in percent (stddev / |average|).
func value(high []store.Agg, g TimeGroup, scratch *[]float64) (float64, map[string]any, bool) {
	vals := (*scratch)[:0]
	mn, mx, sum := math.Inf(1), math.Inf(-1), 0.0
	n := 0
	for _, a := range high {
		if a.Count == 0 {
			continue
		}
		vals = append(vals, a.Sum/float64(a.Count))
		mn, mx = min(mn, a.Min), max(mx, a.Max)
		sum += a.Sum
		n += int(a.Count)
	}
	*scratch = vals
	if n == 0 {
		return 0, nil, false
	}
	mean, sd, _ := meanSD(high)
	var v float64
	switch g {
	case "average":
		v = mean
	case "min":
		v = mn
	case "max":
		v = mx
	case "sum":
		v = sum
	case "median":
		slices.Sort(vals)
		if len(vals)%2 == 1 {
			v = vals[len(vals)/2]
		} else {
			v = (vals[len(vals)/2-1] + vals[len(vals)/2]) / 2
		}
	case "stddev":
		v = sd
	default: // cv
		if mean == 0 {
			return 0, nil, false // undefined
		}
		v = 100 * sd / math.Abs(mean)
	}
	return math.Abs(v), map[string]any{"time_group": string(g), "value": v}, true
}

// severity ranks an alert status for the alerts method.
func severity(s health.Status) float64 {
	switch s {
	case health.StatusCritical:
		return 1
	case health.StatusWarning:
		return 0.5
	}
	return 0
}

// alertResults scores charts by their alerts. Without a window: the worst
// status raised now. With one: the worst status held at any time in the
// highlight (the status at its start and every transition inside it), a
// chart whose alerts only changed inside it scoring 0.25; each transition
// in the window adds 0.01 (up to 10) so busier charts rank higher.
func alertResults(alerts AlertSource, req Request, st *Stats) []Result {
	if alerts == nil {
		return nil
	}
	type chartScore struct {
		weight float64
		trans  int
		list   []map[string]any
		ctx    string
		family string
	}
	byChart := map[string]*chartScore{}
	get := func(a health.Alert) *chartScore {
		c := byChart[a.Chart]
		if c == nil {
			c = &chartScore{ctx: a.Context, family: a.Family}
			byChart[a.Chart] = c
		}
		return c
	}
	var trans []health.Transition
	if req.Window {
		trans = alerts.Transitions(0)
	}
	for _, a := range alerts.Alerts() {
		if !req.Charts.Match(a.Chart, a.Chart) || !req.Contexts.Match(a.Context, a.Context) {
			continue
		}
		st.Examined++
		worst := severity(a.Status)
		n := 0
		if req.Window {
			// The status at the start of the highlight: the newest
			// transition at or before After, else the current status if
			// it has not changed since.
			var at health.Status
			var atWhen int64 = -1
			worst = 0
			for _, t := range trans {
				if t.AlertID != a.ID {
					continue
				}
				switch {
				case t.When <= req.After && t.When > atWhen:
					at, atWhen = t.NewStatus, t.When
				case t.When > req.After && t.When <= req.Before:
					n++
					worst = max(worst, severity(t.NewStatus))
				}
			}
			if atWhen < 0 && a.LastStatusChange <= req.After {
				at = a.Status
			}
			worst = max(worst, severity(at))
			if worst == 0 && n > 0 {
				worst = 0.25
			}
		}
		if worst == 0 {
			continue
		}
		c := get(a)
		c.weight = max(c.weight, worst)
		c.trans += n
		c.list = append(c.list, map[string]any{"name": a.Name, "status": string(a.Status), "transitions": n})
	}
	var out []Result
	for chart, c := range byChart {
		out = append(out, Result{
			ID: chart, Chart: chart, Context: c.ctx, Family: c.family,
			Weight: c.weight + 0.01*float64(min(c.trans, 10)),
			Info:   map[string]any{"alerts": c.list},
		})
	}
	return out
}

// NetdataScores are the values Netdata 1.37 shows for the results in its
// own fields (the v1 contexts nesting): for ks2 and volume Netdata spreads
// the scores evenly over [0, 1) by rank, most changed lowest
// (spread_results_evenly in web/api/queries/weights.c); for the other
// methods the weight itself (anomaly-rate as a percentage).
func NetdataScores(method Method, results []Result) []float64 {
	out := make([]float64, len(results))
	switch method {
	case KS2, Volume:
		vals := make([]float64, len(results))
		for i, r := range results {
			vals[i] = r.Weight
		}
		slices.Sort(vals)
		vals = slices.Compact(vals)
		slot := 1 / float64(len(vals))
		for i, r := range results {
			// Index of the first unique value greater than this one.
			k, found := slices.BinarySearch(vals, r.Weight)
			if found {
				k++
			}
			out[i] = 1 - min(float64(k)*slot, 1)
		}
	case AnomalyRate:
		for i, r := range results {
			out[i] = 100 * r.Weight
		}
	default:
		for i, r := range results {
			out[i] = r.Weight
		}
	}
	return out
}
