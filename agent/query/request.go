package query

import (
	"fmt"
	"strconv"
	"strings"
)

// Format is the body layout of a data query.
type Format uint8

// The formats a data query renders (Netdata 1.37's, format_names in
// web/api/formatters/rrd2json.c).
const (
	FormatJSON Format = iota
	FormatCSV
	FormatTSV
	FormatSSV
	FormatSSVComma
	FormatArray
	FormatJSONP        // json inside callback( ... );
	FormatDatatable    // Google Visualization DataTable JSON
	FormatDatasource   // the DataTable inside a Google data source reply
	FormatCSVJSONArray // csv as a JSON array of arrays
	FormatHTML         // an HTML table
	FormatMarkdown     // a Markdown table
)

var formatNames = [...]string{"json", "csv", "tsv", "ssv", "ssvcomma", "array",
	"jsonp", "datatable", "datasource", "csvjsonarray", "html", "markdown"}

// String is the Netdata name of the format.
func (f Format) String() string {
	if int(f) < len(formatNames) {
		return formatNames[f]
	}
	return "json"
}

// Content types Netdata sends with the formats.
const (
	ctJSON       = "application/json; charset=utf-8"
	ctText       = "text/plain; charset=utf-8"
	ctJavaScript = "application/x-javascript; charset=utf-8"
	ctHTML       = "text/html; charset=utf-8"
)

// ContentType is the Content-Type Netdata sends for the format (without
// jsonwrap, which is JSON except for the two JavaScript formats).
func (f Format) ContentType() string {
	switch f {
	case FormatJSON, FormatArray, FormatDatatable, FormatCSVJSONArray:
		return ctJSON
	case FormatJSONP, FormatDatasource:
		return ctJavaScript
	case FormatHTML:
		return ctHTML
	}
	return ctText
}

// ParseFormat reads a format name; anything unknown is an error.
func ParseFormat(s string) (Format, error) {
	switch l := strings.ToLower(s); l {
	case "":
		return FormatJSON, nil
	case "tsv-excel":
		return FormatTSV, nil
	default:
		for i, n := range formatNames {
			if l == n {
				return Format(i), nil
			}
		}
	}
	if len(s) > 64 {
		s = s[:64] + "..."
	}
	return 0, fmt.Errorf("unknown format %q: use %s", trimArg(s), strings.Join(formatNames[:], ", "))
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
	// OptAnomalyBit answers each point's anomaly rate (percent of its
	// stored points the detector flagged) instead of its value.
	OptAnomalyBit
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
	{OptAnomalyBit, "anomaly-bit"},
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
		case "anomaly-bit":
			o |= OptAnomalyBit
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
	GroupOptions   string // countif's condition (group_options, v2 time_group_options)
	Tier           int
	Format         Format
	Options        Options
	// AfterText etc. keep the raw values for the jsonwrap id string.
	AfterText, BeforeText string
	// Callback names the JavaScript function of jsonp and datasource
	// (Netdata's callback, or tqx's responseHandler); "" means Netdata's
	// default for the format.
	Callback string
	// TQX is the Google data source request (tqx=reqId:1;sig:...).
	TQX TQX
}

// TQX is what a Google Visualization data source request asks in tqx.
type TQX struct {
	ReqID   string // echoed as reqId (default "0")
	Version string // echoed as version (default "0.6")
	Sig     string // the signature the client holds: equal means not modified
}

// Getter returns a query argument and whether it was present.
type Getter func(key string) (string, bool)

// DimensionArgs are the names a v1 query's dimensions pattern goes by;
// a Getter answers each with all its values joined by '|', as Netdata
// joins a repeated one.
var DimensionArgs = []string{"dimension", "dim", "dimensions", "dims"}

// ParseRequest reads a data query's arguments with Netdata's defaults. The
// error says which parameter is wrong; callers answer it with 400.
// Missing chart/context is not checked here (the API has its own message).
func ParseRequest(get Getter) (Request, error) {
	r := Request{After: DefaultAfter, Points: DefaultPoints, AfterText: "-60", BeforeText: "0"}
	r.Chart, _ = get("chart")
	r.Context, _ = get("context")
	// Netdata reads dimension, dim, dimensions and dims alike and joins
	// every one given into one pattern.
	var dims []string
	for _, k := range DimensionArgs {
		if d, ok := get(k); ok && d != "" {
			dims = append(dims, d)
		}
	}
	r.Dimensions = strings.Join(dims, "|")
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
			return r, fmt.Errorf("points must be a positive integer, got %q", trimArg(s))
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
	for _, k := range []string{"group_options", "time_group_options"} {
		if s, ok := get(k); ok {
			if len(s) > 64 {
				return r, fmt.Errorf("%s is longer than 64 bytes", k)
			}
			r.GroupOptions = s
			break
		}
	}
	if s, ok := get("tier"); ok && s != "" {
		switch strings.TrimSpace(s) {
		case "0":
			r.Tier = 0
		case "1":
			r.Tier = 1
		default:
			return r, fmt.Errorf("tier must be 0 or 1, got %q", trimArg(s))
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
	if s, ok := get("callback"); ok && s != "" {
		if !jsName(s) {
			return r, fmt.Errorf("callback must be a JavaScript name ([A-Za-z0-9_$.], at most %d characters)", maxJSName)
		}
		r.Callback = s
	}
	if s, ok := get("tqx"); ok && s != "" {
		if err := r.parseTQX(s); err != nil {
			return r, err
		}
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
			return 0, fmt.Errorf("%s must be unix seconds or a negative number of seconds, got %q", name, trimArg(s))
		}
		v = int64(f)
	}
	if v > 1e13 || v < -1e13 {
		return 0, fmt.Errorf("%s is out of range: %q", name, trimArg(s))
	}
	return v, nil
}

// maxJSName bounds a callback name: it is echoed into the body.
const maxJSName = 128

// jsName accepts the characters of a dotted JavaScript name, and nothing
// that could end the call and start another statement: the callback is
// echoed into a script the browser runs.
func jsName(s string) bool {
	if len(s) == 0 || len(s) > maxJSName {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '$' || c == '.') {
			return false
		}
	}
	return true
}

// parseTQX reads tqx, key:value pairs separated by ';' (the Google
// Visualization wire protocol). Values are echoed inside single quotes,
// so they are held to the characters of a name.
func (r *Request) parseTQX(s string) error {
	for _, kv := range strings.Split(s, ";") {
		k, v, _ := strings.Cut(kv, ":")
		k = strings.TrimSpace(k)
		v = strings.TrimSpace(v)
		if k == "" {
			continue
		}
		if v != "" && !jsName(strings.ReplaceAll(v, "-", "_")) {
			return fmt.Errorf("tqx %s must be letters, digits, '_', '-', '$' or '.', got %q", k, trimArg(v))
		}
		switch k {
		case "reqId":
			r.TQX.ReqID = v
		case "version":
			r.TQX.Version = v
		case "sig":
			r.TQX.Sig = v
		case "responseHandler":
			if v != "" && !jsName(v) {
				return fmt.Errorf("tqx responseHandler must be a JavaScript name, got %q", trimArg(v))
			}
			if v != "" {
				r.Callback = v
			}
		}
	}
	return nil
}

func trimArg(s string) string {
	if len(s) > 64 {
		return s[:64] + "..."
	}
	return s
}
