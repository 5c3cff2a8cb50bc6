package api

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestAlertTransitionsWindow: v2/v3 alert_transitions keeps the
// transitions of the after/before window, as Netdata's does (its
// dashboard asks for a window's history); a bad after is a 400. The test
// env's alert went CLEAR 300 s ago (gi 1) and WARNING 30 s ago (gi 2).
func TestAlertTransitionsWindow(t *testing.T) {
	env := newTestEnv(t)
	for _, c := range []struct {
		q    string
		want []uint64
	}{
		{"", []uint64{2, 1}},
		{"after=-60", []uint64{2}},
		{"before=-60", []uint64{1}},
		{"after=-600&before=-200", []uint64{1}},
		{"after=-20", []uint64{}},
		// 0 is a bound not given, as in Netdata (not "now").
		{"after=0&before=0", []uint64{2, 1}},
		{"after=0&before=-60", []uint64{1}},
	} {
		for _, v := range []string{"v2", "v3"} {
			path := "/api/" + v + "/alert_transitions?last=10&" + c.q
			r := env.get(t, path)
			if r.status != 200 {
				t.Fatalf("%s: %d %s", path, r.status, r.body)
			}
			var body struct {
				Transitions []struct {
					GI uint64 `json:"gi"`
				} `json:"transitions"`
			}
			if err := json.Unmarshal(r.body, &body); err != nil {
				t.Fatal(err)
			}
			got := []uint64{}
			for _, tr := range body.Transitions {
				got = append(got, tr.GI)
			}
			if len(got) != len(c.want) || len(got) > 0 && got[0] != c.want[0] {
				t.Errorf("%s: transitions %v, want %v", path, got, c.want)
			}
		}
	}
	for _, q := range []string{"after=abc", "before=1e9"} {
		if r := env.get(t, "/api/v3/alert_transitions?"+q); r.status != 400 || !strings.Contains(string(r.body), strings.Split(q, "=")[0]) {
			t.Errorf("%s: %d %s, want 400 naming it", q, r.status, r.body)
		}
	}
}
