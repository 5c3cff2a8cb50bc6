package main

import (
	"bytes"
	"slices"
	"testing"
)

// --advertise-addr and PEERDNS_ADVERTISE_ADDR fill Config.Advertise (the
// flag wins) and pin the ADVERTISE_ADDR setting.
func TestAdvertiseAddrFlag(t *testing.T) {
	var out bytes.Buffer
	env := map[string]string{"PEERDNS_ADVERTISE_ADDR": "198.51.100.9:7740"}
	cfg, err := parseNodeFlags(nil, func(k string) string { return env[k] }, &out)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(cfg.Advertise, []string{"198.51.100.9:7740"}) || cfg.Sources["ADVERTISE_ADDR"] != "env" {
		t.Fatalf("from the environment: %v, source %q", cfg.Advertise, cfg.Sources["ADVERTISE_ADDR"])
	}
	cfg, err = parseNodeFlags([]string{"--advertise-addr", " 203.0.113.7:7740, node.example:7740 "}, func(k string) string { return env[k] }, &out)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(cfg.Advertise, []string{"203.0.113.7:7740", "node.example:7740"}) || cfg.Sources["ADVERTISE_ADDR"] != "flag" {
		t.Fatalf("from the flag: %v, source %q", cfg.Advertise, cfg.Sources["ADVERTISE_ADDR"])
	}
}
