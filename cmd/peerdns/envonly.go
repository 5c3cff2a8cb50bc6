package main

import (
	"fmt"
	"maps"
	"slices"

	"peerdns/cmd/peerdns/node"
)

// envOnly are the settings read from the environment with no flag of
// their own, by environment variable (actors/settings' catalog names each
// setting's variable): the TCP and relay paths' P2P_TCP, RELAY,
// RELAY_MAX_CONNS, RELAY_MAX_MBPS and PORT_MAP, the edge's connection
// caps (EDGE_MAX_CONNS, EDGE_CONNS_PER_ADDRESS), the DNS server's TCP
// caps (DNS_TCP_MAX_CONNS, DNS_TCP_CONNS_PER_ADDRESS), the DNS cache's size, and
// the replica-set size (which every node of a network must share, so a
// deployment sets it for all of them at once).
var envOnly = map[string]string{
	"P2P_TCP": "P2P_TCP", "RELAY": "RELAY", "RELAY_MAX_CONNS": "RELAY_MAX_CONNS",
	"RELAY_MAX_MBPS": "RELAY_MAX_MBPS", "PORT_MAP": "PORT_MAP",
	"EDGE_MAX_CONNS": "EDGE_MAX_CONNS", "EDGE_CONNS_PER_ADDRESS": "EDGE_CONNS_PER_ADDRESS",
	"DNS_TCP_MAX_CONNS": "DNS_TCP_MAX_CONNS", "DNS_TCP_CONNS_PER_ADDRESS": "DNS_TCP_CONNS_PER_ADDRESS",
	"PEERDNS_DNS_CACHE_SIZE":   "DNS_CACHE_SIZE",
	"PEERDNS_REPLICA_SET_SIZE": "REPLICA_SET_SIZE",
}

// applyEnvOnly sets the envOnly settings the environment gives (checked
// as update-settings checks them) and marks them as coming from it. The
// variables are read in name order, so of several bad ones the same is
// reported every run.
func applyEnvOnly(c *node.Config, getenv func(string) string) error {
	for _, env := range slices.Sorted(maps.Keys(envOnly)) {
		name := envOnly[env]
		v := getenv(env)
		if v == "" {
			continue
		}
		if err := node.SetSetting(c, name, v); err != nil {
			return fmt.Errorf("%s: %v", env, err)
		}
		if c.Sources == nil {
			c.Sources = map[string]string{}
		}
		c.Sources[name] = "env"
	}
	return nil
}
