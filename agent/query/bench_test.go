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
