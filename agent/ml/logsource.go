package ml

import (
	"strconv"
	"time"

	"peerdns/agent/logs"
)

// LogSource is the detector's event ring as a log (logs?source=anomaly
// and the AI snapshot's anomalies): one warning per dimension that turned
// anomalous, its chart id as the unit, newest first, paged by the event's
// sequence number.
func (d *Detector) LogSource() logs.Source { return eventLog{d} }

type eventLog struct{ d *Detector }

func (l eventLog) Before(before uint64, limit int, keep func(*logs.Entry) bool) ([]logs.Entry, bool) {
	evs := l.d.Events(0, 0) // oldest first, a copy
	var out []logs.Entry
	for i := len(evs) - 1; i >= 0; i-- {
		ev := evs[i]
		if before != 0 && ev.Seq >= before {
			continue
		}
		e := ev.entry()
		if keep != nil && !keep(&e) {
			continue
		}
		if len(out) == limit {
			return out, true
		}
		out = append(out, e)
	}
	return out, false
}

func (ev Event) entry() logs.Entry {
	return logs.Entry{
		Seq: ev.Seq, Time: time.Unix(ev.Time, 0), Priority: logs.PriWarning, Unit: ev.Chart,
		Message: ev.Chart + "." + ev.Name + " is anomalous (value " + strconv.FormatFloat(ev.Value, 'g', 7, 64) +
			", score " + strconv.FormatFloat(ev.Score, 'f', 2, 64) + ")",
		Fields: map[string]string{"context": ev.Context, "dimension": ev.Dimension,
			"value": strconv.FormatFloat(ev.Value, 'g', 7, 64), "score": strconv.FormatFloat(ev.Score, 'f', 2, 64)},
	}
}
