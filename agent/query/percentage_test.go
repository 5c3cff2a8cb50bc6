package query

import (
	"math"
	"testing"
)

// TestPercentageOfGroupedValues: options=percentage is each point's value
// over the total of every dimension's value at that point, the values
// grouped as the query asks (Netdata divides the row it grouped), so a
// row of all dimensions sums to 100 whatever the grouping.
func TestPercentageOfGroupedValues(t *testing.T) {
	ds := dims("a", "b", "idle")
	ds[2].Hidden = true
	// a and b cycle 0..4, idle is what is left of 100: per second the
	// three sum to 100, but their maxima (4, 4, 100) do not.
	s := series(100, 10, ds, func(d int, t int64) float64 {
		if d == 2 {
			return 100 - 2*float64(t%5)
		}
		return float64(t % 5)
	})
	plan := Plan{After: 100, Before: 109, Step: 1, Group: 5, Points: 2}
	for _, g := range []Group{GroupAverage, GroupMax, GroupMin, GroupSum, GroupMedian, GroupSES} {
		res, err := Run(&Request{Dimensions: "a|b|idle", Group: g, Options: OptPercentage}, plan, []Series{s})
		if err != nil {
			t.Fatal(err)
		}
		for r := 0; r < res.Rows(); r++ {
			sum := 0.0
			for c := range res.Columns {
				sum += res.At(r, c)
			}
			if math.Abs(sum-100) > 1e-9 {
				t.Errorf("group=%s row %d: percentages sum to %v, want 100", g, r, sum)
			}
		}
	}
}
