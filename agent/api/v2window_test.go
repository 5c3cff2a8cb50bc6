package api

import "testing"

// TestV2RelativeWindowSign asks v2/v3 data for windows written with
// positive relative seconds, which the query reads as relative (after=30
// is after=-30; a before past now stops at now): the answer is tier 0's
// newest 30 points, as for after=-30, and not an empty tier-1 answer from
// reading the positive values as unix seconds of 1970.
func TestV2RelativeWindowSign(t *testing.T) {
	env := newTestEnv(t)
	for _, v := range []string{"v2", "v3"} {
		for _, q := range []string{"after=-30", "after=30", "after=-30&before=30", "after=30&before=0"} {
			p := "/api/" + v + "/data?contexts=system.load&points=0&" + q
			j := getJSON2(t, env, p)
			times, _, _ := j.points(t)
			if len(times) != 30 || j.View.UpdateEvery != 1 {
				t.Errorf("GET %s: %d rows, update_every %d, want 30 and 1", p, len(times), j.View.UpdateEvery)
				continue
			}
			if times[0] != env.now.Unix()-1 {
				t.Errorf("GET %s: newest row %d, want %d", p, times[0], env.now.Unix()-1)
			}
		}
	}
}
