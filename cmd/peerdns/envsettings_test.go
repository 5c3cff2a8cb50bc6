package main

import (
	"io"
	"strings"
	"testing"

	"peerdns/actors/settings"
)

// Every setting whose catalog entry names an environment variable is
// read from it: the node starts with the variable's value, and the
// setting is listed as coming from the environment (so update-settings
// refuses to change it). A bad value stops the start naming the
// variable.
func TestEveryCatalogVariableIsRead(t *testing.T) {
	sample := map[string]string{
		"LOG_LEVEL": "debug", "ADMIN_DOMAIN": "ops.p2p", "PROFILE_DOMAIN": "me.p2p",
		"ADMIN_ALLOWED_HOSTS": "panel.lan", "ADMIN_ADDR": "127.0.0.1:7711",
		"DNS_ADDR": "127.0.0.1:7754", "HTTP_ADDR": "127.0.0.1:7781", "HTTPS_ADDR": "127.0.0.1:7744",
		"P2P_ADDR": "127.0.0.1:7741", "BOOTSTRAP_PEERS": "127.0.0.1:7742",
		"ADVERTISE_ADDR": "192.0.2.1:7740", "SUBNET_BASE": "127.77", "INITIAL_IP_INDEX": "5",
		"UPSTREAM_DNS": "127.0.0.1:53", "DNS_CACHE_SIZE": "777", "DNS_RECURSION_ALLOW": "10.0.0.0/8",
		"DNS_QUERY_LOG": "true", "DOT_ADDR": "127.0.0.1:8853", "P2P_TCP": "false", "RELAY": "false",
		"PORT_MAP": "false", "RELAY_MAX_CONNS": "7", "RELAY_MAX_MBPS": "9", "REPLICA_SET_SIZE": "12",
		"EDGE_MAX_CONNS": "512", "EDGE_CONNS_PER_ADDRESS": "1000",
		"DNS_TCP_MAX_CONNS": "2048", "DNS_TCP_CONNS_PER_ADDRESS": "1500",
	}
	for _, d := range settings.Catalog {
		if d.Env == "" {
			continue
		}
		v, ok := sample[d.Name]
		if !ok {
			t.Errorf("%s (env %s): no sample value in this test", d.Name, d.Env)
			continue
		}
		env := map[string]string{d.Env: v}
		cfg, err := parseNodeFlags(nil, func(k string) string { return env[k] }, io.Discard)
		if err != nil {
			t.Errorf("%s=%s: %v", d.Env, v, err)
			continue
		}
		if cfg.Sources[d.Name] != "env" {
			t.Errorf("%s=%s: setting %s comes from %q, want env", d.Env, v, d.Name, cfg.Sources[d.Name])
		}
	}
	env := map[string]string{"PEERDNS_DNS_CACHE_SIZE": "777", "PEERDNS_REPLICA_SET_SIZE": "12"}
	cfg, err := parseNodeFlags(nil, func(k string) string { return env[k] }, io.Discard)
	if err != nil || cfg.DNSCacheSize != 777 || cfg.ReplicaSetSize != 12 {
		t.Fatalf("cache size %d, replica set size %d, %v; want 777 and 12", cfg.DNSCacheSize, cfg.ReplicaSetSize, err)
	}
	env = map[string]string{"PEERDNS_REPLICA_SET_SIZE": "many"}
	if _, err := parseNodeFlags(nil, func(k string) string { return env[k] }, io.Discard); err == nil || !strings.Contains(err.Error(), "PEERDNS_REPLICA_SET_SIZE") {
		t.Fatalf("a bad PEERDNS_REPLICA_SET_SIZE: %v; want an error naming it", err)
	}
}

// --system pins the addresses it moves (DNS, edge HTTP and HTTPS), where
// it was given: --system=false or PEERDNS_SYSTEM=false moves none, so
// saved and updated addresses still apply.
func TestSystemPinsOnlyWhenOn(t *testing.T) {
	for _, tt := range []struct {
		name string
		args []string
		env  map[string]string
		want string // DNS_ADDR's source
	}{
		{"flag off", []string{"--system=false"}, nil, ""},
		{"env off", nil, map[string]string{"PEERDNS_SYSTEM": "false"}, ""},
		{"flag on", []string{"--system"}, nil, "flag"},
		{"env on", nil, map[string]string{"PEERDNS_SYSTEM": "true"}, "env"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := parseNodeFlags(tt.args, func(k string) string { return tt.env[k] }, io.Discard)
			if err != nil {
				t.Fatal(err)
			}
			for _, name := range []string{settings.DNSAddr, settings.HTTPAddr, settings.HTTPSAddr} {
				if got := cfg.Sources[name]; got != tt.want {
					t.Errorf("%s comes from %q, want %q", name, got, tt.want)
				}
			}
		})
	}
}
