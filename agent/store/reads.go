package store

// Reader names who reads the store: the sources Netdata charts in
// netdata.queries and netdata.db_points_read. The agent has seven of
// Netdata's eight (no "backfill": it does not fill gaps of a child's
// data from the parent); a data query over a context, a badge and the
// AI summaries are counted under the API they come through.
type Reader int

// The readers.
const (
	ReadData        Reader = iota // /api/v1, v2 and v3 data, the AI summaries
	ReadWeights                   // /api/v1 and v2 weights
	ReadBadge                     // /api/v1/badge.svg
	ReadHealth                    // alert evaluations
	ReadML                        // anomaly-detection training
	ReadExporters                 // remote write
	ReadReplication               // history sent to a parent
	NumReaders
)

// ReaderNames are the readers' dimension names, Netdata's.
var ReaderNames = [NumReaders]string{"/api/v1/data", "/api/v1/weights", "/api/v1/badge", "health", "ml", "exporters", "replication"}

// QueryFor is Query counted for r: one query, and the points read (each
// dimension's slots of the window).
func (db *DB) QueryFor(r Reader, chartID string, tier int, after, before int64) (*Window, error) {
	w, err := db.Query(chartID, tier, after, before)
	if err == nil {
		n := 0
		for _, s := range w.Slots {
			n += len(s)
		}
		db.reads[r].queries.Add(1)
		db.reads[r].points.Add(uint64(n))
	}
	return w, err
}

// QueryIntoFor is QueryInto counted for r.
func (db *DB) QueryIntoFor(r Reader, w *Window, chartID string, tier int, after, before int64) error {
	err := db.QueryInto(w, chartID, tier, after, before)
	if err == nil {
		n := 0
		for _, s := range w.Slots {
			n += len(s)
		}
		db.reads[r].queries.Add(1)
		db.reads[r].points.Add(uint64(n))
	}
	return err
}

// Reads are the queries and points read since the store opened, by
// reader.
func (db *DB) Reads() (queries, points [NumReaders]uint64) {
	for r := range db.reads {
		queries[r] = db.reads[r].queries.Load()
		points[r] = db.reads[r].points.Load()
	}
	return
}
