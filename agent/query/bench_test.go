package query

import "testing"

// BenchmarkQuery is one uncached data query: plan, group 600 one-second
// slots of 10 dims into 60 points, render JSON (the system.cpu shape).
func BenchmarkQuery(b *testing.B) {
	ids := []string{"guest_nice", "guest", "steal", "softirq", "irq", "user", "system", "nice", "iowait", "idle"}
	ds := dims(ids...)
	ds[9].Hidden = true
	s := series(1795313000, 782, ds, func(d int, t int64) float64 { return float64((int(t)+d)%7) / 3 })
	req, _ := ParseRequest(getter("chart=system.cpu&after=-600&points=60"))
	var buf []byte
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		plan, err := NewPlan(req.After, req.Before, req.Points, false, 1795313782, 1795313000, 1795313781, 1)
		if err != nil {
			b.Fatal(err)
		}
		res, err := Run(&req, plan, []Series{s})
		if err != nil {
			b.Fatal(err)
		}
		buf = res.Append(buf[:0], nil)
	}
	b.SetBytes(int64(len(buf)))
}

// BenchmarkFormats renders the same 60-point result in each format.
func BenchmarkFormats(b *testing.B) {
	ids := []string{"guest_nice", "guest", "steal", "softirq", "irq", "user", "system", "nice", "iowait", "idle"}
	ds := dims(ids...)
	ds[9].Hidden = true
	s := series(1795313000, 782, ds, func(d int, t int64) float64 { return float64((int(t)+d)%7) / 3 })
	for _, f := range []string{"json", "csv", "datatable", "datasource", "csvjsonarray", "html", "markdown"} {
		b.Run(f, func(b *testing.B) {
			req, _ := ParseRequest(getter("chart=system.cpu&after=-600&points=60&format=" + f))
			plan, _ := NewPlan(req.After, req.Before, req.Points, false, 1795313782, 1795313000, 1795313781, 1)
			res, err := Run(&req, plan, []Series{s})
			if err != nil {
				b.Fatal(err)
			}
			var buf []byte
			b.ReportAllocs()
			for b.Loop() {
				buf = res.Append(buf[:0], &Wrap{LastEntry: 1795313781})
			}
			b.SetBytes(int64(len(buf)))
		})
	}
}

// BenchmarkGroupings runs the 600-slot, 60-point query with each grouping
// that reads every slot's value.
func BenchmarkGroupings(b *testing.B) {
	ds := dims("a", "b", "c", "d", "e", "f", "g", "h", "i")
	s := series(1795313000, 782, ds, func(d int, t int64) float64 { return float64((int(t)+d)%7) / 3 })
	for _, g := range []string{"average", "median", "stddev", "ses", "des", "trimmed-mean", "percentile"} {
		b.Run(g, func(b *testing.B) {
			req, _ := ParseRequest(getter("chart=x&after=-600&points=60&group=" + g))
			plan, _ := NewPlan(req.After, req.Before, req.Points, false, 1795313782, 1795313000, 1795313781, 1)
			b.ReportAllocs()
			for b.Loop() {
				if _, err := Run(&req, plan, []Series{s}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
