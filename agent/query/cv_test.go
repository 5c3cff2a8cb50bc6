package query

import (
	"math"
	"testing"
)

// TestCVOfNegativeSeries: cv is the standard deviation over the mean's
// magnitude, as Netdata's grouping_flush_coefficient_of_variation
// divides by |mean|: a negative dimension (disk writes, sent traffic) has
// the same cv as its mirror image, never a negative one.
func TestCVOfNegativeSeries(t *testing.T) {
	s := series(1000, 60, dims("in", "out"), func(d int, t int64) float64 {
		v := 10 + float64(t%6)
		if d == 1 {
			return -v
		}
		return v
	})
	plan := Plan{After: 1000, Before: 1059, Step: 1, Group: 6, Points: 10}
	res, err := Run(&Request{Group: GroupCV}, plan, []Series{s})
	if err != nil {
		t.Fatal(err)
	}
	want := 100 * math.Sqrt(3.5) / 12.5 // 10..15: sample sd sqrt(3.5), mean 12.5
	for r := 0; r < res.Rows(); r++ {
		in, out := res.At(r, 0), res.At(r, 1)
		if math.Abs(in-want) > 1e-9 || math.Abs(out-want) > 1e-9 {
			t.Errorf("row %d: cv in %v, out %v, want %v for both", r, in, out, want)
		}
	}
}
