package weights

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"peerdns/agent/query"
)

// Method is how a dimension's change is scored.
type Method string

// The methods of /api/vN/weights.
const (
	Volume      Method = "volume"
	KS2         Method = "ks2"
	AnomalyRate Method = "anomaly-rate"
	Value       Method = "value"
	Alerts      Method = "alerts"
)

// TimeGroup is the aggregation of the value method.
type TimeGroup string

// The aggregations of the value method (Netdata's time_group names).
var timeGroups = []TimeGroup{"cv", "average", "min", "max", "sum", "median", "stddev"}

// Defaults and bounds.
const (
	DefaultPoints = 500
	// BaselineFactor is how many times the highlight the default baseline
	// spans, right before it.
	BaselineFactor = 4
	// maxFilter bounds a filter parameter: a pattern longer than this is a
	// mistake, not a selection.
	maxFilter = 4096
)

// Request is a parsed weights query with absolute times.
type Request struct {
	Method Method
	// Window is false when neither after nor before was given: the
	// method is then alerts, on the alerts raised now.
	Window bool
	// Highlight is (After, Before]; baseline is (BaselineAfter,
	// BaselineBefore], by default the BaselineFactor highlights before it.
	After, Before                 int64
	BaselineAfter, BaselineBefore int64
	Points                        int
	TimeGroup                     TimeGroup
	// Filters: Netdata simple patterns (nil matches all).
	Contexts, Charts, Dimensions *query.Pattern
	// Limit caps the results (0: all).
	Limit int
	// Timeout is the time budget (0: none); results found before it ran
	// out are answered with Partial set.
	Timeout time.Duration
	// Tier is the store tier the windows are read from (the caller picks
	// it from what tier 0 still holds).
	Tier int
}

// compares reports whether the method scores the highlight against the
// baseline (ks2, volume); the others read the highlight alone.
func (m Method) compares() bool { return m == KS2 || m == Volume }

// ReadWindow is the window a chart's read covers, (lo, hi]: the
// highlight, and for the methods that compare, the baseline and any gap
// between them.
func (r *Request) ReadWindow() (lo, hi int64) {
	if !r.Method.compares() {
		return r.After, r.Before
	}
	return min(r.After, r.BaselineAfter), max(r.Before, r.BaselineBefore)
}

// Getter returns a query argument and whether it was present.
type Getter func(key string) (string, bool)

func firstOf(get Getter, keys ...string) (string, bool) {
	for _, k := range keys {
		if v, ok := get(k); ok {
			return v, true
		}
	}
	return "", false
}

func parseInt(name, s string) (int64, error) {
	v, err := strconv.ParseInt(strings.TrimSpace(s), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%s must be an integer, got %q", name, trim(s))
	}
	if v > 1e13 || v < -1e13 {
		return 0, fmt.Errorf("%s is out of range: %q", name, trim(s))
	}
	return v, nil
}

// defaultAfter is the highlight's after when none is given (or 0 is):
// the five minutes before before.
const defaultAfter = -300

// resolve turns a relative time (|v| up to three years, Netdata's rule)
// into an absolute one counted from base.
func resolve(v, base int64) int64 {
	if v <= query.RelativeMax && v >= -query.RelativeMax {
		return base + v
	}
	return v
}

// ParseRequest reads a weights query with its defaults, resolving
// relative times against now. The error names the bad parameter; callers
// answer it with 400.
func ParseRequest(get Getter, now int64) (Request, error) {
	r := Request{Points: DefaultPoints, TimeGroup: "cv"}
	// highlight_after, highlight_before and max_points are Netdata's
	// other names for after, before and points (its dashboard's
	// correlations send them).
	as, hasAfter := firstOf(get, "after", "highlight_after")
	bs, hasBefore := firstOf(get, "before", "highlight_before")
	hasAfter = hasAfter && strings.TrimSpace(as) != ""
	hasBefore = hasBefore && strings.TrimSpace(bs) != ""
	r.Window = hasAfter || hasBefore

	m, _ := get("method")
	switch Method(strings.TrimSpace(m)) {
	case "":
		r.Method = Volume
		if !r.Window {
			r.Method = Alerts
		}
	case Volume, KS2, AnomalyRate, Value, Alerts:
		r.Method = Method(strings.TrimSpace(m))
	default:
		return r, fmt.Errorf("unknown method %q: use volume, ks2, anomaly-rate, value or alerts", trim(m))
	}
	if !r.Window && r.Method != Alerts {
		return r, fmt.Errorf("method %s needs a highlight window: give after (and before)", r.Method)
	}

	var err error
	before := int64(0)
	if hasBefore {
		if before, err = parseInt("before", bs); err != nil {
			return r, err
		}
	}
	if before > 0 && before <= query.RelativeMax {
		before = -before // Netdata: a positive relative before counts back too
	}
	r.Before = resolve(before, now)
	after := int64(0)
	if hasAfter {
		if after, err = parseInt("after", as); err != nil {
			return r, err
		}
	}
	if after == 0 {
		after = defaultAfter // Netdata: after=0 is the default window
	}
	if after > 0 && after <= query.RelativeMax {
		after = -after // Netdata: a positive relative after counts back
	}
	r.After = resolve(after, r.Before)
	if r.Window && r.After >= r.Before {
		return r, fmt.Errorf("after (%d) is later than before (%d): the highlight window is empty", r.After, r.Before)
	}

	span := r.Before - r.After
	r.BaselineBefore, r.BaselineAfter = r.After, r.After-BaselineFactor*span
	if s, ok := get("baseline_before"); ok && strings.TrimSpace(s) != "" {
		v, err := parseInt("baseline_before", s)
		if err != nil {
			return r, err
		}
		r.BaselineBefore = resolve(v, r.After)
		r.BaselineAfter = r.BaselineBefore - BaselineFactor*span
	}
	if s, ok := get("baseline_after"); ok && strings.TrimSpace(s) != "" {
		v, err := parseInt("baseline_after", s)
		if err != nil {
			return r, err
		}
		if v > 0 && v <= query.RelativeMax {
			v = -v
		}
		r.BaselineAfter = resolve(v, r.BaselineBefore)
	}
	if r.Window && r.BaselineAfter >= r.BaselineBefore {
		return r, fmt.Errorf("baseline_after (%d) is later than baseline_before (%d)", r.BaselineAfter, r.BaselineBefore)
	}

	if s, ok := firstOf(get, "points", "max_points"); ok && strings.TrimSpace(s) != "" {
		n, err := strconv.ParseInt(strings.TrimSpace(s), 10, 64)
		if err != nil || n <= 0 {
			return r, fmt.Errorf("points must be a positive integer, got %q", trim(s))
		}
		if n > query.MaxPoints {
			return r, fmt.Errorf("points must be at most %d, got %d", query.MaxPoints, n)
		}
		r.Points = int(n)
	}
	if s, ok := firstOf(get, "time_group", "group"); ok && strings.TrimSpace(s) != "" {
		g := TimeGroup(strings.ToLower(strings.TrimSpace(s)))
		if g == "avg" || g == "mean" {
			g = "average"
		}
		found := false
		for _, t := range timeGroups {
			found = found || t == g
		}
		if !found {
			return r, fmt.Errorf("unknown time_group %q: use cv, average, min, max, sum, median or stddev", trim(s))
		}
		r.TimeGroup = g
	}
	if s, ok := get("limit"); ok && strings.TrimSpace(s) != "" {
		n, err := strconv.ParseInt(strings.TrimSpace(s), 10, 64)
		if err != nil || n <= 0 {
			return r, fmt.Errorf("limit must be a positive integer, got %q", trim(s))
		}
		r.Limit = int(min(n, 1<<30))
	}
	if s, ok := get("timeout"); ok && strings.TrimSpace(s) != "" {
		n, err := strconv.ParseInt(strings.TrimSpace(s), 10, 64)
		if err != nil || n < 0 {
			return r, fmt.Errorf("timeout must be a number of milliseconds, got %q", trim(s))
		}
		r.Timeout = time.Duration(min(n, 3_600_000)) * time.Millisecond
	}
	for _, f := range []struct {
		keys []string
		dst  **query.Pattern
		ids  bool
	}{
		{[]string{"contexts", "context"}, &r.Contexts, true},
		{[]string{"charts", "chart"}, &r.Charts, true},
		{[]string{"dimensions", "dimension"}, &r.Dimensions, false},
	} {
		s, ok := firstOf(get, f.keys...)
		if !ok {
			continue
		}
		if len(s) > maxFilter {
			return r, fmt.Errorf("%s is too long (%d bytes, at most %d)", f.keys[0], len(s), maxFilter)
		}
		if f.ids && (strings.Contains(s, "/") || strings.Contains(s, "..")) {
			return r, fmt.Errorf("invalid %s: %q (a chart or context id has no '/' or '..')", f.keys[0], trim(s))
		}
		*f.dst = query.CompilePattern(s)
	}
	return r, nil
}

// trim cuts an argument echoed in an error to 64 bytes.
func trim(s string) string {
	if len(s) > 64 {
		return s[:64] + "..."
	}
	return s
}
