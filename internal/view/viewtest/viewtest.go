// Package viewtest makes random changes of the naming view for the tests
// of the view's subscribers (view.Next makes the views from them).
package viewtest

import (
	"fmt"
	"math/rand/v2"

	"peerdns/internal/view"
)

// Changes returns n random changes over the names d0.p2p to
// d<names-1>.p2p (fewer when a name comes twice): a quarter of them
// remove their domain (a nil entry), the others put in domain(name).
func Changes(r *rand.Rand, n, names int, domain func(name string) *view.Domain) map[string]*view.Domain {
	changes := make(map[string]*view.Domain, n)
	for range n {
		name := fmt.Sprintf("d%d.p2p", r.IntN(names))
		changes[name] = nil
		if r.IntN(4) > 0 {
			changes[name] = domain(name)
		}
	}
	return changes
}
