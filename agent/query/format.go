package query

import (
	"math"
	"strconv"
	"time"

	"peerdns/messages"
)

// Wrap carries the jsonwrap fields that do not come from the result itself.
type Wrap struct {
	Host                  string
	API                   int
	UpdateEvery           int
	FirstEntry, LastEntry int64
	Context               bool // a context query: id says context:// and chart_ids is listed
}

// ContentType is the Content-Type of the rendered body.
func (r *Result) ContentType() string {
	f := r.Request.Format
	if r.Request.Options&OptJSONWrap != 0 && f != FormatJSONP && f != FormatDatasource {
		return ctJSON
	}
	return f.ContentType()
}

// Append renders the result in the request's format (wrapped in Netdata's
// jsonwrap envelope when that option is set) and appends it to dst. w may
// be nil when jsonwrap is not requested.
func (r *Result) Append(dst []byte, w *Wrap) []byte {
	if w == nil {
		w = &Wrap{API: 1}
	}
	// jsonp and datasource call a function with the answer, jsonwrap
	// included (Netdata writes the call around whatever follows).
	var suffix string
	switch r.Request.Format {
	case FormatJSONP:
		dst, suffix = r.appendJSONPOpen(dst), ");"
	case FormatDatasource:
		var done bool
		if dst, done = r.appendDatasourceOpen(dst, w); done {
			return dst
		}
		suffix = "});"
	}
	if r.Request.Options&OptJSONWrap != 0 {
		dst = r.appendWrap(dst, w)
	} else {
		dst = r.appendBody(dst, false)
	}
	return append(dst, suffix...)
}

// appendBody renders the bare format. inWrap changes what Netdata changes
// inside jsonwrap: csv/tsv lines end with \n instead of \r\n.
func (r *Result) appendBody(dst []byte, inWrap bool) []byte {
	switch r.Request.Format {
	case FormatCSV:
		return r.appendDSV(dst, ',', inWrap)
	case FormatTSV:
		return r.appendDSV(dst, '\t', inWrap)
	case FormatArray:
		return r.appendReduced(dst, "[", ",", "]")
	case FormatSSV:
		return r.appendReduced(dst, "", " ", "")
	case FormatSSVComma:
		return r.appendReduced(dst, "", ",", "")
	case FormatDatatable, FormatDatasource:
		return r.appendDatatable(dst)
	case FormatCSVJSONArray:
		return r.appendCSVJSONArray(dst)
	case FormatHTML:
		return r.appendHTML(dst)
	case FormatMarkdown:
		return r.appendMarkdown(dst)
	}
	return r.appendJSON(dst)
}

// rowOrder calls f for each row index in output order: newest first, or
// oldest first with flip.
func (r *Result) rowOrder(f func(row int)) {
	n := r.Rows()
	if r.Request.Options&OptFlip != 0 {
		for i := 0; i < n; i++ {
			f(i)
		}
		return
	}
	for i := n - 1; i >= 0; i-- {
		f(i)
	}
}

func (r *Result) appendTime(dst []byte, row int) []byte {
	t := r.Plan.RowTime(row)
	if r.Request.Options&OptMS != 0 {
		return strconv.AppendInt(dst, t*1000, 10)
	}
	return strconv.AppendInt(dst, t, 10)
}

func (r *Result) appendValue(dst []byte, v float64) []byte {
	if math.IsNaN(v) {
		if r.Request.Options&OptNull2Zero != 0 {
			return append(dst, '0')
		}
		return append(dst, "null"...)
	}
	return AppendNumber(dst, v)
}

func (r *Result) appendJSON(dst []byte) []byte {
	dst = append(dst, "{\n \"labels\": [\"time\""...)
	for _, c := range r.Columns {
		dst = append(dst, ',')
		dst = messages.AppendJSONString(dst, c.Name)
	}
	dst = append(dst, "],\n    \"data\":\n ["...)
	ncol := len(r.Columns)
	first := true
	objectRows := r.Request.Options&OptObjectRows != 0
	r.rowOrder(func(row int) {
		if first {
			dst = append(dst, "\n "...)
			first = false
		} else {
			dst = append(dst, ",\n "...)
		}
		if objectRows {
			dst = append(dst, "{ \"time\": "...)
		} else {
			dst = append(dst, "[ "...)
		}
		dst = r.appendTime(dst, row)
		for c := 0; c < ncol; c++ {
			dst = append(dst, ',')
			if objectRows {
				dst = messages.AppendJSONString(dst, r.Columns[c].Name)
				dst = append(dst, ": "...)
			}
			dst = r.appendValue(dst, r.Values[row*ncol+c])
		}
		if objectRows {
			dst = append(dst, '}')
		} else {
			dst = append(dst, ']')
		}
	})
	return append(dst, "\n]\n}"...)
}

func (r *Result) appendDSV(dst []byte, sep byte, inWrap bool) []byte {
	eol := "\r\n"
	if inWrap {
		eol = "\n"
	}
	dst = append(dst, "time"...)
	for _, c := range r.Columns {
		dst = append(dst, sep)
		dst = append(dst, c.Name...)
	}
	dst = append(dst, eol...)
	ncol := len(r.Columns)
	numeric := r.Request.Options&(OptSeconds|OptMS) != 0
	r.rowOrder(func(row int) {
		if numeric {
			dst = r.appendTime(dst, row)
		} else {
			dst = time.Unix(r.Plan.RowTime(row), 0).AppendFormat(dst, "2006-01-02 15:04:05")
		}
		for c := 0; c < ncol; c++ {
			dst = append(dst, sep)
			dst = r.appendValue(dst, r.Values[row*ncol+c])
		}
		dst = append(dst, eol...)
	})
	return dst
}

// reduce is one row folded to a number, as Netdata's array/ssv formats do:
// the sum of the row's values (max-min with min2max); NaN when all null.
func (r *Result) reduce(row int) float64 {
	ncol := len(r.Columns)
	vals := r.Values[row*ncol : (row+1)*ncol]
	if r.Request.Options&OptMin2Max != 0 {
		mn, mx := math.Inf(1), math.Inf(-1)
		for _, v := range vals {
			if !math.IsNaN(v) {
				mn, mx = math.Min(mn, v), math.Max(mx, v)
			}
		}
		if math.IsInf(mn, 1) {
			return math.NaN()
		}
		return mx - mn
	}
	sum, n := 0.0, 0
	for _, v := range vals {
		if !math.IsNaN(v) {
			sum += v
			n++
		}
	}
	if n == 0 {
		return math.NaN()
	}
	return sum
}

func (r *Result) appendReduced(dst []byte, open, sep, close string) []byte {
	dst = append(dst, open...)
	first := true
	r.rowOrder(func(row int) {
		if !first {
			dst = append(dst, sep...)
		}
		first = false
		dst = r.appendValue(dst, r.reduce(row))
	})
	return append(dst, close...)
}

// minMax is the range of the rendered values (reduced rows for the
// reduced formats), skipping nulls; 0,0 when there are none.
func (r *Result) minMax() (float64, float64) {
	mn, mx := math.Inf(1), math.Inf(-1)
	see := func(v float64) {
		if math.IsNaN(v) {
			if r.Request.Options&OptNull2Zero == 0 {
				return
			}
			v = 0
		}
		mn, mx = math.Min(mn, v), math.Max(mx, v)
	}
	switch r.Request.Format {
	case FormatArray, FormatSSV, FormatSSVComma:
		for row := 0; row < r.Rows(); row++ {
			see(r.reduce(row))
		}
	default:
		for _, v := range r.Values {
			see(v)
		}
	}
	if math.IsInf(mn, 1) {
		return 0, 0
	}
	return mn, mx
}

func (r *Result) appendWrap(dst []byte, w *Wrap) []byte {
	req := r.Request
	api := w.API
	if api == 0 {
		api = 1
	}
	dst = append(dst, "{\n   \"api\": "...)
	dst = strconv.AppendInt(dst, int64(api), 10)
	id := r.queryID(w)
	dst = append(dst, ",\n   \"id\": "...)
	dst = messages.AppendJSONString(dst, id)
	dst = append(dst, ",\n   \"name\": "...)
	dst = messages.AppendJSONString(dst, id)
	dst = append(dst, ",\n   \"view_update_every\": "...)
	dst = strconv.AppendInt(dst, r.Plan.ViewUpdateEvery(), 10)
	dst = append(dst, ",\n   \"update_every\": "...)
	dst = strconv.AppendInt(dst, int64(w.UpdateEvery), 10)
	dst = append(dst, ",\n   \"first_entry\": "...)
	dst = strconv.AppendInt(dst, w.FirstEntry, 10)
	dst = append(dst, ",\n   \"last_entry\": "...)
	dst = strconv.AppendInt(dst, w.LastEntry, 10)
	dst = append(dst, ",\n   \"before\": "...)
	dst = strconv.AppendInt(dst, r.Plan.Before, 10)
	dst = append(dst, ",\n   \"after\": "...)
	dst = strconv.AppendInt(dst, r.Plan.After, 10)
	dst = append(dst, ",\n   \"group\": "...)
	dst = messages.AppendJSONString(dst, req.Group.String())
	dst = append(dst, ",\n   \"options\": "...)
	dst = messages.AppendJSONString(dst, req.Options.String())
	dst = append(dst, ",\n   \"dimension_names\": ["...)
	for i, c := range r.Columns {
		if i > 0 {
			dst = append(dst, ", "...)
		}
		dst = messages.AppendJSONString(dst, c.Name)
	}
	dst = append(dst, "],\n   \"dimension_ids\": ["...)
	for i, c := range r.Columns {
		if i > 0 {
			dst = append(dst, ", "...)
		}
		dst = messages.AppendJSONString(dst, c.ID)
	}
	dst = append(dst, "],\n   \"functions\": [],"...)
	if w.Context {
		dst = append(dst, "\n   \"chart_ids\": ["...)
		for i, c := range r.Columns {
			if i > 0 {
				dst = append(dst, ", "...)
			}
			dst = messages.AppendJSONString(dst, c.ChartID)
		}
		dst = append(dst, "],"...)
	}
	dst = append(dst, "\n   \"latest_values\": ["...)
	for i, v := range r.Latest {
		if i > 0 {
			dst = append(dst, ", "...)
		}
		if req.Options&OptAbs != 0 {
			v = math.Abs(v)
		}
		dst = r.appendValue(dst, v)
	}
	dst = append(dst, "],\n   \"view_latest_values\": ["...)
	rows := r.Rows()
	for c := range r.Columns {
		if c > 0 {
			dst = append(dst, ", "...)
		}
		v := math.NaN()
		if rows > 0 {
			v = r.At(rows-1, c)
		}
		dst = r.appendValue(dst, v)
	}
	dst = append(dst, "],\n   \"dimensions\": "...)
	dst = strconv.AppendInt(dst, int64(len(r.Columns)), 10)
	dst = append(dst, ",\n   \"points\": "...)
	dst = strconv.AppendInt(dst, int64(rows), 10)
	dst = append(dst, ",\n   \"format\": "...)
	dst = messages.AppendJSONString(dst, req.Format.String())
	dst = append(dst, ",\n   \"db_points_per_tier\": [ "...)
	dst = strconv.AppendInt(dst, int64(r.DBPoints[0]), 10)
	dst = append(dst, ", "...)
	dst = strconv.AppendInt(dst, int64(r.DBPoints[1]), 10)
	dst = append(dst, " ],\n   \"result\": "...)
	switch req.Format {
	case FormatCSV, FormatTSV, FormatSSV, FormatSSVComma, FormatHTML, FormatMarkdown:
		// Text formats are a JSON string inside jsonwrap.
		body := r.appendBody(nil, true)
		dst = messages.AppendJSONString(dst, string(body))
	default:
		dst = r.appendBody(dst, true)
	}
	mn, mx := r.minMax()
	dst = append(dst, ",\n \"min\": "...)
	dst = AppendNumber(dst, mn)
	dst = append(dst, ",\n \"max\": "...)
	dst = AppendNumber(dst, mx)
	return append(dst, "\n}\n"...)
}

// queryID is Netdata's descriptive query id, e.g.
// chart://host:vm/instance:system.cpu/dimensions:*/after:-60/before:0/points:10/group:average/options:jsonwrap
func (r *Result) queryID(w *Wrap) string {
	req := r.Request
	b := make([]byte, 0, 160)
	if w.Context {
		b = append(b, "context://host:"...)
		b = append(b, w.Host...)
		b = append(b, "/contexts:"...)
		b = append(b, req.Context...)
		b = append(b, "/instances:"...)
		if req.Chart != "" {
			b = append(b, req.Chart...)
		} else {
			b = append(b, '*')
		}
	} else {
		b = append(b, "chart://host:"...)
		b = append(b, w.Host...)
		b = append(b, "/instance:"...)
		b = append(b, req.Chart...)
	}
	b = append(b, "/dimensions:"...)
	if req.Dimensions == "" {
		b = append(b, '*')
	} else {
		b = append(b, req.Dimensions...)
	}
	b = append(b, "/after:"...)
	b = append(b, req.AfterText...)
	b = append(b, "/before:"...)
	b = append(b, req.BeforeText...)
	b = append(b, "/points:"...)
	b = strconv.AppendInt(b, int64(req.Points), 10)
	b = append(b, "/group:"...)
	b = append(b, req.Group.String()...)
	b = append(b, "/options:"...)
	opts := req.Options.String()
	opts = opts[:len(opts)-len("natural-points")]
	if len(opts) > 0 {
		opts = opts[:len(opts)-1]
	}
	b = append(b, opts...)
	return string(b)
}

// AppendNumber writes v the way Netdata prints values: at most 7
// decimals, trailing zeros trimmed, "-0" as "0". Infinities become null
// (JSON has no representation for them). Values below 9e11 (all real
// metrics) take an integer fast path: strconv's fixed-precision float
// formatting was a third of a data query's CPU.
func AppendNumber(dst []byte, v float64) []byte {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return append(dst, "null"...)
	}
	if math.Abs(v) < 9e11 {
		n := int64(math.Round(v * 1e7))
		if n == 0 {
			return append(dst, '0')
		}
		if n < 0 {
			dst = append(dst, '-')
			n = -n
		}
		dst = strconv.AppendInt(dst, n/1e7, 10)
		frac := n % 1e7
		if frac == 0 {
			return dst
		}
		var digits [7]byte
		for i := 6; i >= 0; i-- {
			digits[i] = byte('0' + frac%10)
			frac /= 10
		}
		end := 7
		for digits[end-1] == '0' {
			end--
		}
		dst = append(dst, '.')
		return append(dst, digits[:end]...)
	}
	if v == math.Trunc(v) && math.Abs(v) < 1e15 {
		return strconv.AppendInt(dst, int64(v), 10)
	}
	start := len(dst)
	dst = strconv.AppendFloat(dst, v, 'f', 7, 64)
	i := len(dst)
	for i > start && dst[i-1] == '0' {
		i--
	}
	if i > start && dst[i-1] == '.' {
		i--
	}
	return dst[:i]
}
