package main

import (
	"fmt"

	"peerdns/cmd/peerdns/node"
)

// reachEnv are the settings of the TCP and relay paths read from the
// environment (no flag): P2P_TCP, RELAY, RELAY_MAX_CONNS, RELAY_MAX_MBPS,
// PORT_MAP.
var reachEnv = []string{"P2P_TCP", "RELAY", "RELAY_MAX_CONNS", "RELAY_MAX_MBPS", "PORT_MAP"}

// applyReachEnv sets the reach settings the environment gives and marks
// them as coming from it.
func applyReachEnv(c *node.Config, getenv func(string) string) error {
	for _, name := range reachEnv {
		v := getenv(name)
		if v == "" {
			continue
		}
		if err := node.SetSetting(c, name, v); err != nil {
			return fmt.Errorf("%s: %v", name, err)
		}
		if c.Sources == nil {
			c.Sources = map[string]string{}
		}
		c.Sources[name] = "env"
	}
	return nil
}
