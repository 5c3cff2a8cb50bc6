package stats

import (
	"encoding/json"
	"strconv"
	"time"

	"peerdns/internal/store"
)

const (
	histPrefix = "stats:h:"
	histKeep   = 24 * time.Hour
)

// keep stores the sample b of minute now and drops samples older than
// histKeep.
func keep(db *store.DB, now time.Time, b []byte) {
	minute := now.Unix() / 60
	rec, _ := json.Marshal(map[string]any{"timestamp": now.UnixMilli(), "data": json.RawMessage(b)})
	_ = db.Set(histPrefix+strconv.FormatInt(minute, 10), string(rec))
	old, _ := db.List(histPrefix)
	for _, kv := range old {
		m, err := strconv.ParseInt(kv.Key[len(histPrefix):], 10, 64)
		if err == nil && now.Sub(time.Unix(m*60, 0)) > histKeep {
			_ = db.Delete(kv.Key)
		}
	}
}

// History is the samples kept in db for the last minutes before now,
// oldest first ({"timestamp": ms, "data": payload} each): those of the
// minutes unix minutes up to now's, so at most minutes samples. The
// minute that began minutes ago is left out: its sample may be older
// than the window. So are samples of minutes after now's, kept before
// the clock was set back: they are not of the window.
func History(db *store.DB, now time.Time, minutes int) []json.RawMessage {
	out := []json.RawMessage{}
	kvs, _ := db.List(histPrefix)
	after := now.Add(-time.Duration(minutes)*time.Minute).Unix() / 60
	last := now.Unix() / 60
	for _, kv := range kvs {
		m, err := strconv.ParseInt(kv.Key[len(histPrefix):], 10, 64)
		if err == nil && m > after && m <= last {
			out = append(out, json.RawMessage(kv.Value))
		}
	}
	return out
}
