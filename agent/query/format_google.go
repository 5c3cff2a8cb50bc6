package query

import (
	"strconv"
	"time"

	"peerdns/messages"
)

// The Google Visualization formats: datatable (a DataTable literal),
// datasource (the DataTable in a data source reply, for
// google.visualization.Query) and jsonp (the json format in a call).

// Defaults Netdata uses when the request names no callback.
const (
	defaultJSONPCallback      = "callback"
	defaultDatasourceCallback = "google.visualization.Query.setResponse"
)

func (r *Result) appendJSONPOpen(dst []byte) []byte {
	cb := r.Request.Callback
	if cb == "" {
		cb = defaultJSONPCallback
	}
	dst = append(dst, cb...)
	return append(dst, '(')
}

// appendDatasourceOpen writes the reply's head up to "table:". When the
// client's tqx sig equals the data's (the newest point), the whole reply
// is Google's not_modified error instead and done is true.
func (r *Result) appendDatasourceOpen(dst []byte, w *Wrap) ([]byte, bool) {
	q := r.Request
	cb := q.Callback
	if cb == "" {
		cb = defaultDatasourceCallback
	}
	version, reqID := q.TQX.Version, q.TQX.ReqID
	if version == "" {
		version = "0.6"
	}
	if reqID == "" {
		reqID = "0"
	}
	sig := strconv.FormatInt(w.LastEntry, 10)
	dst = append(dst, cb...)
	dst = append(dst, "({version:'"...)
	dst = append(dst, version...)
	dst = append(dst, "',reqId:'"...)
	dst = append(dst, reqID...)
	if q.TQX.Sig != "" && q.TQX.Sig == sig {
		dst = append(dst, "',status:'error',errors:[{reason:'not_modified',message:'Data not modified'}]});"...)
		return dst, true
	}
	dst = append(dst, "',status:'ok',sig:'"...)
	dst = append(dst, sig...)
	return append(dst, "',table:"...), false
}

// appendDatatable writes Netdata's DataTable: a datetime column, two
// annotation columns (always null) and a number column per dimension;
// rows give the time as "Date(y,m,d,h,m,s)" in local time with a
// zero-based month, as JavaScript's Date constructor takes it.
func (r *Result) appendDatatable(dst []byte) []byte {
	dst = append(dst, "{\n \"cols\":\n [\n"...)
	dst = append(dst, "        {\"id\":\"\",\"label\":\"time\",\"pattern\":\"\",\"type\":\"datetime\"},\n"...)
	dst = append(dst, "        {\"id\":\"\",\"label\":\"\",\"pattern\":\"\",\"type\":\"string\",\"p\":{\"role\":\"annotation\"}},\n"...)
	dst = append(dst, "        {\"id\":\"\",\"label\":\"\",\"pattern\":\"\",\"type\":\"string\",\"p\":{\"role\":\"annotationText\"}}"...)
	for _, c := range r.Columns {
		dst = append(dst, ",\n     {\"id\":\"\",\"label\":"...)
		dst = messages.AppendJSONString(dst, c.Name)
		dst = append(dst, ",\"pattern\":\"\",\"type\":\"number\"}"...)
	}
	dst = append(dst, "\n  ],\n    \"rows\":\n ["...)
	ncol := len(r.Columns)
	first := true
	r.rowOrder(func(row int) {
		if first {
			dst = append(dst, "\n        {\"c\":[{\"v\":\"Date("...)
			first = false
		} else {
			dst = append(dst, ",\n        {\"c\":[{\"v\":\"Date("...)
		}
		t := time.Unix(r.Plan.RowTime(row), 0)
		dst = strconv.AppendInt(dst, int64(t.Year()), 10)
		dst = append(dst, ',')
		dst = strconv.AppendInt(dst, int64(t.Month())-1, 10)
		for _, v := range [...]int{t.Day(), t.Hour(), t.Minute(), t.Second()} {
			dst = append(dst, ',')
			dst = strconv.AppendInt(dst, int64(v), 10)
		}
		dst = append(dst, ")\"},{\"v\":null},{\"v\":null}"...)
		for c := 0; c < ncol; c++ {
			dst = append(dst, ",{\"v\":"...)
			dst = r.appendValue(dst, r.Values[row*ncol+c])
			dst = append(dst, '}')
		}
		dst = append(dst, "]}"...)
	})
	return append(dst, "\n]\n}"...)
}
