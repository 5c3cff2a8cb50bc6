package remotewrite_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"peerdns/agent/remotewrite"
	"peerdns/agent/store"
	"peerdns/internal/testutil"
)

// A node whose points are hours old (a parent's child with its clock
// behind, or one that says so) does not cost the others their batch:
// Prometheus refuses a request holding a sample older than an hour
// before its newest, every sample of it.
func TestHoursOldPointsDoNotSinkTheBatch(t *testing.T) {
	addr := testutil.FreeTCPAddr(t)
	startPrometheus(t, addr)
	db := newStore(t)
	late, err := store.Open(store.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { late.Close() })
	if err := late.Register(&store.ChartDef{ID: "system.load", Context: "system.load", Units: "load", Family: "load",
		Dims: []store.DimDef{{ID: "load1"}, {ID: "load5"}}}); err != nil {
		t.Fatal(err)
	}
	w, err := remotewrite.New(remotewrite.Config{
		URL: "http://" + addr + "/api/v1/write",
		Sources: func() []remotewrite.Source {
			return []remotewrite.Source{{Instance: "host-a", DB: db}, {Instance: "host-b", DB: late}}
		},
		Interval: 20 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now().Unix()
	lateNow := now - 5*3600
	if err := db.Append("system.load", now-1, []float64{1, 1}); err != nil {
		t.Fatal(err)
	}
	if err := late.Append("system.load", lateNow-1, []float64{1, 1}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); w.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	// The first point of each is collected; then one more of each.
	testutil.Eventually(t, 10*time.Second, func() error {
		if w.Requests.Load() == 0 {
			return fmt.Errorf("writer %v", w.Status())
		}
		return nil
	})
	if err := db.Append("system.load", now, []float64{7, 7}); err != nil {
		t.Fatal(err)
	}
	if err := late.Append("system.load", lateNow, []float64{3, 3}); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 20*time.Second, func() error {
		v, err := query(addr, `netdata_system_load_load_average{instance="host-a",dimension="load1"}`)
		if err != nil {
			return fmt.Errorf("%v (writer %v)", err, w.Status())
		}
		if v != 7 {
			return fmt.Errorf("host-a load1 = %v, want 7 (writer %v)", v, w.Status())
		}
		return nil
	})
	if n := w.Failed.Load(); n != 0 {
		t.Errorf("%d samples refused by the receiver", n)
	}
}
