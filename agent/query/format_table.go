package query

import (
	"html"
	"time"

	"peerdns/messages"
)

// The table formats Netdata 1.37 renders with its csv writer and other
// delimiters: html, markdown and csvjsonarray. Rows are newest first
// (oldest first with flip); the time column is local "YYYY-MM-DD hh:mm:ss",
// or unix seconds/milliseconds with the seconds and ms options.

// appendRowTime writes the time column of a text table.
func (r *Result) appendRowTime(dst []byte, row int, quote bool) []byte {
	if r.Request.Options&(OptSeconds|OptMS) != 0 {
		return r.appendTime(dst, row)
	}
	if quote {
		dst = append(dst, '"')
	}
	dst = time.Unix(r.Plan.RowTime(row), 0).AppendFormat(dst, "2006-01-02 15:04:05")
	if quote {
		dst = append(dst, '"')
	}
	return dst
}

// appendHTML is Netdata's html format: one table row per point, the
// labels as the first row. Labels are HTML-escaped (Netdata writes them
// raw; a dimension name is not markup).
func (r *Result) appendHTML(dst []byte) []byte {
	dst = append(dst, "<html>\n<center>\n<table border=\"0\" cellpadding=\"5\" cellspacing=\"5\">\n<tr><td>time"...)
	for _, c := range r.Columns {
		dst = append(dst, "</td><td>"...)
		dst = append(dst, html.EscapeString(c.Name)...)
	}
	dst = append(dst, "</td></tr>\n"...)
	ncol := len(r.Columns)
	r.rowOrder(func(row int) {
		dst = append(dst, "<tr><td>"...)
		dst = r.appendRowTime(dst, row, false)
		for c := 0; c < ncol; c++ {
			dst = append(dst, "</td><td>"...)
			dst = r.appendValue(dst, r.Values[row*ncol+c])
		}
		dst = append(dst, "</td></tr>\n"...)
	})
	return append(dst, "</table>\n</center>\n</html>\n"...)
}

// appendMarkdown is Netdata's markdown format: a '|' table with a
// centred-column rule under the labels, lines ending in \r\n.
func (r *Result) appendMarkdown(dst []byte) []byte {
	dst = append(dst, "time"...)
	for _, c := range r.Columns {
		dst = append(dst, '|')
		dst = append(dst, c.Name...)
	}
	dst = append(dst, "\r\n:---:"...)
	for range r.Columns {
		dst = append(dst, "|:---:"...)
	}
	dst = append(dst, "\r\n"...)
	ncol := len(r.Columns)
	r.rowOrder(func(row int) {
		dst = r.appendRowTime(dst, row, false)
		for c := 0; c < ncol; c++ {
			dst = append(dst, '|')
			dst = r.appendValue(dst, r.Values[row*ncol+c])
		}
		dst = append(dst, "\r\n"...)
	})
	return dst
}

// appendCSVJSONArray is Netdata's csvjsonarray: the csv table as a JSON
// array of arrays, labels first. Netdata 1.37 leaves the time strings
// unquoted, which no JSON parser reads; they are quoted here, so the
// body is the valid JSON its Content-Type promises (with seconds or ms
// the times are numbers, as in Netdata).
func (r *Result) appendCSVJSONArray(dst []byte) []byte {
	dst = append(dst, "[\n[\"time\""...)
	for _, c := range r.Columns {
		dst = append(dst, ',')
		dst = messages.AppendJSONString(dst, c.Name)
	}
	dst = append(dst, ']')
	ncol := len(r.Columns)
	r.rowOrder(func(row int) {
		dst = append(dst, ",\n["...)
		dst = r.appendRowTime(dst, row, true)
		for c := 0; c < ncol; c++ {
			dst = append(dst, ',')
			dst = r.appendValue(dst, r.Values[row*ncol+c])
		}
		dst = append(dst, ']')
	})
	return append(dst, "\n]"...)
}
