package api

import (
	"bytes"
	"encoding/json"
	"math"

	"github.com/valyala/fasthttp"

	"peerdns/http/httpx"
)

const ctJSON = "application/json; charset=utf-8"

// writeJSON encodes v indented, without HTML escaping (alert expressions
// keep their '>' readable; the body is JSON, not HTML). Every cold-path
// answer goes through it; only the paths a benchmark in bench_test.go
// measures are written by hand.
func writeJSON(ctx *fasthttp.RequestCtx, v any) error {
	b, err := encodeJSON(v)
	if err != nil {
		return &httpx.Error{Status: fasthttp.StatusInternalServerError, Msg: "encode response", Err: err}
	}
	setBody(ctx, ctJSON, b)
	return nil
}

// writeJSONStatus is writeJSON with a status other than 200 (a JSON
// error body, as Netdata's progress and stream_info write them).
func writeJSONStatus(ctx *fasthttp.RequestCtx, status int, v any) error {
	if err := writeJSON(ctx, v); err != nil {
		return err
	}
	ctx.SetStatusCode(status)
	return nil
}

func encodeJSON(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "\t")
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// finite reports whether v is a number JSON and the text formats can
// carry: NaN marks a gap (nothing collected) and infinities a broken
// division; both mean "no value".
func finite(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }

// nullFloat is a value that may be missing: it encodes as JSON null when
// it is not finite, as Netdata prints a gap. It is the one NaN→null
// conversion of the package; use it in structs and maps alike.
type nullFloat float64

// MarshalJSON implements json.Marshaler.
func (f nullFloat) MarshalJSON() ([]byte, error) {
	if !finite(float64(f)) {
		return []byte("null"), nil
	}
	return json.Marshal(float64(f))
}

// noValue is a nullFloat that encodes as null.
var noValue = nullFloat(math.NaN())

// member is one key and value of an object.
type member[V any] struct {
	Key   string
	Value V
}

// object is a JSON object that keeps its members in order. Netdata lists
// charts by priority and dimensions in chart order, and dashboards show
// them in the order they arrive; a Go map would sort them by name. Keys
// and values are still encoded by encoding/json.
type object[V any] []member[V]

// MarshalJSON implements json.Marshaler.
func (o object[V]) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	b.WriteByte('{')
	for i, m := range o {
		if i > 0 {
			b.WriteByte(',')
		}
		// Encode appends a newline after each value; JSON allows that
		// whitespace and the outer encoder re-indents the whole object.
		if err := enc.Encode(m.Key); err != nil {
			return nil, err
		}
		b.WriteByte(':')
		if err := enc.Encode(m.Value); err != nil {
			return nil, err
		}
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}
