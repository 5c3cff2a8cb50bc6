package query

import (
	"math"
	"strconv"

	"peerdns/messages"
)

// jw appends compact JSON, keeping track of commas. It is the v2 answers'
// writer: they are large, nested and written on the hot data path, where
// encoding/json's reflection over maps costs several times more.
type jw struct {
	b     []byte
	comma []bool // per open container: something was written already
}

func (w *jw) sep() {
	if n := len(w.comma); n > 0 {
		if w.comma[n-1] {
			w.b = append(w.b, ',')
		}
		w.comma[n-1] = true
	}
}

func (w *jw) key(k string) {
	w.sep()
	w.b = messages.AppendJSONString(w.b, k)
	w.b = append(w.b, ':')
}

func (w *jw) open(c byte) {
	w.b = append(w.b, c)
	w.comma = append(w.comma, false)
}

func (w *jw) close(c byte) {
	w.b = append(w.b, c)
	w.comma = w.comma[:len(w.comma)-1]
}

// Object and array openers: as a member (k != "") or an array item.
func (w *jw) obj(k string) {
	if k != "" {
		w.key(k)
	} else {
		w.sep()
	}
	w.open('{')
}

func (w *jw) arr(k string) {
	if k != "" {
		w.key(k)
	} else {
		w.sep()
	}
	w.open('[')
}

func (w *jw) endObj() { w.close('}') }
func (w *jw) endArr() { w.close(']') }

func (w *jw) str(k, v string) {
	if k != "" {
		w.key(k)
	} else {
		w.sep()
	}
	w.b = messages.AppendJSONString(w.b, v)
}

func (w *jw) int(k string, v int64) {
	if k != "" {
		w.key(k)
	} else {
		w.sep()
	}
	w.b = strconv.AppendInt(w.b, v, 10)
}

func (w *jw) uint(k string, v uint64) {
	if k != "" {
		w.key(k)
	} else {
		w.sep()
	}
	w.b = strconv.AppendUint(w.b, v, 10)
}

// num writes a number; NaN and infinities are null, as Netdata writes them.
func (w *jw) num(k string, v float64) {
	if k != "" {
		w.key(k)
	} else {
		w.sep()
	}
	if math.IsNaN(v) || math.IsInf(v, 0) {
		w.b = append(w.b, "null"...)
		return
	}
	w.b = AppendNumber(w.b, v)
}

func (w *jw) null(k string) {
	if k != "" {
		w.key(k)
	} else {
		w.sep()
	}
	w.b = append(w.b, "null"...)
}
