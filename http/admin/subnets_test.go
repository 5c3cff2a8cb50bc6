package admin

import (
	"strings"
	"testing"

	"peerdns/internal/ipam"
	"peerdns/internal/testutil"
)

// A list of many overlapping subnets is refused with an answer the size
// of a few lines, not one line per overlapping pair: a 46 KB body of
// one subnet a thousand times made a 400 of half a million errors
// (tens of MB), and a 4 MB body, billions of them (memory without
// bound, and as many comparisons).
func TestManySubnetsRefusedBriefly(t *testing.T) {
	addr := serveAdmin(t, Deps{})
	list := func(n int) string {
		return `{"subnets":[` + strings.TrimSuffix(strings.Repeat(`{"base":"10.0.0.0","cidr":24,"startIndex":1},`, n), ",") + `]}`
	}
	for _, n := range []int{ipam.MaxSubnets, 1000} {
		code, body := testutil.Call(t, "POST", "http://"+addr+"/api/subnets", list(n))
		if code != 400 || len(body) > 64<<10 || !strings.Contains(body, "errors") {
			t.Fatalf("%d copies of one subnet: %d, %d bytes: %.300s", n, code, len(body), body)
		}
	}
}
