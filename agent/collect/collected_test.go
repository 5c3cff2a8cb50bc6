package collect

import (
	"testing"
	"time"

	"peerdns/agent/store"
	"peerdns/agent/store/storetest"
)

// TestCollectedKeepsRawValues: the values a chart was collected with (here
// CPU jiffies, as /proc/stat has them) are kept beside the converted
// points, newest read only.
func TestCollectedKeepsRawValues(t *testing.T) {
	texts := []string{
		"cpu  100 0 50 800 0 0 0 0 0 0\ncpu0 100 0 50 800 0 0 0 0 0 0\n",
		"cpu  130 0 60 850 20 0 0 0 0 0\ncpu0 130 0 60 850 20 0 0 0 0 0\n",
	}
	c := newStat("")
	i := 0
	c.read = func() ([]byte, error) { b := texts[i]; i++; return []byte(b), nil }
	db := storetest.New(t, store.Config{})
	m := run(t, db, 2, c)
	at, vals, ok := m.Collected("cpu.cpu0")
	if !ok {
		t.Fatal("no collected values for cpu.cpu0")
	}
	if !at.Equal(epoch.Add(time.Second)) {
		t.Errorf("collected at %v, want the second tick %v", at, epoch.Add(time.Second))
	}
	// dims: guest_nice guest steal softirq irq user system nice iowait idle
	if vals[9] != 850 || vals[6] != 60 || vals[8] != 20 || vals[5] != 130 {
		t.Errorf("collected = %v, want the second sample's jiffies (idle 850, system 60, iowait 20, user 130)", vals)
	}
	if _, _, ok := m.Collected("no.such"); ok {
		t.Error("a chart never collected has collected values")
	}
}
