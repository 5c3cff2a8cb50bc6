package ml

import (
	"fmt"
	"runtime"
	"testing"
	"time"

	"peerdns/agent/store"
)

// benchCharts registers charts × 10 dimensions and fills them with an hour
// of synthetic points, ticking the detector each second (so every chart is
// trained), and returns the next second.
func benchCharts(b *testing.B, charts int) (*store.DB, *Detector, int64, [][]float64) {
	b.Helper()
	db := newTestDB(b)
	const dims = 10
	src := make([]synthSeries, dims)
	for i := range src {
		src[i] = makeSeries(synthKind(i%int(synthKinds)), uint64(i+1), 1800, 1800)
	}
	ids := make([]string, charts)
	for c := range charts {
		def := &store.ChartDef{ID: fmt.Sprintf("bench.c%d", c)}
		for i := range dims {
			def.Dims = append(def.Dims, store.DimDef{ID: fmt.Sprintf("d%d", i)})
		}
		if err := db.Register(def); err != nil {
			b.Fatal(err)
		}
		ids[c] = def.ID
	}
	d := New(db, Config{MinTrainSamples: 900, TrainEvery: 30 * time.Minute})
	base := int64(1_800_000_000)
	n := len(src[0].x)
	vals := make([][]float64, n)
	for t := range n {
		vals[t] = make([]float64, dims)
		for i := range dims {
			vals[t][i] = float64(src[i].x[t])
		}
	}
	for t := range n {
		for _, id := range ids {
			if err := db.Append(id, base+int64(t), vals[t]); err != nil {
				b.Fatal(err)
			}
		}
		d.Tick(base + int64(t))
	}
	if st := d.Stats(); st.Trained != charts*dims {
		b.Fatalf("%d of %d dimensions trained", st.Trained, charts*dims)
	}
	return db, d, base + int64(n), vals
}

// BenchmarkDetect is the detector's cost per dimension per second: one
// Tick over 50 charts of 10 trained dimensions (the store appends are
// outside the timer: they are the collector's cost). Training runs inside
// Tick at most once a second, so its share is included at the rate it
// happens in the agent.
func BenchmarkDetect(b *testing.B) {
	const charts, dims = 50, 10
	db, d, sec, vals := benchCharts(b, charts)
	ids := make([]string, charts)
	for c := range ids {
		ids[c] = fmt.Sprintf("bench.c%d", c)
	}
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		b.StopTimer()
		for _, id := range ids {
			if err := db.Append(id, sec, vals[i%len(vals)]); err != nil {
				b.Fatal(err)
			}
		}
		b.StartTimer()
		d.Tick(sec)
		sec++
	}
	perDim := float64(b.Elapsed().Nanoseconds()) / float64(b.N) / (charts * dims)
	b.ReportMetric(perDim/1000, "µs/s-per-dim")
}

// BenchmarkTrain is one dimension's training on an hour of history (3600
// points); the agent retrains each dimension every 30 minutes, so the
// per-second share is this divided by 1800.
func BenchmarkTrain(b *testing.B) {
	s := makeSeries(synthWave, 1, 3600, 0)
	p := defaultParams
	var rows []float32
	var ds []float64
	for b.Loop() {
		var n int
		rows, n = features(rows[:0], s.x)
		_, ds = train(rows, n, p, ds)
	}
	per := float64(b.Elapsed().Nanoseconds()) / float64(b.N)
	b.ReportMetric(per/1000, "µs/train")
	b.ReportMetric(per/1000/1800, "µs/s-per-dim(amortized)")
}

// BenchmarkBytesPerDim measures the detector's heap per dimension: the
// state built for 1000 charts of 10 dimensions (the store's rings are not
// counted; they are the store's figure).
func BenchmarkBytesPerDim(b *testing.B) {
	for b.Loop() {
		db := newTestDB(b)
		d := New(db, Config{})
		d.Tick(1_800_000_000) // registers the detector's own charts
		const charts, dims = 1000, 10
		for c := range charts {
			def := &store.ChartDef{ID: fmt.Sprintf("bench.c%d", c)}
			for i := range dims {
				def.Dims = append(def.Dims, store.DimDef{ID: fmt.Sprintf("d%d", i)})
			}
			if err := db.Register(def); err != nil {
				b.Fatal(err)
			}
		}
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		d.Tick(1_800_000_001) // no points yet: builds the states only
		runtime.GC()
		runtime.ReadMemStats(&after)
		if len(d.charts) != charts {
			b.Fatalf("%d chart states", len(d.charts))
		}
		b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/(charts*dims), "bytes/dim")
		runtime.KeepAlive(d)
	}
}

// BenchmarkDetectionQuality reports the exact detection and false-positive
// rates on the synthetic set (3 shapes × 10 series, an hour of training
// with natural spikes, an hour with a level shift or a spike every two
// minutes), for the default rule (median + 1.5 × (P99 − median)), the
// plain 99th percentile and Netdata 1.37's rule.
//
// The clean-training variants train on an hour without spikes: the case
// Netdata's rule is made for.
func BenchmarkDetectionQuality(b *testing.B) {
	set, clean := synthSet(10), synthSetOpt(10, false)
	for _, c := range []struct {
		name string
		set  []synthSeries
		p    trainParams
	}{
		{"default", set, defaultParams},
		{"percentile-0.99", set, trainParams{sampleEvery: 5, maxIter: 100, percentile: 0.99}},
		{"netdata-minmax-0.99", set, trainParams{sampleEvery: 5, maxIter: 100}},
		{"clean-training/default", clean, defaultParams},
		{"clean-training/percentile-0.99", clean, trainParams{sampleEvery: 5, maxIter: 100, percentile: 0.99}},
		{"clean-training/netdata-minmax-0.99", clean, trainParams{sampleEvery: 5, maxIter: 100}},
	} {
		b.Run(c.name, func(b *testing.B) {
			var e evalResult
			for b.Loop() {
				e = evaluate(c.set, c.p)
			}
			b.ReportMetric(100*e.detectionRate(), "detected-%")
			b.ReportMetric(100*float64(e.shiftsDetected)/float64(e.shifts), "shifts-%")
			b.ReportMetric(100*float64(e.spikesDetected)/float64(e.spikes), "spikes-%")
			b.ReportMetric(100*e.falsePositiveRate(), "false-pos-%")
		})
	}
}
