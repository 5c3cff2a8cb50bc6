package procs

import (
	"testing"

	"github.com/shirou/gopsutil/v3/process"
)

// BenchmarkScan is one scan of this host's processes with the ten columns
// the table shows.
func BenchmarkScan(b *testing.B) {
	needProc(b)
	s := NewSampler()
	if _, err := s.scan(); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	n := 0
	for b.Loop() {
		t, err := s.scan()
		if err != nil {
			b.Fatal(err)
		}
		n = len(t.Processes)
	}
	b.ReportMetric(float64(n), "procs")
}

// BenchmarkScanGopsutil reads the same columns through gopsutil, the
// alternative the package doc weighs.
func BenchmarkScanGopsutil(b *testing.B) {
	needProc(b)
	b.ReportAllocs()
	n := 0
	for b.Loop() {
		ps, err := process.Processes()
		if err != nil {
			b.Fatal(err)
		}
		n = 0
		for _, p := range ps {
			name, err := p.Name()
			if err != nil {
				continue
			}
			_, _ = p.Ppid()
			_, _ = p.Cmdline()
			_, _ = p.Username()
			_, _ = p.Status()
			_, _ = p.Times()
			_, _ = p.MemoryInfo()
			_, _ = p.NumThreads()
			_, _ = p.CreateTime()
			_ = name
			n++
		}
	}
	b.ReportMetric(float64(n), "procs")
}
