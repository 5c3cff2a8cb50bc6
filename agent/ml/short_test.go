package ml

import (
	"fmt"
	"math"
	"testing"
	"time"

	"peerdns/agent/store"
)

// TestNeverCollectedDimensionDoesNotStarveTraining: a dimension the
// collector never reads (NaN every second, as kv and cgroup charts emit
// for a key this kernel lacks) has no feature vectors however long the
// history; its chart must not be retried every minute forever, taking
// the tick's one training, so that the charts after it never train.
func TestNeverCollectedDimensionDoesNotStarveTraining(t *testing.T) {
	db := newTestDB(t)
	const shortCharts = 70
	var ids []string
	for i := range shortCharts {
		ids = append(ids, fmt.Sprintf("a.%02d", i))
	}
	ids = append(ids, "z.last")
	for _, id := range ids {
		def := &store.ChartDef{ID: id, Context: id, Dims: []store.DimDef{{ID: "seen"}, {ID: "missing"}}}
		if err := db.Register(def); err != nil {
			t.Fatal(err)
		}
	}
	d := New(db, Config{MinTrainSamples: 300, MaxTrainSeconds: 600, TrainEvery: 10 * time.Minute})
	base := int64(1_800_000_000)
	nan := math.NaN()
	var due int64
	for i := range 900 {
		for _, id := range ids {
			if err := db.Append(id, base+int64(i), []float64{float64(i % 7), nan}); err != nil {
				t.Fatal(err)
			}
		}
		d.Tick(base + int64(i))
		// Each time the short chart trains, it is next due on the
		// period (at least half of it away), not in a minute.
		if cs := d.charts["a.00"]; cs != nil && cs.nextTrain != due {
			if due != 0 && cs.nextTrain-(base+int64(i)) <= 60 {
				t.Fatalf("a chart with a never-collected dimension, trained at +%d s, is due again %d s later",
					i, cs.nextTrain-(base+int64(i)))
			}
			due = cs.nextTrain
		}
	}
	st := d.Stats()
	if st.Total != len(ids) || st.Trained != len(ids) {
		t.Fatalf("Stats: %d of %d collected dimensions trained, want all: a chart was starved of training", st.Trained, st.Total)
	}
}
