package collect

import (
	"syscall"
	"testing"
	"time"

	"peerdns/agent/store"
	"peerdns/agent/store/storetest"
)

// cpuTime is the user+system CPU this process has used.
func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkTick is one full collection round of every real collector
// against this host, including the store appends. %core is the share of
// one core the agent spends collecting at one tick a second, from the CPU
// time the process used (getrusage: all threads, GC included), not wall
// time, which other load on the machine inflates.
func BenchmarkTick(b *testing.B) {
	db := storetest.New(b, store.Config{})
	m := New(db, nil, Options{})
	b.Cleanup(m.close)
	start := time.Now()
	m.Collect(start.Unix(), start) // first round: registration and first counters
	b.ReportAllocs()
	b.ResetTimer()
	cpu0 := cpuTime(b)
	for i := 0; i < b.N; i++ {
		// Each round is a later second so every append is accepted.
		now := start.Add(time.Duration(i+1) * time.Second)
		m.Collect(now.Unix(), time.Now())
	}
	used := cpuTime(b) - cpu0
	b.ReportMetric(float64(used.Microseconds())/float64(b.N), "cpu-µs/tick")
	b.ReportMetric(float64(used.Nanoseconds())/float64(b.N)/1e7, "%core")
}

// BenchmarkCollector is each collector alone, to see where a tick goes.
func BenchmarkCollector(b *testing.B) {
	for _, c := range New(nil, nil, Options{}).cs {
		b.Run(c.name(), func(b *testing.B) {
			db := storetest.New(b, store.Config{})
			m := newManager(db, nil, c)
			b.Cleanup(m.close)
			start := time.Now()
			m.Collect(start.Unix(), start)
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				now := start.Add(time.Duration(i+1) * time.Second)
				m.Collect(now.Unix(), time.Now())
			}
		})
	}
}

// BenchmarkTickFixture is one full round on the fixture tree of the
// reference VM (testdata/linux-6.18): the same work every run, whatever
// the machine runs, so changes to a parser show here first.
func BenchmarkTickFixture(b *testing.B) {
	db := storetest.New(b, store.Config{})
	m := newManager(db, nil, hostCollectors("testdata/linux-6.18")...)
	b.Cleanup(m.close)
	start := time.Now()
	m.Collect(start.Unix(), start)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		now := start.Add(time.Duration(i+1) * time.Second)
		m.collect(now.Unix(), now, 100*time.Microsecond)
	}
	b.StopTimer()
	dims := 0
	for _, c := range db.Charts() {
		dims += len(c.Dims)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(max(dims, 1)), "ns/dim")
}
