package query

import (
	"errors"
	"fmt"
	"math"
	"strings"

	"peerdns/agent/store"
)

// ErrNoMetrics reports that no dimension matched the query.
var ErrNoMetrics = errors.New("no metrics matched the query")

// MaxAnswerCells bounds the values one answer holds (points × columns):
// a window of days asked at one point a second over a wide chart is
// tens of millions of mostly null values, hundreds of megabytes to
// compute and write, whatever the store holds of it.
const MaxAnswerCells = 4 << 20

// TooLargeError is a query whose answer would hold more than
// MaxAnswerCells values.
type TooLargeError struct{ Points, Columns int }

func (e *TooLargeError) Error() string {
	return fmt.Sprintf("answer too large: %d points of %d columns is %d values (at most %d); ask for fewer points, a shorter window or fewer dimensions",
		e.Points, e.Columns, e.Points*e.Columns, MaxAnswerCells)
}

// MsgNoMetrics is Netdata's body for ErrNoMetrics (sic), answered with 404.
const MsgNoMetrics = "No metrics where matched to query."

// Series is one chart's input to a query: its definition, the window read
// from the store (nil when nothing was stored) and, optionally, the latest
// collected values in chart dimension order (for jsonwrap latest_values).
type Series struct {
	Chart  *store.ChartDef
	Window *store.Window
	Latest []float64
}

// Column is one output dimension.
type Column struct {
	Series  int    // index into the series slice
	Dim     int    // index into Chart.Dims
	ID      string // dimension id
	Name    string // display name (the label)
	ChartID string
}

// Result is a computed query: Points rows (oldest first) of len(Columns)
// values, NaN meaning null.
type Result struct {
	Plan     Plan
	Request  *Request
	Columns  []Column
	Values   []float64 // row-major: Values[row*len(Columns)+col]
	DBPoints [2]int    // stored points read, per tier
	Latest   []float64 // latest collected value per column (NaN when unknown)
}

// Rows is the number of output rows.
func (r *Result) Rows() int {
	if len(r.Columns) == 0 {
		return 0
	}
	return len(r.Values) / len(r.Columns)
}

// At is the value of row (oldest first) and column.
func (r *Result) At(row, col int) float64 { return r.Values[row*len(r.Columns)+col] }

// Run computes a query over the series with the plan. Columns are the
// visible dimensions of every series in order (or those the Dimensions
// pattern matches, hidden ones included); none matching is ErrNoMetrics.
func Run(req *Request, plan Plan, series []Series) (*Result, error) {
	res := &Result{Plan: plan, Request: req}
	pat := compileDimsPattern(req.Dimensions)
	for si, s := range series {
		for di := range s.Chart.Dims {
			d := &s.Chart.Dims[di]
			if pat == nil {
				if d.Hidden {
					continue
				}
			} else if !pat.match(d.ID, d.Name) {
				continue
			}
			name := d.Name
			if name == "" {
				name = d.ID
			}
			res.Columns = append(res.Columns, Column{Series: si, Dim: di, ID: d.ID, Name: name, ChartID: s.Chart.ID})
		}
	}
	if len(res.Columns) == 0 {
		return nil, ErrNoMetrics
	}
	ncol := len(res.Columns)
	if plan.Points*ncol > MaxAnswerCells {
		return nil, &TooLargeError{plan.Points, ncol}
	}
	res.Values = make([]float64, plan.Points*ncol)
	res.Latest = make([]float64, ncol)
	for c, col := range res.Columns {
		res.Latest[c] = math.NaN()
		if l := series[col.Series].Latest; col.Dim < len(l) {
			res.Latest[c] = l[col.Dim]
		}
	}
	var scratch []float64
	anomalyBit := req.Options&OptAnomalyBit != 0
	// With anomaly-bit the points are rates already: no percentage of
	// the chart's total.
	pct := req.Options&OptPercentage != 0 && !anomalyBit
	// totals are per series, per row (percentage only): the sum of every
	// dimension's value, grouped as the columns are, as Netdata divides
	// the row it grouped.
	var totals []float64
	if pct {
		totals = make([]float64, len(series)*plan.Points)
		for si, s := range series {
			for di := range s.Chart.Dims {
				slots := dimSlots(s.Window, s.Chart.Dims[di].ID, di)
				sm := smoothing{cond: parseCountIf(req.GroupOptions)}
				for r := 0; r < plan.Points; r++ {
					v, _ := groupValue(plan, s.Window, slots, r, req.Group, &scratch, &sm)
					if !math.IsNaN(v) {
						totals[si*plan.Points+r] += math.Abs(v)
					}
				}
			}
		}
	}
	tier := req.Tier
	if tier < 0 || tier > 1 {
		tier = 0
	}
	for c, col := range res.Columns {
		s := series[col.Series]
		slots := dimSlots(s.Window, col.ID, col.Dim)
		sm := smoothing{cond: parseCountIf(req.GroupOptions)}
		for r := 0; r < plan.Points; r++ {
			v, n := groupValue(plan, s.Window, slots, r, req.Group, &scratch, &sm)
			res.DBPoints[tier] += n
			if anomalyBit && !math.IsNaN(v) {
				v = 100 * anomalyShare(plan, s.Window, slots, r)
			}
			if pct && !math.IsNaN(v) {
				if t := totals[col.Series*plan.Points+r]; t != 0 {
					v = v * 100 / t
				} else {
					v = 0
				}
			}
			if req.Options&OptAbs != 0 {
				v = math.Abs(v)
			}
			res.Values[r*ncol+c] = v
		}
	}
	if req.Options&OptNonZero != 0 && plan.Points > 0 {
		res.dropZeroColumns()
	}
	return res, nil
}

// dropZeroColumns removes columns whose every value is zero or null; when
// all columns are like that Netdata keeps them all, and so do we.
func (r *Result) dropZeroColumns() {
	ncol, rows := len(r.Columns), r.Rows()
	keep := make([]bool, ncol)
	found := false
	for c := 0; c < ncol; c++ {
		for row := 0; row < rows; row++ {
			if v := r.Values[row*ncol+c]; v != 0 && !math.IsNaN(v) {
				keep[c] = true
				found = true
				break
			}
		}
	}
	if !found {
		return
	}
	cols := r.Columns[:0:0]
	latest := r.Latest[:0:0]
	for c := 0; c < ncol; c++ {
		if keep[c] {
			cols = append(cols, r.Columns[c])
			latest = append(latest, r.Latest[c])
		}
	}
	vals := make([]float64, 0, rows*len(cols))
	for row := 0; row < rows; row++ {
		for c := 0; c < ncol; c++ {
			if keep[c] {
				vals = append(vals, r.Values[row*ncol+c])
			}
		}
	}
	r.Columns, r.Latest, r.Values = cols, latest, vals
}

// dimSlots finds a dimension's slots in a window: at the chart index when
// the window lists dims in chart order (as store.Query returns them),
// else by id.
func dimSlots(w *store.Window, id string, idx int) []store.Agg {
	if w == nil {
		return nil
	}
	if idx < len(w.Dims) && idx < len(w.Slots) && w.Dims[idx] == id {
		return w.Slots[idx]
	}
	for i, d := range w.Dims {
		if d == id && i < len(w.Slots) {
			return w.Slots[i]
		}
	}
	return nil
}

// groupValue combines the slots of output row r; n is the number of stored
// points used. A group without data is NaN. sm carries ses/des state
// from row to row of one column (nil for other groupings).
func groupValue(p Plan, w *store.Window, slots []store.Agg, r int, g Group, scratch *[]float64, sm *smoothing) (float64, int) {
	if len(slots) == 0 || p.Group == 0 {
		return math.NaN(), 0
	}
	step := w.Step
	if step <= 0 {
		step = p.Step
	}
	t0 := p.After + int64(r)*int64(p.Group)*p.Step
	i0 := floorDiv(t0-w.Start, step)
	i1 := i0 + int64(p.Group)*p.Step/step - 1
	if i0 < 0 {
		i0 = 0
	}
	if i1 >= int64(len(slots)) {
		i1 = int64(len(slots)) - 1
	}
	if i0 > i1 {
		return math.NaN(), 0
	}
	var sum, mn, mx float64
	var cnt uint64
	n := 0
	mn, mx = math.Inf(1), math.Inf(-1)
	keep := g.needsValues()
	*scratch = (*scratch)[:0]
	for _, a := range slots[i0 : i1+1] {
		if a.Count == 0 {
			continue
		}
		n++
		sum += a.Sum
		cnt += uint64(a.Count)
		if a.Min < mn {
			mn = a.Min
		}
		if a.Max > mx {
			mx = a.Max
		}
		if keep {
			*scratch = append(*scratch, a.Sum/float64(a.Count))
		}
	}
	if n == 0 {
		return math.NaN(), 0
	}
	return combine(g, p, *scratch, mn, mx, sum, cnt, sm), n
}

// Pattern is a Netdata simple pattern: words separated by '|', ',' or
// space, '*' matches any run of characters, a leading '!' excludes, and the
// first word that matches decides. A nil *Pattern matches everything.
type Pattern struct {
	words []patWord
}

// CompilePattern parses a simple pattern; "" and "*" give nil (match all).
func CompilePattern(s string) *Pattern { return compilePattern(s) }

// Match reports whether either name matches; nil matches everything.
func (p *Pattern) Match(a, b string) bool {
	if p == nil {
		return true
	}
	return p.match(a, b)
}

type patWord struct {
	neg  bool
	text string
	// parts is text split at '*' (nil without one), split once when the
	// pattern is compiled: a selector is matched against every dimension
	// of every chart, and splitting per match made a 14 KB pattern of
	// 3,500 words cost a second of CPU per request.
	parts []string
}

// matches reports whether s matches the word's text ('*' any run of bytes).
func (w *patWord) matches(s string) bool {
	if w.parts == nil {
		return w.text == s
	}
	return globParts(w.parts, s)
}

func compilePattern(s string) *Pattern {
	words := patternWords(s, func(r rune) bool { return r == '|' || r == ',' || r == ' ' })
	if words == nil {
		return nil
	}
	return &Pattern{words: words}
}

// compileDimsPattern parses a v1 query's dimensions pattern: Netdata
// splits it at its web separators (isV2Sep: ',', '|', tabs and line
// breaks), not at spaces, so a dimension name with spaces ("reserved
// for root") is one word.
func compileDimsPattern(s string) *Pattern {
	words := patternWords(s, isV2Sep)
	if words == nil {
		return nil
	}
	return &Pattern{words: words}
}

// patternWords splits a simple pattern into its words (at isSep, each
// trimmed, '!' marking a negative one); nil for a pattern that matches
// everything ("", "*", or only separators).
func patternWords(s string, isSep func(rune) bool) []patWord {
	s = strings.TrimSpace(s)
	if s == "" || s == "*" {
		return nil
	}
	var words []patWord
	for _, w := range strings.FieldsFunc(s, isSep) {
		w = strings.TrimSpace(w)
		pw := patWord{}
		if strings.HasPrefix(w, "!") {
			pw.neg, w = true, w[1:]
		}
		if w == "" {
			continue
		}
		pw.text = w
		if strings.Contains(w, "*") {
			pw.parts = strings.Split(w, "*")
		}
		words = append(words, pw)
	}
	return words
}

func (p *Pattern) match(id, name string) bool {
	for i := range p.words {
		w := &p.words[i]
		if w.matches(id) || w.matches(name) {
			return !w.neg
		}
	}
	return false
}

// globMatch matches s against a pattern where '*' is any run of bytes.
func globMatch(pat, s string) bool {
	if !strings.Contains(pat, "*") {
		return pat == s
	}
	return globParts(strings.Split(pat, "*"), s)
}

// globParts is globMatch with the pattern already split at '*' (at
// least two parts).
func globParts(parts []string, s string) bool {
	if !strings.HasPrefix(s, parts[0]) {
		return false
	}
	s = s[len(parts[0]):]
	last := parts[len(parts)-1]
	for _, mid := range parts[1 : len(parts)-1] {
		i := strings.Index(s, mid)
		if i < 0 {
			return false
		}
		s = s[i+len(mid):]
	}
	return strings.HasSuffix(s, last)
}
