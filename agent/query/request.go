package query

import (
	"fmt"
	"strconv"
	"strings"
)

// Format is the body layout of a data query.
type Format uint8

// The formats a data query renders.
const (
	FormatJSON Format = iota
	FormatCSV
	FormatTSV
	FormatSSV
	FormatSSVComma
	FormatArray
)

var formatNames = [...]string{"json", "csv", "tsv", "ssv", "ssvcomma", "array"}

// String is the Netdata name of the format.
func (f Format) String() string {
	if int(f) < len(formatNames) {
		return formatNames[f]
	}
	return "json"
}

// ContentType is the Content-Type Netdata sends for the format (without
// jsonwrap, which is always JSON).
func (f Format) ContentType() string {
	switch f {
	case FormatJSON, FormatArray:
		return "application/json; charset=utf-8"
	}
	return "text/plain; charset=utf-8"
}

// ParseFormat reads a format name; anything unknown is an error.
func ParseFormat(s string) (Format, error) {
	switch strings.ToLower(s) {
	case "", "json":
		return FormatJSON, nil
	case "csv":
		return FormatCSV, nil
	case "tsv", "tsv-excel":
		return FormatTSV, nil
	case "ssv":
		return FormatSSV, nil
	case "ssvcomma":
		return FormatSSVComma, nil
	case "array":
		return FormatArray, nil
	}
	return 0, fmt.Errorf("unknown format %q: use json, csv, tsv, ssv, ssvcomma or array", s)
}

// Options is the set of Netdata `options` flags a query honours.
type Options uint32

// The options Netdata documents that change our output. Options that
// Netdata accepts but that change nothing here (natural-points, unaligned
// alignment hints, match-ids, ...) are accepted and ignored, as Netdata
// ignores unknown ones.
const (
	OptJSONWrap Options = 1 << iota
	OptSeconds
	OptMS
	OptFlip
	OptNonZero
	OptNull2Zero
	OptAbs
	OptPercentage
	OptObjectRows
	OptMin2Max
	OptUnaligned
)

// optionOrder is the order Netdata lists options in the jsonwrap "options"
// field (nonzero,flip,jsonwrap,seconds,...).
var optionOrder = []struct {
	o    Options
	name string
}{
	{OptNonZero, "nonzero"},
	{OptFlip, "flip"},
	{OptJSONWrap, "jsonwrap"},
	{OptMin2Max, "min2max"},
	{OptMS, "ms"},
	{OptAbs, "abs"},
	{OptNull2Zero, "null2zero"},
	{OptObjectRows, "objectrows"},
	{OptPercentage, "percentage"},
	{OptSeconds, "seconds"},
	{OptUnaligned, "unaligned"},
}

// ParseOptions reads Netdata's options list (separated by '|', ',' or ' ').
func ParseOptions(s string) Options {
	var o Options
	for s != "" {
		i := strings.IndexAny(s, "|, ")
		tok := s
		if i >= 0 {
			tok, s = s[:i], s[i+1:]
		} else {
			s = ""
		}
		switch strings.ToLower(tok) {
		case "jsonwrap":
			o |= OptJSONWrap
		case "seconds":
			o |= OptSeconds
		case "ms", "milliseconds":
			o |= OptMS
		case "flip", "reversed":
			o |= OptFlip
		case "nonzero":
			o |= OptNonZero
		case "null2zero":
			o |= OptNull2Zero
		case "abs", "absolute", "absolute_sum", "absolute-sum":
			o |= OptAbs
		case "percentage":
			o |= OptPercentage
		case "objectrows":
			o |= OptObjectRows
		case "min2max":
			o |= OptMin2Max
		case "unaligned":
			o |= OptUnaligned
		}
	}
	return o
}

// String lists the options in Netdata's order, comma separated, followed by
// "natural-points" like Netdata 1.37 reports it.
func (o Options) String() string {
	var b strings.Builder
	for _, e := range optionOrder {
		if o&e.o == 0 {
			continue
		}
		b.WriteString(e.name)
		b.WriteByte(',')
	}
	b.WriteString("natural-points")
	return b.String()
}

// Defaults of a data query (see the spec's data table).
const (
	DefaultAfter  = -60
	DefaultPoints = 60
	// MaxPoints caps `points`: more than a day of 1-second points in one
	// answer is a mistake, not a chart, and would cost megabytes.
	MaxPoints = 86400
	// RelativeMax is Netdata's API_RELATIVE_TIME_MAX: |values| up to three
	// years are relative, larger ones are absolute unix seconds.
	RelativeMax = 3 * 365 * 86400
)

// Request is a parsed data query.
type Request struct {
	Chart, Context string
	Dimensions     string // Netdata simple pattern over dimension ids and names; "" = all visible
	After, Before  int64  // as given: absolute unix seconds or relative
	Points         int
	Group          Group
	Tier           int
	Format         Format
	Options        Options
	// AfterText etc. keep the raw values for the jsonwrap id string.
	AfterText, BeforeText string
}

// Getter returns a query argument and whether it was present.
type Getter func(key string) (string, bool)

// ParseRequest reads a data query's arguments with Netdata's defaults. The
// error says which parameter is wrong; callers answer it with 400.
// Missing chart/context is not checked here (the API has its own message).
func ParseRequest(get Getter) (Request, error) {
	r := Request{After: DefaultAfter, Points: DefaultPoints, AfterText: "-60", BeforeText: "0"}
	r.Chart, _ = get("chart")
	r.Context, _ = get("context")
	if d, ok := get("dimensions"); ok {
		r.Dimensions = d
	} else if d, ok := get("dimension"); ok {
		r.Dimensions = d
	}
	var err error
	if s, ok := get("after"); ok && s != "" {
		if r.After, err = parseSeconds("after", s); err != nil {
			return r, err
		}
		if r.After == 0 {
			r.After = DefaultAfter
		}
		r.AfterText = strconv.FormatInt(r.After, 10)
	}
	if s, ok := get("before"); ok && s != "" {
		if r.Before, err = parseSeconds("before", s); err != nil {
			return r, err
		}
		r.BeforeText = strconv.FormatInt(r.Before, 10)
	}
	if s, ok := get("points"); ok && s != "" {
		n, err := strconv.ParseInt(strings.TrimSpace(s), 10, 64)
		if err != nil {
			return r, fmt.Errorf("points must be a positive integer, got %q", s)
		}
		if n <= 0 {
			return r, fmt.Errorf("points must be a positive integer, got %d", n)
		}
		if n > MaxPoints {
			return r, fmt.Errorf("points must be at most %d, got %d", MaxPoints, n)
		}
		r.Points = int(n)
	}
	if s, ok := get("group"); ok {
		if r.Group, err = ParseGroup(s); err != nil {
			return r, err
		}
	} else if s, ok := get("time_group"); ok { // the v2 name
		if r.Group, err = ParseGroup(s); err != nil {
			return r, err
		}
	}
	if s, ok := get("tier"); ok && s != "" {
		switch strings.TrimSpace(s) {
		case "0":
			r.Tier = 0
		case "1":
			r.Tier = 1
		default:
			return r, fmt.Errorf("tier must be 0 or 1, got %q", s)
		}
	}
	if s, ok := get("format"); ok {
		if r.Format, err = ParseFormat(s); err != nil {
			return r, err
		}
	}
	if s, ok := get("options"); ok {
		r.Options = ParseOptions(s)
	}
	return r, nil
}

func parseSeconds(name, s string) (int64, error) {
	s = strings.TrimSpace(s)
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		// Netdata also accepts fractional seconds; keep the integer part.
		f, ferr := strconv.ParseFloat(s, 64)
		if ferr != nil || f != f || f > 1e15 || f < -1e15 {
			return 0, fmt.Errorf("%s must be unix seconds or a negative number of seconds, got %q", name, s)
		}
		v = int64(f)
	}
	if v > 1e13 || v < -1e13 {
		return 0, fmt.Errorf("%s is out of range: %q", name, s)
	}
	return v, nil
}
