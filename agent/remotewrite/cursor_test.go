package remotewrite

import (
	"fmt"
	"testing"
	"time"

	"peerdns/agent/store"
)

// Charts come and go (a container's, a process group's, a child's that
// left): the writer's cursors are those of the charts its sources hold
// now, not of every chart it ever saw.
func TestCursorsOfRemovedCharts(t *testing.T) {
	db, err := store.Open(store.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	w, err := New(Config{URL: "http://127.0.0.1:1/api/v1/write", QueueBatches: 1,
		Sources: func() []Source { return []Source{{Instance: "host-a", DB: db}} }})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now().Unix()
	for i := range 100 {
		id := fmt.Sprintf("cgroup_job%d.cpu", i)
		if err := db.Register(&store.ChartDef{ID: id, Dims: []store.DimDef{{ID: "user"}}}); err != nil {
			t.Fatal(err)
		}
		if err := db.Append(id, now, []float64{1}); err != nil {
			t.Fatal(err)
		}
		w.Collect()
		db.Remove(id)
	}
	w.Collect()
	if n := len(w.cursor); n != 0 {
		t.Fatalf("%d cursors kept for charts that are gone", n)
	}
}
