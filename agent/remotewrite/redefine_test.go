package remotewrite

import (
	"sync"
	"testing"
	"time"

	"peerdns/agent/store"
)

// A chart redefined with other dimensions while the writer collects (a
// child's chart that changes, a collector's) is read as it is now: the
// definition the chart list gave a moment before may not be the one its
// points have.
func TestCollectWhileAChartIsRedefined(t *testing.T) {
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
	one := &store.ChartDef{ID: "apps.cpu", Dims: []store.DimDef{{ID: "a"}}}
	three := &store.ChartDef{ID: "apps.cpu", Dims: []store.DimDef{{ID: "a"}, {ID: "b"}, {ID: "c"}}}
	now := time.Now().Unix() - 600
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := int64(0); ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			def := one
			if i%2 == 1 {
				def = three
			}
			if err := db.Register(def); err != nil {
				t.Error(err)
				return
			}
			if err := db.Append(def.ID, now+i, make([]float64, len(def.Dims))); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	defer func() { close(stop); wg.Wait() }()
	for deadline := time.Now().Add(time.Second); time.Now().Before(deadline); {
		w.Collect()
		for len(w.queue) > 0 {
			<-w.queue
		}
	}
}
