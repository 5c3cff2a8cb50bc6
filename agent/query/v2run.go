package query

import (
	"errors"
	"math"
	"slices"
	"strings"
	"time"

	"peerdns/agent/store"
)

// ErrTimeout reports a v2 query that ran past its time budget.
var ErrTimeout = errors.New("query timeout")

// Label is one instance label.
type Label struct{ Key, Value string }

// V2Node is a node a v2 query can select.
type V2Node struct {
	GUID, NodeID, Hostname string
}

// InstanceAlert is one alert running on an instance (for the summary).
type InstanceAlert struct {
	Name   string
	Status string // CLEAR, WARNING, CRITICAL, or anything else (counted as other)
}

// V2Instance is one chart of one node. The caller lists every chart of
// every node; SelectV2 keeps those in scope and marks their dimensions.
type V2Instance struct {
	Node   int
	Chart  *store.ChartDef
	Labels []Label
	Alerts []InstanceAlert
	// Window is the stored data of the query window; the caller fills it
	// for the instances NeedsWindow names (nil: nothing stored).
	Window *store.Window
	// Err is set by the caller when reading the window failed: its
	// selected dimensions count as failed.
	Err error
}

// Point annotation bits of json2's result (Netdata's RRDR_VALUE_*).
const (
	PointEmpty   = 1 << 0 // no metric of the group had data
	PointReset   = 1 << 1 // a counter overflowed (never set: the store keeps rates)
	PointPartial = 1 << 2 // some metrics of the group had no data at this point
)

// Stat is Netdata's storage point: min, max, sum and count of values, and
// the anomalous share of them (Anomaly counts points, fractionally).
type Stat struct {
	Min, Max, Sum float64
	Count         int
	Anomaly       float64
}

func newStat() Stat { return Stat{Min: math.Inf(1), Max: math.Inf(-1)} }

func (s *Stat) add(v, anomalous float64) {
	if math.IsNaN(v) {
		return
	}
	s.Min = math.Min(s.Min, v)
	s.Max = math.Max(s.Max, v)
	s.Sum += v
	s.Count++
	s.Anomaly += anomalous
}

func (s *Stat) merge(o Stat) {
	if o.Count == 0 {
		return
	}
	s.Min = math.Min(s.Min, o.Min)
	s.Max = math.Max(s.Max, o.Max)
	s.Sum += o.Sum
	s.Count += o.Count
	s.Anomaly += o.Anomaly
}

// Avg is the mean (0 without values).
func (s Stat) Avg() float64 {
	if s.Count == 0 {
		return 0
	}
	return s.Sum / float64(s.Count)
}

// AnomalyRate is the anomalous share in percent.
func (s Stat) AnomalyRate() float64 {
	if s.Count == 0 {
		return 0
	}
	return s.Anomaly * 100 / float64(s.Count)
}

// Counts are Netdata's selected/excluded/queried/failed counts of an object.
type Counts struct{ Selected, Excluded, Queried, Failed int }

func (c *Counts) add(o Counts) {
	c.Selected += o.Selected
	c.Excluded += o.Excluded
	c.Queried += o.Queried
	c.Failed += o.Failed
}

// V2Metric is one dimension of one instance in scope.
type V2Metric struct {
	Inst, Dim int
	Selected  bool
	// Hidden: its instance is selected but the dimension is not (the
	// dimensions selector, or hidden by its collector). With
	// aggregation=percentage it is still read, as Netdata does, and its
	// values are its group's hidden part.
	Hidden  bool
	Queried bool // selected and had stored points
	Failed  bool
	Stat    Stat // over the view points
	Column  int  // output column, -1 when not selected
}

func (m *V2Metric) counts() Counts {
	switch {
	case !m.Selected:
		return Counts{Excluded: 1}
	case m.Failed:
		return Counts{Selected: 1, Failed: 1}
	case m.Queried:
		return Counts{Selected: 1, Queried: 1}
	}
	return Counts{Selected: 1}
}

// V2Target is what a v2 query covers: the nodes and instances in scope and
// every dimension of them, selected or excluded.
type V2Target struct {
	Req       *V2Request
	Nodes     []V2Node
	NodeInUse []bool // per node: in scope
	Instances []V2Instance
	Metrics   []V2Metric // instance order, then dimension order
	instStart []int      // per instance: its first metric; one more entry ends the last
	// Load, when set, reads instance i's window when RunV2 gets to it
	// (and RunV2 drops it after), so a query holds one instance's stored
	// points at a time instead of every instance's. A nil window is
	// "nothing stored"; an error marks the instance's metrics failed.
	Load func(i int) (*store.Window, error)
}

// instRange is the metrics of instance i: Metrics[a:b].
func (t *V2Target) instRange(i int) (a, b int) { return t.instStart[i], t.instStart[i+1] }

// v2Pattern is a Netdata simple pattern of a v2 selector: words separated
// by ',' or '|' (or a tab or line break, Netdata's web separators; a
// space belongs to the word), '*' wildcards, '!' negation, first match
// decides. A nil pattern matches everything.
type v2Pattern struct {
	words []patWord
	// groups are the indexes of words by their label key (labelWordKey),
	// in the order the keys first appear: matchLabels' groups, found once
	// at compile time instead of by rescanning the words per word and
	// per instance (quadratic in the words: 1,000 words took 1.7 s of
	// CPU per request).
	groups [][]int
}

// isV2Sep is Netdata's SIMPLE_PATTERN_DEFAULT_WEB_SEPARATORS.
func isV2Sep(r rune) bool {
	switch r {
	case ',', '|', '\t', '\r', '\n', '\f', '\v':
		return true
	}
	return false
}

func compileV2Pattern(s string) *v2Pattern {
	words := patternWords(s, isV2Sep)
	if words == nil {
		return nil
	}
	p := &v2Pattern{words: words}
	group := map[string]int{}
	for i, w := range words {
		key := labelWordKey(w.text)
		g, ok := group[key]
		if !ok {
			g = len(p.groups)
			group[key] = g
			p.groups = append(p.groups, nil)
		}
		p.groups[g] = append(p.groups[g], i)
	}
	return p
}

// match reports whether any of the names matches positively; a negative
// word matching any of them excludes.
func (p *v2Pattern) match(names ...string) bool {
	if p == nil {
		return true
	}
	for i := range p.words {
		w := &p.words[i]
		for _, n := range names {
			if n != "" && w.matches(n) {
				return !w.neg
			}
		}
	}
	return false
}

// matchLabels is Netdata's label selector (its pattern array): the
// words are grouped by their key, the text before ':'; an instance is
// selected when every key's group matches, and a group matches when the
// first of its words that matches one of the instance's "key:value"
// labels is positive ('!' excludes). So labels=a:1|a:2|b:x is
// (a:1 or a:2) and b:x. Netdata rebuilds each word from its parsed text,
// which drops a word's '*' and '!'; here they keep their meaning, as the
// contract documents simple patterns. A word without ':' is grouped on
// its own and matches an instance having a label key it matches.
func (p *v2Pattern) matchLabels(ls []Label) bool {
	if p == nil {
		return true
	}
	kvs := make([]string, len(ls))
	for i, l := range ls {
		kvs[i] = l.Key + ":" + l.Value
	}
	for _, g := range p.groups {
		if !p.matchLabelGroup(g, ls, kvs) {
			return false
		}
	}
	return true
}

// matchAlerts is Netdata's alerts selector of a data query: an instance
// is queried when one of its alerts matches by name or as name:STATUS
// (CLEAR, WARNING, CRITICAL, ...); a negative word matching an alert
// ends the search, as in query_target_match_alert_pattern.
func (p *v2Pattern) matchAlerts(as []InstanceAlert) bool {
	if p == nil {
		return true
	}
	for _, a := range as {
		for _, s := range [...]string{a.Name, a.Name + ":" + a.Status} {
			for i := range p.words {
				w := &p.words[i]
				if w.matches(s) {
					return !w.neg
				}
			}
		}
	}
	return false
}

// labelWordKey is the key a label selector word is grouped by.
func labelWordKey(w string) string {
	if k, _, ok := strings.Cut(w, ":"); ok {
		return k
	}
	return w
}

// matchLabelGroup evaluates one key's group of words (indexes into
// p.words) in order against the labels ls ("key:value" in kvs).
func (p *v2Pattern) matchLabelGroup(g []int, ls []Label, kvs []string) bool {
	for _, i := range g {
		w := &p.words[i]
		withValue := strings.Contains(w.text, ":")
		for j, l := range ls {
			var hit bool
			if withValue {
				hit = w.matches(kvs[j])
			} else {
				hit = w.matches(l.Key)
			}
			if hit {
				return !w.neg
			}
		}
	}
	return false
}

// SelectV2 resolves the scopes and selectors of req over all instances.
// Scope (scope_nodes, scope_contexts, ...; the selector itself when its
// scope is not given) decides what is listed; the selectors decide what
// is queried: dimensions in scope but not selected are "excluded" in the
// summary. Unknown names select nothing, which is an empty answer, not an
// error.
func SelectV2(req *V2Request, nodes []V2Node, all []V2Instance) *V2Target {
	t := &V2Target{Req: req, Nodes: nodes, NodeInUse: make([]bool, len(nodes))}
	orDefault := func(scope, sel string) *v2Pattern {
		if strings.TrimSpace(scope) != "" {
			return compileV2Pattern(scope)
		}
		return compileV2Pattern(sel)
	}
	scopeNodes := orDefault(req.ScopeNodes, req.Nodes)
	scopeCtx := orDefault(req.ScopeContexts, req.Contexts)
	scopeInst := compileV2Pattern(req.ScopeInstances)
	scopeLabels := compileV2Pattern(req.ScopeLabels)
	scopeDims := compileV2Pattern(req.ScopeDimensions)
	selNodes := compileV2Pattern(req.Nodes)
	selCtx := compileV2Pattern(req.Contexts)
	selInst := compileV2Pattern(req.Instances)
	selLabels := compileV2Pattern(req.Labels)
	selDims := compileV2Pattern(req.Dimensions)
	selAlerts := compileV2Pattern(req.Alerts)
	nodeIn := make([]bool, len(nodes))
	nodeSel := make([]bool, len(nodes))
	for i, n := range nodes {
		nodeIn[i] = scopeNodes.match(n.GUID, n.NodeID, n.Hostname)
		nodeSel[i] = nodeIn[i] && selNodes.match(n.GUID, n.NodeID, n.Hostname)
	}
	for _, in := range all {
		c := in.Chart
		if in.Node < 0 || in.Node >= len(nodes) || !nodeIn[in.Node] {
			continue
		}
		if !scopeCtx.match(c.Context) || !(scopeInst == nil || scopeInst.match(instanceNames(c, nodes[in.Node])...)) || !scopeLabels.matchLabels(in.Labels) {
			continue
		}
		instSel := nodeSel[in.Node] && selCtx.match(c.Context) && (selInst == nil || selInst.match(instanceNames(c, nodes[in.Node])...)) && selLabels.matchLabels(in.Labels) && selAlerts.matchAlerts(in.Alerts)
		ii := len(t.Instances)
		added := false
		for di := range c.Dims {
			d := &c.Dims[di]
			if !scopeDims.match(d.ID, d.Name) {
				continue
			}
			sel := instSel
			if sel {
				if selDims == nil {
					sel = !d.Hidden
				} else {
					sel = selDims.match(d.ID, d.Name)
				}
			}
			if !added {
				t.instStart = append(t.instStart, len(t.Metrics))
				t.Instances = append(t.Instances, in)
				t.NodeInUse[in.Node] = true
				added = true
			}
			t.Metrics = append(t.Metrics, V2Metric{Inst: ii, Dim: di, Selected: sel, Hidden: instSel && !sel, Column: -1})
		}
	}
	t.instStart = append(t.instStart, len(t.Metrics))
	return t
}

// instanceNames are the strings an instances selector is matched
// against, in Netdata's order: the chart's id and name, then
// id@machine_guid and name@hostname (how Netdata's v2 dashboards name an
// instance of one node), then id@node_id and id@hostname.
func instanceNames(c *store.ChartDef, n V2Node) []string {
	name := c.Name
	if name == "" {
		name = c.ID
	}
	names := []string{c.ID, name, c.ID + "@" + n.GUID, name + "@" + n.Hostname, c.ID + "@" + n.Hostname}
	if n.NodeID != "" {
		names = append(names, c.ID+"@"+n.NodeID)
	}
	return names
}

// NeedsWindow reports whether instance i has a selected dimension (only
// those are read from the store).
func (t *V2Target) NeedsWindow(i int) bool {
	a, b := t.instRange(i)
	pct := t.Req.groupAggregation() == AggPercentage
	for k := a; k < b; k++ {
		if t.Metrics[k].Selected || (pct && t.Metrics[k].Hidden) {
			return true
		}
	}
	return false
}

// Selected counts the selected metrics.
func (t *V2Target) Selected() int {
	n := 0
	for k := range t.Metrics {
		if t.Metrics[k].Selected {
			n++
		}
	}
	return n
}

// V2Column is one output dimension of a v2 query (one group).
type V2Column struct {
	ID, Name   string
	Units      string
	Priority   int
	Aggregated int                 // metrics in the group
	Labels     map[string][]string // label values of the group's instances (group-by-labels)
	rep        int                 // a member metric (its attributes key a second pass)
	DB         Stat                // merged stored-point statistics of the members
	View       Stat                // statistics of the column's output points
}

// V2Result is a computed v2 query: Rows() points (oldest first) of
// len(Columns) values; Anomaly holds each point's anomaly rate (percent),
// Flags its annotations, Counts how many metrics contributed.
type V2Result struct {
	Target  *V2Target
	Plan    Plan
	Columns []V2Column
	Values  []float64
	Anomaly []float64
	Flags   []uint8
	Counts  []uint32
	// Hidden is, with aggregation=percentage, each point's hidden part:
	// the sum of the group's hidden metrics (NaN: none had a value); nil
	// otherwise.
	Hidden []float64
	// DBPoints and Queries are per tier: stored points read and
	// instances queried.
	DBPoints [2]int
	Queries  [2]int
	Global   Stat
	// Folded counts the columns folded into "remaining" by the
	// cardinality limit; Cut is the largest |sum| among them.
	Folded int
	Cut    float64
}

// Rows is the number of output points.
func (r *V2Result) Rows() int {
	if len(r.Columns) == 0 {
		return 0
	}
	return len(r.Values) / len(r.Columns)
}

// labelValue is an instance's value of key, "[unset]" when it has none
// (Netdata's text for it).
func labelValue(ls []Label, key string) string {
	for _, l := range ls {
		if l.Key == key {
			return l.Value
		}
	}
	return "[unset]"
}

// groupKey is the id and name of the group metric m falls in.
func (t *V2Target) groupKey(m *V2Metric) (id, name string) {
	return t.groupKeyBy(m, t.Req.GroupBy, t.Req.GroupByLabels)
}

func (t *V2Target) groupKeyBy(m *V2Metric, g GroupBy, labels []string) (id, name string) {
	in := &t.Instances[m.Inst]
	c := in.Chart
	d := &c.Dims[m.Dim]
	dname := d.Name
	if dname == "" {
		dname = d.ID
	}
	if g&(GroupBySelected) != 0 {
		return "selected", "selected"
	}
	if g&GroupByPercentageOfInstance != 0 {
		// One group per instance, as Netdata's group-by key (its other
		// groupings are dropped).
		g = GroupByPercentageOfInstance
	}
	var ids, names []string
	if g&GroupByDimension != 0 {
		ids, names = append(ids, dname), append(names, dname)
	}
	if g&(GroupByInstance|GroupByPercentageOfInstance) != 0 {
		n := c.Name
		if n == "" {
			n = c.ID
		}
		// Netdata names an instance group id@machine_guid and
		// name@hostname (its v2 instance names), and by the plain id and
		// name when the node is a grouping of its own.
		if g&GroupByNode != 0 {
			ids, names = append(ids, c.ID), append(names, n)
		} else {
			ids, names = append(ids, c.ID+"@"+t.Nodes[in.Node].GUID), append(names, n+"@"+t.Nodes[in.Node].Hostname)
		}
	}
	if g&GroupByLabel != 0 {
		for _, k := range labels {
			v := labelValue(in.Labels, k)
			ids, names = append(ids, v), append(names, v)
		}
	}
	if g&GroupByNode != 0 {
		n := t.Nodes[in.Node]
		ids, names = append(ids, n.GUID), append(names, n.Hostname)
	}
	if g&GroupByContext != 0 {
		ids, names = append(ids, c.Context), append(names, c.Context)
	}
	if g&GroupByUnits != 0 {
		ids, names = append(ids, c.Units), append(names, c.Units)
	}
	return strings.Join(ids, ","), strings.Join(names, ",")
}

// RunV2 computes the query: every selected metric is grouped over time
// (time_group) into the plan's points, made absolute when the grouping
// mixes dimensions, then aggregated with the others of its group. It stops
// with ErrTimeout once deadline passes (zero: no deadline).
func RunV2(t *V2Target, plan Plan, deadline time.Time) (*V2Result, error) {
	req := t.Req
	res := &V2Result{Target: t, Plan: plan, Global: newStat()}
	colOf := map[string]int{}
	for k := range t.Metrics {
		m := &t.Metrics[k]
		if !m.Selected {
			continue
		}
		id, name := t.groupKey(m)
		ci, ok := colOf[id]
		if !ok {
			ci = len(res.Columns)
			colOf[id] = ci
			c := t.Instances[m.Inst].Chart
			res.Columns = append(res.Columns, V2Column{ID: id, Name: name, Units: c.Units, Priority: c.Priority, DB: newStat(), View: newStat(), rep: k})
		}
		m.Column = ci
		col := &res.Columns[ci]
		col.Aggregated++
		col.Priority = min(col.Priority, t.Instances[m.Inst].Chart.Priority)
		if req.Options&OptGroupByLabels != 0 {
			if col.Labels == nil {
				col.Labels = map[string][]string{}
			}
			for _, l := range t.Instances[m.Inst].Labels {
				if !slices.Contains(col.Labels[l.Key], l.Value) {
					col.Labels[l.Key] = append(col.Labels[l.Key], l.Value)
				}
			}
		}
	}
	ncol, rows := len(res.Columns), plan.Points
	if ncol == 0 {
		return res, nil
	}
	// The groups' rows, and one instance's rows at a time (below).
	widest, run := 0, 0
	for k := range t.Metrics {
		if k > 0 && t.Metrics[k].Inst != t.Metrics[k-1].Inst {
			run = 0
		}
		run++
		widest = max(widest, run)
	}
	if cols := max(ncol, widest); rows*cols > MaxAnswerCells {
		return nil, &TooLargeError{rows, cols}
	}
	// Running sums per group and point; min and max only when the
	// aggregation reads them (they would double the memory of a wide
	// query for nothing).
	sum := make([]float64, ncol*rows)
	var mn, mx []float64
	agg := req.groupAggregation()
	if agg == AggMin || agg == AggMax || agg == AggExtremes {
		mn = make([]float64, ncol*rows)
		mx = make([]float64, ncol*rows)
		for i := range mn {
			mn[i], mx[i] = math.Inf(1), math.Inf(-1)
		}
	}
	anom := make([]float64, ncol*rows)
	cnt := make([]uint32, ncol*rows)
	// aggregation=percentage: each hidden metric falls in the column of
	// its group (a group with no selected metric is not shown, so its
	// hidden part goes nowhere), and hid sums their values per point.
	var hid []float64
	hidCol := map[int]int{}
	if agg == AggPercentage {
		for k := range t.Metrics {
			m := &t.Metrics[k]
			if !m.Hidden {
				continue
			}
			id, _ := t.groupKey(m)
			if ci, ok := colOf[id]; ok {
				hidCol[k] = ci
			}
		}
		hid = make([]float64, ncol*rows)
		for i := range hid {
			hid[i] = math.NaN()
		}
	}
	abs := req.absolute()
	// v1's options=percentage: every metric as its share of its
	// instance's total at that point. Netdata drops the option when the
	// query has a percentage of the group (aggregation=percentage or
	// group_by=percentage-of-instance).
	pctInst := req.Options&OptPercentage != 0 && agg != AggPercentage && req.GroupBy&GroupBySelected == 0
	tier := 0
	if req.Tier == 1 {
		tier = 1
	}
	anomalyBit := req.Options&OptAnomalyBit != 0
	scale := 1.0
	if req.Resampling > plan.Step && req.TimeGroup == GroupAverage {
		scale = float64(req.Resampling) / float64(plan.Step)
	}
	var scratch []float64
	cond := parseCountIf(req.TimeGroupOptions)
	// One instance at a time: its metrics' values are kept until its
	// total is known (percentage-of-instance), then folded into the
	// groups, so memory is one instance's worth of rows, not the query's.
	var vals, anoms []float64
	var instTotal []float64
	for k := 0; k < len(t.Metrics); {
		inst := t.Metrics[k].Inst
		end := k
		for end < len(t.Metrics) && t.Metrics[end].Inst == inst {
			end++
		}
		if !deadline.IsZero() && time.Now().After(deadline) {
			return nil, ErrTimeout
		}
		in := &t.Instances[inst]
		if t.Load != nil && t.NeedsWindow(inst) {
			in.Window, in.Err = t.Load(inst)
		}
		nm := end - k
		vals = slices.Grow(vals[:0], nm*rows)[:nm*rows]
		anoms = slices.Grow(anoms[:0], nm*rows)[:nm*rows]
		if pctInst {
			instTotal = slices.Grow(instTotal[:0], rows)[:rows]
			clear(instTotal)
		}
		queried := false
		for j := k; j < end; j++ {
			m := &t.Metrics[j]
			hc, isHid := hidCol[j]
			if !m.Selected && !isHid {
				continue
			}
			if isHid {
				// A hidden metric's values only go to its group's
				// hidden part: no stats, counts or flags of its own.
				if in.Err != nil {
					continue
				}
				d := &in.Chart.Dims[m.Dim]
				slots := dimSlots(in.Window, d.ID, m.Dim)
				sm := smoothing{cond: cond}
				for r := 0; r < rows; r++ {
					v, n := groupValue(plan, in.Window, slots, r, req.TimeGroup, &scratch, &sm)
					if n == 0 || math.IsNaN(v) {
						continue
					}
					if scale != 1 {
						v *= scale
					}
					if abs {
						v = math.Abs(v)
					}
					i := r*ncol + hc
					if math.IsNaN(hid[i]) {
						hid[i] = 0
					}
					hid[i] += v
				}
				continue
			}
			if in.Err != nil {
				m.Failed = true
				continue
			}
			d := &in.Chart.Dims[m.Dim]
			slots := dimSlots(in.Window, d.ID, m.Dim)
			sm := smoothing{cond: cond}
			off := (j - k) * rows
			for r := 0; r < rows; r++ {
				v, n := groupValue(plan, in.Window, slots, r, req.TimeGroup, &scratch, &sm)
				res.DBPoints[tier] += n
				a := 0.0
				if n > 0 {
					m.Queried = true
					a = anomalyShare(plan, in.Window, slots, r)
					if anomalyBit {
						v = 100 * a
					} else if scale != 1 {
						v *= scale
					}
					if abs {
						v = math.Abs(v)
					}
				}
				vals[off+r], anoms[off+r] = v, a
				if pctInst && !math.IsNaN(v) {
					instTotal[r] += math.Abs(v)
				}
			}
			queried = queried || m.Queried
		}
		if queried {
			res.Queries[tier]++
		}
		for j := k; j < end; j++ {
			m := &t.Metrics[j]
			if !m.Selected || m.Failed {
				continue
			}
			m.Stat = newStat()
			off := (j - k) * rows
			for r := 0; r < rows; r++ {
				v, a := vals[off+r], anoms[off+r]
				if math.IsNaN(v) {
					continue
				}
				if pctInst {
					if instTotal[r] != 0 {
						v = v * 100 / instTotal[r]
					} else {
						v = 0
					}
				}
				m.Stat.add(v, a)
				i := r*ncol + m.Column
				sum[i] += v
				if mn != nil {
					mn[i] = math.Min(mn[i], v)
					mx[i] = math.Max(mx[i], v)
				}
				anom[i] += a
				cnt[i]++
			}
			res.Columns[m.Column].DB.merge(m.Stat)
			res.Global.merge(m.Stat)
		}
		if t.Load != nil {
			in.Window = nil
		}
		k = end
	}
	// The values and anomaly rates replace the sums in place.
	res.Values = sum
	res.Anomaly = anom
	res.Flags = make([]uint8, ncol*rows)
	res.Counts = cnt
	res.Hidden = hid
	raw := req.Options&OptRaw != 0
	for r := 0; r < rows; r++ {
		for c := 0; c < ncol; c++ {
			i := r*ncol + c
			n := cnt[i]
			if n == 0 {
				res.Values[i] = math.NaN()
				res.Flags[i] = PointEmpty
				continue
			}
			if int(n) < res.Columns[c].Aggregated {
				res.Flags[i] = PointPartial
			}
			var v float64
			switch agg {
			case AggMin:
				v = mn[i]
			case AggMax:
				v = mx[i]
			case AggSum:
				v = sum[i]
			case AggExtremes:
				v = mx[i]
				if math.Abs(mn[i]) > math.Abs(mx[i]) {
					v = mn[i]
				}
			case AggPercentage:
				// Netdata's percentage of the group: the selected part
				// over selected plus hidden; raw keeps the selected sum
				// (the hidden part is the point's hidden member).
				h := math.NaN()
				if hid != nil {
					h = hid[i]
				}
				switch {
				case raw:
					v = sum[i]
				case math.IsNaN(h):
					v = 100
				case sum[i]+h != 0:
					v = sum[i] * 100 / (sum[i] + h)
				}
			default:
				v = sum[i] / float64(n)
			}
			res.Values[i] = v
			res.Anomaly[i] = anom[i] * 100 / float64(n)
		}
	}
	if req.GroupBy2 != 0 {
		res.secondPass()
	}
	if req.Options&OptNonZero != 0 {
		res.dropZero()
	}
	if req.Cardinality > 0 && len(res.Columns) > req.Cardinality {
		res.fold(req.Cardinality)
	}
	for c := range res.Columns {
		col := &res.Columns[c]
		col.View = newStat()
		for r := 0; r < res.Rows(); r++ {
			i := r*len(res.Columns) + c
			col.View.add(res.Values[i], res.Anomaly[i]/100)
		}
	}
	return res, nil
}

// secondPass groups the first pass's groups again (group_by[1]): each
// group is keyed by the attributes of one of its metrics (the attributes
// the first pass grouped by are the same for all of them) and its points
// are combined with aggregation[1].
func (r *V2Result) secondPass() {
	t := r.Target
	req := t.Req
	ncol, rows := len(r.Columns), r.Rows()
	colOf := map[string]int{}
	var cols []V2Column
	of := make([]int, ncol)
	for c := range r.Columns {
		old := &r.Columns[c]
		id, name := t.groupKeyBy(&t.Metrics[old.rep], req.GroupBy2, req.GroupByLabels2)
		n, ok := colOf[id]
		if !ok {
			n = len(cols)
			colOf[id] = n
			cols = append(cols, V2Column{ID: id, Name: name, Units: old.Units, Priority: old.Priority, DB: newStat(), View: newStat(), rep: old.rep})
		}
		nc := &cols[n]
		nc.Aggregated += old.Aggregated
		nc.Priority = min(nc.Priority, old.Priority)
		nc.DB.merge(old.DB)
		for k, vs := range old.Labels {
			if nc.Labels == nil {
				nc.Labels = map[string][]string{}
			}
			for _, v := range vs {
				if !slices.Contains(nc.Labels[k], v) {
					nc.Labels[k] = append(nc.Labels[k], v)
				}
			}
		}
		of[c] = n
	}
	nc := len(cols)
	vals, an := make([]float64, rows*nc), make([]float64, rows*nc)
	fl, cn := make([]uint8, rows*nc), make([]uint32, rows*nc)
	members := make([]int, nc)
	for c := range r.Columns {
		members[of[c]]++
	}
	sum := make([]float64, nc)
	mn, mx := make([]float64, nc), make([]float64, nc)
	n := make([]int, nc)
	for row := 0; row < rows; row++ {
		clear(sum)
		clear(n)
		for i := range mn {
			mn[i], mx[i] = math.Inf(1), math.Inf(-1)
		}
		total := 0.0
		for c := 0; c < ncol; c++ {
			i := row*ncol + c
			v := r.Values[i]
			cn[row*nc+of[c]] += r.Counts[i]
			if math.IsNaN(v) {
				continue
			}
			g := of[c]
			sum[g] += v
			mn[g], mx[g] = math.Min(mn[g], v), math.Max(mx[g], v)
			an[row*nc+g] += r.Anomaly[i]
			n[g]++
			total += math.Abs(v)
		}
		for g := 0; g < nc; g++ {
			i := row*nc + g
			if n[g] == 0 {
				vals[i], fl[i] = math.NaN(), PointEmpty
				continue
			}
			if n[g] < members[g] {
				fl[i] = PointPartial
			}
			an[i] /= float64(n[g])
			switch req.Aggregation2 {
			case AggMin:
				vals[i] = mn[g]
			case AggMax:
				vals[i] = mx[g]
			case AggSum:
				vals[i] = sum[g]
			case AggExtremes:
				vals[i] = mx[g]
				if math.Abs(mn[g]) > math.Abs(mx[g]) {
					vals[i] = mn[g]
				}
			case AggPercentage:
				if total != 0 {
					vals[i] = sum[g] * 100 / total
				}
			default:
				vals[i] = sum[g] / float64(n[g])
			}
		}
	}
	r.Columns, r.Values, r.Anomaly, r.Flags, r.Counts = cols, vals, an, fl, cn
	// The hidden parts belong to the first pass's groups; the second
	// pass's own percentage is a share of the row, so none carry over.
	r.Hidden = nil
}

// dropZero removes the columns whose every point is zero or empty
// (options=nonzero); when every column is like that all are kept, as
// Netdata does.
func (r *V2Result) dropZero() {
	ncol, rows := len(r.Columns), r.Rows()
	var keep []int
	for c := 0; c < ncol; c++ {
		for row := 0; row < rows; row++ {
			if v := r.Values[row*ncol+c]; v != 0 && !math.IsNaN(v) {
				keep = append(keep, c)
				break
			}
		}
	}
	if len(keep) == 0 || len(keep) == ncol {
		return
	}
	nc := len(keep)
	cols := make([]V2Column, 0, nc)
	for _, c := range keep {
		cols = append(cols, r.Columns[c])
	}
	vals, an := make([]float64, rows*nc), make([]float64, rows*nc)
	fl, cn := make([]uint8, rows*nc), make([]uint32, rows*nc)
	var hid []float64
	if r.Hidden != nil {
		hid = make([]float64, rows*nc)
	}
	for row := 0; row < rows; row++ {
		for i, c := range keep {
			vals[row*nc+i], an[row*nc+i] = r.Values[row*ncol+c], r.Anomaly[row*ncol+c]
			fl[row*nc+i], cn[row*nc+i] = r.Flags[row*ncol+c], r.Counts[row*ncol+c]
			if hid != nil {
				hid[row*nc+i] = r.Hidden[row*ncol+c]
			}
		}
	}
	r.Columns, r.Values, r.Anomaly, r.Flags, r.Counts, r.Hidden = cols, vals, an, fl, cn, hid
}

// anomalyShare is the share of anomalous stored points in output row r.
func anomalyShare(p Plan, w *store.Window, slots []store.Agg, r int) float64 {
	if w == nil || len(slots) == 0 {
		return 0
	}
	step := w.Step
	if step <= 0 {
		step = p.Step
	}
	t0 := p.After + int64(r)*int64(p.Group)*p.Step
	i0 := max(floorDiv(t0-w.Start, step), 0)
	i1 := min(i0+int64(p.Group)*p.Step/step-1, int64(len(slots))-1)
	var a, n uint64
	for i := i0; i <= i1; i++ {
		a += uint64(slots[i].Anomalous)
		n += uint64(slots[i].Count)
	}
	if n == 0 {
		return 0
	}
	return float64(a) / float64(n)
}

// fold keeps the keep-1 columns with the largest |sum| over the view,
// largest first, and sums the others, point by point, into one column
// whose id and name are "remaining N dimensions", as Netdata's
// rrd2rrdr_cardinality_limit does. Its anomaly rate is the folded
// columns' mean (Netdata adds their rates up, which can pass 100 %).
func (r *V2Result) fold(keep int) {
	ncol, rows := len(r.Columns), r.Rows()
	type ranked struct {
		c   int
		vol float64
	}
	rk := make([]ranked, ncol)
	for c := 0; c < ncol; c++ {
		v := 0.0
		for row := 0; row < rows; row++ {
			if x := r.Values[row*ncol+c]; !math.IsNaN(x) {
				v += math.Abs(x)
			}
		}
		rk[c] = ranked{c, v}
	}
	slices.SortStableFunc(rk, func(a, b ranked) int {
		switch {
		case a.vol > b.vol:
			return -1
		case a.vol < b.vol:
			return 1
		}
		return a.c - b.c
	})
	kept := make([]int, 0, keep)
	for _, x := range rk[:keep-1] {
		kept = append(kept, x.c)
	}
	folded := rk[keep-1:]
	r.Folded = len(folded)
	for _, f := range folded {
		r.Cut = math.Max(r.Cut, f.vol)
	}
	restName := "remaining " + itoa(len(folded)) + " dimensions"
	rest := V2Column{ID: restName, Name: restName, DB: newStat()}
	cols := make([]V2Column, 0, keep)
	for _, c := range kept {
		cols = append(cols, r.Columns[c])
	}
	for _, f := range folded {
		c := &r.Columns[f.c]
		rest.Aggregated += c.Aggregated
		rest.DB.merge(c.DB)
		if rest.Units == "" {
			rest.Units, rest.Priority = c.Units, c.Priority
		}
	}
	cols = append(cols, rest)
	nc := len(cols)
	vals := make([]float64, rows*nc)
	an := make([]float64, rows*nc)
	fl := make([]uint8, rows*nc)
	cn := make([]uint32, rows*nc)
	var hid []float64
	if r.Hidden != nil {
		hid = make([]float64, rows*nc)
	}
	for row := 0; row < rows; row++ {
		for i, c := range kept {
			vals[row*nc+i] = r.Values[row*ncol+c]
			an[row*nc+i] = r.Anomaly[row*ncol+c]
			fl[row*nc+i] = r.Flags[row*ncol+c]
			cn[row*nc+i] = r.Counts[row*ncol+c]
			if hid != nil {
				hid[row*nc+i] = r.Hidden[row*ncol+c]
			}
		}
		if hid != nil {
			h := math.NaN()
			for _, f := range folded {
				if x := r.Hidden[row*ncol+f.c]; !math.IsNaN(x) {
					if math.IsNaN(h) {
						h = 0
					}
					h += x
				}
			}
			hid[row*nc+nc-1] = h
		}
		s, a, n, any := 0.0, 0.0, 0, false
		for _, f := range folded {
			i := row*ncol + f.c
			if v := r.Values[i]; !math.IsNaN(v) {
				s += v
				a += r.Anomaly[i]
				n++
				any = true
			}
			cn[row*nc+nc-1] += r.Counts[i]
		}
		if any {
			vals[row*nc+nc-1] = s
			an[row*nc+nc-1] = a / float64(n)
			if n < len(folded) {
				fl[row*nc+nc-1] = PointPartial
			}
		} else {
			vals[row*nc+nc-1] = math.NaN()
			fl[row*nc+nc-1] = PointEmpty
		}
	}
	r.Columns, r.Values, r.Anomaly, r.Flags, r.Counts, r.Hidden = cols, vals, an, fl, cn, hid
}

func itoa(n int) string {
	var b [20]byte
	i := len(b)
	if n == 0 {
		return "0"
	}
	for n > 0 {
		i--
		b[i] = byte('0' + n%10)
		n /= 10
	}
	return string(b[i:])
}

// NewV2Plan resolves the window of a v2 query: points 0 means every stored
// point of the window (at most MaxPoints), and time_resampling makes each
// point cover a whole number of resampling periods.
func NewV2Plan(req *V2Request, now, last, step int64) (Plan, error) {
	points := req.Points
	if points == 0 {
		points = MaxPoints
	}
	p, err := NewPlan(req.After, req.Before, points, req.Options&OptUnaligned != 0, now, 0, last, step)
	if err != nil || p.Points == 0 || req.Resampling <= step {
		return p, err
	}
	rg := int(req.Resampling / step)
	if p.Group%rg != 0 {
		g := (p.Group/rg + 1) * rg
		span := int64(p.Points*p.Group) * step
		n := int((span/step + int64(g) - 1) / int64(g))
		b := p.Before
		if req.Options&OptUnaligned == 0 {
			b = floorDiv(b, int64(g)*step) * int64(g) * step
		}
		p.Group, p.Points, p.Before = g, max(n, 1), b
		p.After = b - (int64(p.Points)*int64(g)-1)*step
	}
	return p, nil
}

// AsV1 is the result as a v1 Result with one column per group, so the
// v1 formats (json, csv, array, ...) render it.
func (r *V2Result) AsV1(format Format, callback string, tqx TQX) *Result {
	req := &Request{Format: format, Options: r.Target.Req.Options, Group: r.Target.Req.TimeGroup, Callback: callback, TQX: tqx, Tier: r.Target.Req.Tier}
	out := &Result{Plan: r.Plan, Request: req, Values: r.Values, DBPoints: r.DBPoints}
	for _, c := range r.Columns {
		out.Columns = append(out.Columns, Column{ID: c.ID, Name: c.Name})
		out.Latest = append(out.Latest, math.NaN())
	}
	if len(out.Columns) == 0 {
		out.Values = nil
	}
	return out
}

// MatchV2 matches names against a v2 selector (Netdata's simple pattern,
// '|' separated, '*' wildcards, '!' negation); "" or "*" matches all.
func MatchV2(pattern string, names ...string) bool {
	return compileV2Pattern(pattern).match(names...)
}

// MatcherV2 compiles a v2 selector once for matching many names (MatchV2
// compiles it at every call).
func MatcherV2(pattern string) func(names ...string) bool {
	return compileV2Pattern(pattern).match
}
