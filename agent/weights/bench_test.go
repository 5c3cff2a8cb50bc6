package weights

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"peerdns/agent/store"
)

// BenchmarkWeights is one weights query over every dimension of a store
// of 100 charts × 10 dimensions holding an hour of 1-second points, for a
// 1-minute highlight (after=-60) and the default 4-minute baseline: the
// latency a dashboard waits for.
func BenchmarkWeights(b *testing.B) {
	const charts, dims = 100, 10
	db, err := store.Open(store.Config{Tier0Retention: time.Hour})
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	r := rand.New(rand.NewPCG(1, 2))
	end := int64(1_800_000_000)
	for c := range charts {
		def := &store.ChartDef{ID: fmt.Sprintf("bench.c%d", c), Context: fmt.Sprintf("bench.ctx%d", c%20)}
		for d := range dims {
			def.Dims = append(def.Dims, store.DimDef{ID: fmt.Sprintf("d%d", d)})
		}
		if err := db.Register(def); err != nil {
			b.Fatal(err)
		}
		v := make([]float64, dims)
		for ts := end - 3599; ts <= end; ts++ {
			for d := range v {
				v[d] = float64(10*(d+1)) + r.NormFloat64()
			}
			if err := db.Append(def.ID, ts, v); err != nil {
				b.Fatal(err)
			}
		}
	}
	for _, m := range []string{"ks2", "volume"} {
		b.Run(m, func(b *testing.B) {
			req, err := ParseRequest(getter(map[string]string{"method": m, "after": "-60"}), end)
			if err != nil {
				b.Fatal(err)
			}
			var ans *Answer
			for b.Loop() {
				ans = Compute(db, nil, req, time.Now)
			}
			if ans.Stats.Examined != charts*dims {
				b.Fatalf("examined %d dimensions", ans.Stats.Examined)
			}
			ms := float64(b.Elapsed().Microseconds()) / 1000 / float64(b.N)
			b.ReportMetric(ms, "ms/query")
			b.ReportMetric(ms*1000/float64(charts*dims), "µs/dim")
		})
	}
}
