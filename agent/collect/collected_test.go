package collect

import (
	"testing"
	"time"

	"github.com/shirou/gopsutil/v3/cpu"

	"peerdns/agent/store"
	"peerdns/agent/store/storetest"
)

// TestCollectedKeepsRawValues: the values a chart was collected with (here
// CPU jiffies) are kept beside the converted points, newest read only.
func TestCollectedKeepsRawValues(t *testing.T) {
	samples := [][]cpu.TimesStat{
		{{CPU: "cpu0", User: 100, System: 50, Idle: 800}},
		{{CPU: "cpu0", User: 130, System: 60, Idle: 850, Iowait: 20}},
	}
	c := newCPU()
	i := 0
	c.read = func() ([]cpu.TimesStat, error) { s := samples[i]; i++; return s, nil }
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
	// gopsutil reports seconds; collected values are jiffies (1/100 s).
	if vals[9] != 85000 || vals[6] != 6000 || vals[8] != 2000 {
		t.Errorf("collected = %v, want the second sample's jiffies (idle 85000, system 6000, iowait 2000)", vals)
	}
	if _, _, ok := m.Collected("no.such"); ok {
		t.Error("a chart never collected has collected values")
	}
}
