package main

import (
	"strings"
	"testing"
)

// A flag on the command line wins over its variable, also over one whose
// value is bad: the bad variable stopped the start though the flag
// replaced it. A bad variable with no flag over it still does.
func TestFlagWinsOverBadVariable(t *testing.T) {
	env := map[string]string{"PEERDNS_DNS_QUERY_LOG": "yes please", "PEERDNS_SYSTEM": "maybe"}
	getenv := func(k string) string { return env[k] }
	cfg, err := parseNodeFlags([]string{"--dns-query-log", "--system=false"}, getenv, &strings.Builder{})
	if err != nil || !cfg.DNSQueryLog || cfg.System {
		t.Fatalf("flags over bad variables: err %v, DNSQueryLog %v, System %v; want no error, true, false", err, cfg.DNSQueryLog, cfg.System)
	}
	if _, err := parseNodeFlags([]string{"--dns-query-log"}, getenv, &strings.Builder{}); err == nil || !strings.Contains(err.Error(), "PEERDNS_SYSTEM") {
		t.Fatalf("PEERDNS_SYSTEM=maybe with no --system: err %v, want one naming PEERDNS_SYSTEM", err)
	}
}

// Of several bad variables read from the environment only, the start
// names the same one every run (the first by name), not one picked by
// map order.
func TestBadEnvOnlyVariableReportedSameEachRun(t *testing.T) {
	env := map[string]string{"RELAY_MAX_CONNS": "many", "EDGE_MAX_CONNS": "lots", "PEERDNS_REPLICA_SET_SIZE": "some", "PORT_MAP": "perhaps"}
	getenv := func(k string) string { return env[k] }
	for range 30 {
		_, err := parseNodeFlags(nil, getenv, &strings.Builder{})
		if err == nil || !strings.HasPrefix(err.Error(), "EDGE_MAX_CONNS:") {
			t.Fatalf("err %v, want the one of EDGE_MAX_CONNS (first by name) each run", err)
		}
	}
}
