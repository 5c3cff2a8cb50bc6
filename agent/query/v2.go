package query

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// GroupBy is what a v2 query groups its metrics by (Netdata's group_by,
// comma, pipe or space separated). Several bits combine: each distinct
// combination of their values is one output dimension.
type GroupBy uint16

// The v2 group_by values, in the order Netdata lists them.
const (
	GroupByDimension GroupBy = 1 << iota
	GroupByInstance
	GroupByLabel
	GroupByNode
	GroupByContext
	GroupByUnits
	GroupByPercentageOfInstance
	GroupBySelected
)

var groupByNames = []struct {
	g    GroupBy
	name string
}{
	{GroupBySelected, "selected"},
	{GroupByDimension, "dimension"},
	{GroupByInstance, "instance"},
	{GroupByPercentageOfInstance, "percentage-of-instance"},
	{GroupByLabel, "label"},
	{GroupByNode, "node"},
	{GroupByContext, "context"},
	{GroupByUnits, "units"},
}

// ParseGroupBy reads group_by. Unlike Netdata, which drops words it does
// not know, an unknown word is an error naming it: a dashboard that asks
// for "dimensions" (sic) gets told instead of a silently different chart.
func ParseGroupBy(s string) (GroupBy, error) {
	var g GroupBy
	for _, w := range strings.FieldsFunc(s, func(r rune) bool { return r == ',' || r == '|' || r == ' ' }) {
		found := false
		for _, n := range groupByNames {
			if w == n.name {
				g |= n.g
				found = true
			}
		}
		if !found {
			return 0, fmt.Errorf("unknown group_by %q: use dimension, instance, node, label, context, units, percentage-of-instance or selected (comma separated)", trimArg(w))
		}
	}
	return g, nil
}

// Names lists the group_by words in Netdata's order.
func (g GroupBy) Names() []string {
	var out []string
	if g&GroupBySelected != 0 {
		return []string{"selected"}
	}
	if g&GroupByPercentageOfInstance != 0 {
		return []string{"percentage-of-instance"}
	}
	for _, n := range []struct {
		g    GroupBy
		name string
	}{{GroupByDimension, "dimension"}, {GroupByInstance, "instance"}, {GroupByLabel, "label"},
		{GroupByNode, "node"}, {GroupByContext, "context"}, {GroupByUnits, "units"}} {
		if g&n.g != 0 {
			out = append(out, n.name)
		}
	}
	return out
}

// groupAggregation is the first pass's aggregation as RunV2 applies it:
// group_by=percentage-of-instance is Netdata's percentage of the group
// over one group per instance (the selected metrics over those plus the
// instance's hidden ones), whatever aggregation says.
func (r *V2Request) groupAggregation() Aggregation {
	if r.GroupBy&GroupByPercentageOfInstance != 0 && r.GroupBy&GroupBySelected == 0 {
		return AggPercentage
	}
	return r.Aggregation
}

// Aggregation combines the metrics of one group at one point (Netdata's
// aggregation).
type Aggregation uint8

// The v2 aggregations.
const (
	AggAverage Aggregation = iota
	AggMin
	AggMax
	AggSum
	AggPercentage
	AggExtremes
)

var aggNames = [...]string{"average", "min", "max", "sum", "percentage", "extremes"}

func (a Aggregation) String() string {
	if int(a) < len(aggNames) {
		return aggNames[a]
	}
	return "average"
}

// ParseAggregation reads aggregation ("avg" is average). Netdata falls
// back to average for an unknown name; this agent answers 400 naming it.
func ParseAggregation(s string) (Aggregation, error) {
	switch s {
	case "", "average", "avg":
		return AggAverage, nil
	}
	for i, n := range aggNames {
		if s == n {
			return Aggregation(i), nil
		}
	}
	return 0, fmt.Errorf("unknown aggregation %q: use average, min, max, sum, percentage or extremes", trimArg(s))
}

// The options only the v2 answer reads (Netdata's names).
const (
	OptMinimalStats  Options = 1 << (iota + 16) // minimal-stats: no per-object counts, versions, totals, agents, timings
	OptLongKeys                                 // long-json-keys: "selected" instead of "sl", ...
	OptRaw                                      // raw: sums and counts instead of averages and rates (for merging answers)
	OptGroupByLabels                            // group-by-labels: view.dimensions.labels
	OptDebug                                    // debug: the request echoed back
)

func parseV2Options(s string) Options {
	o := ParseOptions(s)
	for _, tok := range strings.FieldsFunc(s, func(r rune) bool { return r == '|' || r == ',' || r == ' ' }) {
		switch tok {
		case "minimal-stats", "minimal":
			o |= OptMinimalStats
		case "long-json-keys", "long-keys":
			o |= OptLongKeys
		case "raw":
			o |= OptRaw
		case "group-by-labels":
			o |= OptGroupByLabels
		case "debug", "plan":
			o |= OptDebug
		}
	}
	return o
}

// V2 limits (said in the package doc of the API).
const (
	// V2DefaultAfter is Netdata's v2 default window: the last 10 minutes.
	V2DefaultAfter = -600
	// MaxCardinality bounds cardinality_limit; larger values are clamped
	// (they would not limit anything a dashboard can draw).
	MaxCardinality = 10000
	// DefaultTimeout is the time budget of a v2 query without timeout=.
	DefaultTimeout = 5 * time.Second
	// MaxTimeout bounds timeout=; larger values are clamped.
	MaxTimeout = 60 * time.Second
	// MaxSelector bounds each selector (scope_*, nodes, contexts,
	// instances, dimensions, labels, alerts), as weights bounds its
	// filters: a pattern longer than this is a mistake, not a selection.
	MaxSelector = 4096
)

// V2Request is a parsed /api/v2|v3/data query.
type V2Request struct {
	ScopeNodes, ScopeContexts, ScopeInstances, ScopeLabels, ScopeDimensions string
	Nodes, Contexts, Instances, Dimensions, Labels, Alerts                  string

	GroupBy       GroupBy
	GroupByLabels []string
	Aggregation   Aggregation
	// Pass2 is Netdata's second group_by pass (group_by[1],
	// group_by_label[1], aggregation[1]): the groups of the first pass
	// grouped again. GroupBy2 is 0 without one.
	GroupBy2       GroupBy
	GroupByLabels2 []string
	Aggregation2   Aggregation
	TimeGroup      Group
	// TimeGroupOptions is kept for the debug echo; no grouping here reads it.
	TimeGroupOptions string
	Resampling       int64 // time_resampling seconds (0: none)

	After, Before int64
	Points        int // 0: every stored point of the window (at most MaxPoints)
	Tier          int
	TierSet       bool
	JSON2         bool   // format=json2 (the default)
	Format        Format // when not JSON2
	Options       Options
	Cardinality   int
	Timeout       time.Duration
	TimeoutMS     int
	Callback      string
	TQX           TQX
}

// ParseV2Request reads a v2/v3 data query with Netdata's v2 defaults
// (json2, the last 600 seconds, group by dimension, average). v1's chart
// and context are read as instances and contexts, so a v1 URL asked of
// /api/v2/data selects the same metrics. Every error names the argument
// and the value; callers answer it with 400.
func ParseV2Request(get Getter) (V2Request, error) {
	r := V2Request{After: V2DefaultAfter, JSON2: true, GroupBy: GroupByDimension, Timeout: DefaultTimeout}
	str := func(k string) string { v, _ := get(k); return v }
	r.ScopeNodes, r.ScopeContexts = str("scope_nodes"), str("scope_contexts")
	r.ScopeInstances, r.ScopeLabels, r.ScopeDimensions = str("scope_instances"), str("scope_labels"), str("scope_dimensions")
	r.Nodes, r.Contexts, r.Instances = str("nodes"), str("contexts"), str("instances")
	r.Dimensions, r.Labels, r.Alerts = str("dimensions"), str("labels"), str("alerts")
	if r.Contexts == "" {
		r.Contexts = str("context")
	}
	if r.Instances == "" {
		if c := str("chart"); c != "" {
			// v1's one chart: the scope too, so the summary lists that
			// chart and not every other one as excluded.
			r.Instances = c
			if r.ScopeInstances == "" {
				r.ScopeInstances = c
			}
		}
	}
	if r.Dimensions == "" {
		r.Dimensions = str("dimension")
	}
	for _, f := range []struct {
		name string
		v    string
	}{
		{"scope_nodes", r.ScopeNodes}, {"scope_contexts", r.ScopeContexts}, {"scope_instances", r.ScopeInstances},
		{"scope_labels", r.ScopeLabels}, {"scope_dimensions", r.ScopeDimensions}, {"nodes", r.Nodes},
		{"contexts", r.Contexts}, {"instances", r.Instances}, {"dimensions", r.Dimensions}, {"labels", r.Labels}, {"alerts", r.Alerts},
	} {
		// Every selector is matched against every instance or dimension:
		// bound it as weights bounds its filters.
		if len(f.v) > MaxSelector {
			return r, fmt.Errorf("%s is too long (%d bytes, at most %d)", f.name, len(f.v), MaxSelector)
		}
	}
	var err error
	gb := str("group_by")
	if gb == "" {
		gb = str("group_by[0]")
	}
	if gb != "" {
		if r.GroupBy, err = ParseGroupBy(gb); err != nil {
			return r, err
		}
	}
	gl := str("group_by_label")
	if gl == "" {
		gl = str("group_by_label[0]")
	}
	r.GroupByLabels = append(r.GroupByLabels, strings.FieldsFunc(gl, func(r rune) bool { return r == ',' || r == '|' || r == ' ' })...)
	if len(r.GroupByLabels) > 0 {
		r.GroupBy |= GroupByLabel
	}
	if r.GroupBy == 0 {
		r.GroupBy = GroupByDimension
	}
	if r.GroupBy&GroupByLabel != 0 && len(r.GroupByLabels) == 0 {
		return r, fmt.Errorf("group_by=label needs group_by_label (the label key to group by)")
	}
	if gb2 := str("group_by[1]"); gb2 != "" {
		if r.GroupBy2, err = ParseGroupBy(gb2); err != nil {
			return r, fmt.Errorf("group_by[1]: %w", err)
		}
		r.GroupByLabels2 = strings.FieldsFunc(str("group_by_label[1]"), func(r rune) bool { return r == ',' || r == '|' || r == ' ' })
		if len(r.GroupByLabels2) > 0 {
			r.GroupBy2 |= GroupByLabel
		}
		if r.GroupBy2&GroupByLabel != 0 && len(r.GroupByLabels2) == 0 {
			return r, fmt.Errorf("group_by[1]=label needs group_by_label[1] (the label key to group by)")
		}
		if r.Aggregation2, err = ParseAggregation(str("aggregation[1]")); err != nil {
			return r, fmt.Errorf("aggregation[1]: %w", err)
		}
	}
	ag := str("aggregation")
	if ag == "" {
		ag = str("aggregation[0]")
	}
	if r.Aggregation, err = ParseAggregation(ag); err != nil {
		return r, err
	}
	if s, ok := get("time_group"); ok {
		if r.TimeGroup, err = parseTimeGroup(s); err != nil {
			return r, err
		}
	} else if s, ok := get("group"); ok {
		if r.TimeGroup, err = parseTimeGroup(s); err != nil {
			return r, err
		}
	}
	r.TimeGroupOptions = str("time_group_options")
	if r.TimeGroupOptions == "" {
		r.TimeGroupOptions = str("group_options") // v1's name
	}
	if len(r.TimeGroupOptions) > 64 {
		return r, fmt.Errorf("time_group_options is longer than 64 bytes")
	}
	if s := str("time_resampling"); s != "" {
		n, err := strconv.ParseInt(strings.TrimSpace(s), 10, 64)
		if err != nil || n < 0 || n > 86400 {
			return r, fmt.Errorf("time_resampling must be 0 to 86400 seconds, got %q", trimArg(s))
		}
		r.Resampling = n
	}
	if s := str("after"); s != "" {
		if r.After, err = parseSeconds("after", s); err != nil {
			return r, err
		}
		if r.After == 0 {
			r.After = V2DefaultAfter
		}
	}
	if s := str("before"); s != "" {
		if r.Before, err = parseSeconds("before", s); err != nil {
			return r, err
		}
	}
	if s := str("points"); s != "" {
		n, err := strconv.ParseInt(strings.TrimSpace(s), 10, 64)
		if err != nil || n < 0 {
			return r, fmt.Errorf("points must be 0 (every point) or a positive integer, got %q", trimArg(s))
		}
		if n > MaxPoints {
			return r, fmt.Errorf("points must be at most %d, got %d", MaxPoints, n)
		}
		r.Points = int(n)
	}
	if s := strings.TrimSpace(str("tier")); s != "" {
		switch s {
		case "0":
			r.Tier, r.TierSet = 0, true
		case "1":
			r.Tier, r.TierSet = 1, true
		default:
			return r, fmt.Errorf("tier must be 0 or 1, got %q", trimArg(s))
		}
	}
	if s, ok := get("format"); ok && s != "" && s != "json2" {
		if r.Format, err = ParseFormat(s); err != nil {
			return r, fmt.Errorf("unknown format %q: use json2, %s", trimArg(s), strings.Join(formatNames[:], ", "))
		}
		r.JSON2 = false
	}
	r.Options = parseV2Options(str("options")) | OptJSONWrap
	cl := str("cardinality_limit")
	if cl == "" {
		if l := str("limit"); l != "" {
			n, err := strconv.Atoi(strings.TrimSpace(l))
			if err != nil || n < 0 {
				return r, fmt.Errorf("limit must be a non-negative integer, got %q", trimArg(l))
			}
			if n > 0 {
				cl = strconv.Itoa(n + 1) // Netdata: limit N is cardinality N+1 (the rest folded in one)
			}
		}
	}
	if cl != "" {
		n, err := strconv.Atoi(strings.TrimSpace(cl))
		if err != nil || n < 0 {
			return r, fmt.Errorf("cardinality_limit must be a non-negative integer, got %q", trimArg(cl))
		}
		r.Cardinality = min(n, MaxCardinality)
		if r.Cardinality == 1 {
			r.Cardinality = 2 // one kept, the rest folded: the least that still shows something
		}
	}
	if s := str("timeout"); s != "" {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n < 0 {
			return r, fmt.Errorf("timeout must be milliseconds (a non-negative integer), got %q", trimArg(s))
		}
		r.TimeoutMS = n
		if n > 0 {
			// Clamp before converting: n ms as a Duration overflows past
			// ~292 years and would wrap to a negative budget (an instant 504).
			r.Timeout = time.Duration(min(int64(n), MaxTimeout.Milliseconds())) * time.Millisecond
		}
	}
	if s := str("callback"); s != "" {
		if !jsName(s) {
			return r, fmt.Errorf("callback must be a JavaScript name ([A-Za-z0-9_$.], at most %d characters)", maxJSName)
		}
		r.Callback = s
	}
	if s := str("tqx"); s != "" {
		var v1 Request
		if err := v1.parseTQX(s); err != nil {
			return r, err
		}
		r.TQX = v1.TQX
		if v1.Callback != "" {
			r.Callback = v1.Callback
		}
	}
	return r, nil
}

func parseTimeGroup(s string) (Group, error) {
	g, err := ParseGroup(s)
	if err != nil {
		return 0, fmt.Errorf("unknown time_group %q: use average, min, max, sum, median, incremental-sum, stddev, cv, ses, des, extremes, trimmed-mean[1-25], percentile[25-99] or countif (with time_group_options)", trimArg(s))
	}
	return g, nil
}

// absolute reports whether values are made absolute before grouping, as
// Netdata does when the grouping mixes dimensions (anything but group by
// dimension) or percentages are asked.
func (r *V2Request) absolute() bool {
	if r.Options&(OptAbs|OptPercentage) != 0 {
		return true
	}
	return r.GroupBy&GroupByDimension == 0
}
