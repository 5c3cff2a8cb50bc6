package node

import (
	"os"
	"strconv"
)

// PEERDNS_TEST_RELAY_TAMPER (a byte count, e.g. "2048") makes this node,
// as a relay, flip a byte in every chunk it relays once a direction of a
// relayed connection has carried that many bytes
// (transport.RelayConfig.TamperAfter). It is for fault tests only (the
// namespace test of a hostile relay starts one with it): a relay that
// tampers must make the pair fail closed and find another path, and a
// real node process is the honest way to show it. Unset, empty, zero or
// unparsable: the relay copies faithfully.
func relayTamperAfter() int64 {
	n, err := strconv.ParseInt(os.Getenv("PEERDNS_TEST_RELAY_TAMPER"), 10, 64)
	if err != nil || n <= 0 {
		return 0
	}
	return n
}
