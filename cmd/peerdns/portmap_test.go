package main

import (
	"bytes"
	"testing"
)

// PORT_MAP=false in the environment turns the router port mapping off
// and pins the PORT_MAP setting; unset, it is on.
func TestPortMapEnv(t *testing.T) {
	var out bytes.Buffer
	cfg, err := parseNodeFlags(nil, func(string) string { return "" }, &out)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.PortMapOff || cfg.Sources["PORT_MAP"] != "" {
		t.Fatalf("default: off %v, source %q", cfg.PortMapOff, cfg.Sources["PORT_MAP"])
	}
	env := map[string]string{"PORT_MAP": "false"}
	cfg, err = parseNodeFlags(nil, func(k string) string { return env[k] }, &out)
	if err != nil {
		t.Fatal(err)
	}
	if !cfg.PortMapOff || cfg.Sources["PORT_MAP"] != "env" {
		t.Fatalf("PORT_MAP=false: off %v, source %q", cfg.PortMapOff, cfg.Sources["PORT_MAP"])
	}
}
