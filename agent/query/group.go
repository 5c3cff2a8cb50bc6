package query

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
)

// Group is how the slots that fall into one output point are combined
// (Netdata's `group`, v2 `time_group`).
type Group uint8

// The groupings of Netdata 1.37's query engine. The numbered trimmed-mean
// and percentile variants follow these constants (see groupTable).
const (
	GroupAverage Group = iota
	GroupMin
	GroupMax
	GroupSum
	GroupMedian
	GroupIncrementalSum // last - first value of the group
	GroupStddev         // sample standard deviation
	GroupCV             // coefficient of variation: 100 * stddev / |mean|
	GroupSES            // single exponential smoothing
	GroupDES            // double exponential smoothing (Holt)
	GroupExtremes       // the value furthest from zero (max or min)
	GroupTrimmedMean    // mean without the lowest and highest 5%
	GroupPercentile     // the 95th percentile
)

type groupKind uint8

const (
	kindAverage groupKind = iota
	kindMin
	kindMax
	kindSum
	kindMedian
	kindIncrSum
	kindStddev
	kindCV
	kindSES
	kindDES
	kindExtremes
	kindTrimmed
	kindPercentile
	kindCountIf
)

// groupDef is one grouping: its Netdata name, how it is computed, its
// fraction (trimmed from each end, or the percentile) and other names
// Netdata accepts for it.
type groupDef struct {
	name    string
	kind    groupKind
	frac    float64
	aliases []string
}

// groupTable is indexed by Group. Netdata 1.37's names and aliases
// (web/api/queries/query.c api_v1_data_groups); countif, last, takes its
// condition from group_options (v1) or time_group_options (v2).
var groupTable = []groupDef{
	{"average", kindAverage, 0, []string{"avg", "mean"}},
	{"min", kindMin, 0, nil},
	{"max", kindMax, 0, nil},
	{"sum", kindSum, 0, nil},
	{"median", kindMedian, 0, nil},
	{"incremental-sum", kindIncrSum, 0, []string{"incremental_sum"}},
	{"stddev", kindStddev, 0, nil},
	{"cv", kindCV, 0, []string{"rsd", "coefficient-of-variation"}},
	{"ses", kindSES, 0, []string{"ema", "ewma"}},
	{"des", kindDES, 0, nil},
	{"extremes", kindExtremes, 0, nil},
	{"trimmed-mean", kindTrimmed, 0.05, []string{"trimmed_mean", "trimmed-mean5"}},
	{"percentile", kindPercentile, 0.95, []string{"percentile95"}},
	{"trimmed-mean1", kindTrimmed, 0.01, nil},
	{"trimmed-mean2", kindTrimmed, 0.02, nil},
	{"trimmed-mean3", kindTrimmed, 0.03, nil},
	{"trimmed-mean10", kindTrimmed, 0.10, nil},
	{"trimmed-mean15", kindTrimmed, 0.15, nil},
	{"trimmed-mean20", kindTrimmed, 0.20, nil},
	{"trimmed-mean25", kindTrimmed, 0.25, nil},
	{"percentile25", kindPercentile, 0.25, nil},
	{"percentile50", kindPercentile, 0.50, nil},
	{"percentile75", kindPercentile, 0.75, nil},
	{"percentile80", kindPercentile, 0.80, nil},
	{"percentile90", kindPercentile, 0.90, nil},
	{"percentile97", kindPercentile, 0.97, nil},
	{"percentile98", kindPercentile, 0.98, nil},
	{"percentile99", kindPercentile, 0.99, nil},
	{"countif", kindCountIf, 0, nil},
}

func (g Group) def() groupDef {
	if int(g) < len(groupTable) {
		return groupTable[g]
	}
	return groupTable[GroupAverage]
}

// String is the Netdata name of the grouping.
func (g Group) String() string { return g.def().name }

// ParseGroup reads a Netdata group name or alias (case-insensitive; ""
// is average); anything else is an error.
func ParseGroup(s string) (Group, error) {
	l := strings.ToLower(strings.TrimSpace(s))
	if l == "" {
		return GroupAverage, nil
	}
	for i, d := range groupTable {
		if l == d.name || slices.Contains(d.aliases, l) {
			return Group(i), nil
		}
	}
	if len(s) > 64 {
		s = s[:64] + "..."
	}
	return 0, fmt.Errorf("unknown group %q: use average, min, max, sum, median, incremental-sum, stddev, cv, ses, des, extremes, trimmed-mean[1-25], percentile[25-99] or countif", s)
}

// smoothing is the state of ses and des for one column: like Netdata's,
// it carries from one output point to the next, so each point is the
// smoothed level at the end of its group.
type smoothing struct {
	n            int
	level, trend float64
	cond         countIf // countif's condition
}

// countIf is countif's condition: the comparison and its target.
type countIf struct {
	op     string // "==", "!=", ">", ">=", "<", "<="
	target float64
}

// parseCountIf reads countif's options as Netdata does: an optional
// comparison ("=", "==", "!=", "<>", ">", ">=", "<", "<="; none is
// "==") then a number (none or unreadable is 0), spaces allowed around.
func parseCountIf(s string) countIf {
	s = strings.TrimSpace(s)
	c := countIf{op: "=="}
	for _, p := range []struct{ in, op string }{
		{"!=", "!="}, {"<>", "!="}, {"==", "=="}, {">=", ">="}, {"<=", "<="},
		{"!", "!="}, {"=", "=="}, {">", ">"}, {"<", "<"},
	} {
		if rest, ok := strings.CutPrefix(s, p.in); ok {
			c.op, s = p.op, rest
			break
		}
	}
	if v, err := strconv.ParseFloat(strings.TrimSpace(s), 64); err == nil && !math.IsNaN(v) {
		c.target = v
	}
	return c
}

func (c countIf) match(v float64) bool {
	switch c.op {
	case "!=":
		return v != c.target
	case ">":
		return v > c.target
	case ">=":
		return v >= c.target
	case "<":
		return v < c.target
	case "<=":
		return v <= c.target
	}
	return v == c.target
}

// smoothWindow is Netdata's max_window_size for ses/des: the smoothing
// window is the group size (or the points asked for, when every point is
// one slot), at most 15, and alpha = 2 / (window + 1).
const smoothWindow = 15

func smoothAlpha(p Plan) float64 {
	w := float64(p.Group)
	if p.Group <= 1 {
		w = float64(p.Points)
	}
	w = math.Min(math.Max(w, 1), smoothWindow)
	return 2 / (w + 1)
}

// combine reduces the values of one group (vals are per-slot averages in
// time order; mn and mx the slots' own extremes, which differ from the
// values' on tier 1; sum and cnt the totals) to the grouping's value.
func combine(g Group, p Plan, vals []float64, mn, mx, sum float64, cnt uint64, sm *smoothing) float64 {
	d := g.def()
	switch d.kind {
	case kindMin:
		return mn
	case kindMax:
		return mx
	case kindSum:
		return sum
	case kindExtremes:
		if math.Abs(mx) >= math.Abs(mn) {
			return mx
		}
		return mn
	case kindIncrSum:
		if len(vals) < 2 {
			return 0
		}
		return vals[len(vals)-1] - vals[0]
	case kindStddev, kindCV:
		if len(vals) < 2 {
			return 0
		}
		// Welford: one pass, no cancellation on large values.
		mean, m2 := 0.0, 0.0
		for i, v := range vals {
			delta := v - mean
			mean += delta / float64(i+1)
			m2 += delta * (v - mean)
		}
		sd := math.Sqrt(m2 / float64(len(vals)-1))
		if d.kind == kindStddev {
			return sd
		}
		if mean == 0 {
			return 0 // Netdata answers 0 where the ratio is not a number
		}
		// Over the mean's magnitude, as Netdata divides: a negative
		// dimension's spread is no less.
		return 100 * sd / math.Abs(mean)
	case kindSES:
		a := smoothAlpha(p)
		for _, v := range vals {
			if sm.n == 0 {
				sm.level = v
			}
			sm.level = a*v + (1-a)*sm.level
			sm.n++
		}
		return sm.level
	case kindDES:
		a := smoothAlpha(p)
		for _, v := range vals {
			// Holt's method with the usual start: the first two values
			// set the level and the trend, later ones update them.
			switch sm.n {
			case 0:
				sm.level, sm.trend = v, v
			case 1:
				sm.trend = v - sm.trend
				sm.level = v
			default:
				last := sm.level
				sm.level = a*v + (1-a)*(sm.level+sm.trend)
				sm.trend = a*(sm.level-last) + (1-a)*sm.trend
			}
			sm.n++
		}
		return sm.level
	case kindCountIf:
		// The percentage of the group's points that meet the condition.
		if len(vals) == 0 {
			return 0
		}
		m := 0
		for _, v := range vals {
			if sm.cond.match(v) {
				m++
			}
		}
		return float64(m) * 100 / float64(len(vals))
	case kindMedian, kindTrimmed, kindPercentile:
		slices.Sort(vals)
		n := len(vals)
		switch d.kind {
		case kindMedian:
			m := n / 2
			if n%2 == 1 {
				return vals[m]
			}
			return (vals[m-1] + vals[m]) / 2
		case kindPercentile:
			// Nearest rank: the smallest value with at least frac of the
			// values at or below it.
			i := int(math.Ceil(d.frac*float64(n))) - 1
			return vals[max(i, 0)]
		}
		cut := int(d.frac * float64(n))
		if n-2*cut <= 0 {
			cut = (n - 1) / 2
		}
		t, c := 0.0, 0
		for _, v := range vals[cut : n-cut] {
			t += v
			c++
		}
		return t / float64(c)
	}
	return sum / float64(cnt)
}

// needsValues reports whether combine reads the per-slot values.
func (g Group) needsValues() bool {
	switch g.def().kind {
	case kindAverage, kindMin, kindMax, kindSum, kindExtremes:
		return false
	}
	return true
}
