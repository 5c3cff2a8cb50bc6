package collect

import (
	"testing"
	"time"

	"peerdns/agent/store"
	"peerdns/agent/store/storetest"
)

// TestCollectAllocs is the allocation budget of one collection round of
// every collector that reads files (the fixture tree, so the count does
// not depend on this host), store appends included, once the charts
// exist: files are read into kept buffers, parsed in place and appended
// without a per-point allocation.
func TestCollectAllocs(t *testing.T) {
	db := storetest.New(t, store.Config{})
	var cs []collector
	for _, c := range hostCollectors("testdata/linux-6.18") {
		if _, ok := c.(*idleJitterColl); ok {
			continue // its goroutine allocates nothing either, but runs on its own clock
		}
		cs = append(cs, c)
	}
	m := run(t, db, 3, cs...)
	sec := epoch.Add(3 * time.Second)
	allocs := testing.AllocsPerRun(20, func() {
		sec = sec.Add(time.Second)
		m.Collect(sec.Unix(), sec)
	})
	if allocs > 0 {
		t.Errorf("one collection round allocates %v times, want 0", allocs)
	}
}
