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
// exist, on a round with no periodic rescan: files are read into kept buffers, parsed in place and appended
// without a per-point allocation.
func TestCollectAllocs(t *testing.T) {
	db := storetest.New(t, store.Config{})
	m := run(t, db, 3, hostCollectors("testdata/linux-6.18")...)
	sec := epoch.Add(3 * time.Second)
	// Six rounds (one warm-up, five measured) at seconds 4..9: between the
	// walks of the cgroup tree (every 10 s) and of the disk and mount
	// lists (every 30 s), which allocate and are not part of the budget.
	allocs := testing.AllocsPerRun(5, func() {
		sec = sec.Add(time.Second)
		m.collect(sec.Unix(), sec, 50*time.Microsecond)
	})
	if allocs > 0 {
		t.Errorf("one collection round allocates %v times, want 0", allocs)
	}
}
