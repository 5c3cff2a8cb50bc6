package node

import (
	"os"
	"strconv"
	"time"
)

// PEERDNS_TEST_PORTMAP_LIFETIME (seconds, e.g. "10") is the lifetime
// this node asks the router for when it maps its peer port
// (transport/portmap.Config.Lifetime). It is for the port-mapping lab
// only: a lifetime of seconds makes the renewal happen within the test,
// against a real router (miniupnpd). Unset, empty, zero or unparsable:
// the default (2 h).
func portMapLifetime() time.Duration {
	n, err := strconv.Atoi(os.Getenv("PEERDNS_TEST_PORTMAP_LIFETIME"))
	if err != nil || n <= 0 {
		return 0
	}
	return time.Duration(n) * time.Second
}
