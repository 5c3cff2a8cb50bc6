package api

import (
	"strings"
	"testing"
)

// TestBadgeRefresh: refresh= sets the Refresh header, as Netdata's
// badges do (a badge in an <embed> or <iframe> reloads itself): a number
// of seconds (its absolute value), or auto, the alert's update interval
// for an alert badge and the query's window (the chart's interval with
// unaligned) for a chart badge. No refresh, 0, or a chart that is not
// found: no header. Anything else is a 400.
func TestBadgeRefresh(t *testing.T) {
	env := newTestEnv(t)
	for _, c := range []struct{ q, want string }{
		{"chart=system.cpu", ""},
		{"chart=system.cpu&refresh=0", ""},
		{"chart=system.cpu&refresh=30", "30"},
		{"chart=system.cpu&refresh=-30", "30"},
		{"chart=system.cpu&refresh=auto", "1"},
		{"chart=system.cpu&refresh=auto&after=-60", "60"},
		{"chart=system.cpu&refresh=auto&after=-60&before=-10", "60"},
		{"chart=system.cpu&refresh=auto&after=-60&options=unaligned", "1"},
		{"chart=system.ram&alarm=ram_in_use&refresh=auto", "10"},
		{"chart=no.such_chart&refresh=auto", ""},
	} {
		r := env.get(t, "/api/v1/badge.svg?"+c.q)
		if r.status != 200 || r.header.Get("Refresh") != c.want {
			t.Errorf("%s: %d, Refresh %q; want 200 and %q", c.q, r.status, r.header.Get("Refresh"), c.want)
		}
	}
	for _, q := range []string{"refresh=soon", "refresh=1.5", "refresh=86401", "refresh=" + strings.Repeat("9", 30)} {
		if r := env.get(t, "/api/v1/badge.svg?chart=system.cpu&"+q); r.status != 400 || !strings.Contains(string(r.body), "refresh") {
			t.Errorf("%s: %d %q, want 400 naming refresh", q, r.status, r.body)
		}
	}
}
