package settings

import (
	"fmt"
	"net/netip"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"peerdns/internal/store"
)

// config stands in for the node's Config: one typed field per setting.
type config struct {
	LogLevel, AdminDomain, ProfileDomain, AdminAddr, DNSAddr, HTTPAddr, HTTPSAddr, P2PAddr, DoTAddr, SubnetBase           string
	AdminAllowedHosts, Bootstrap, Advertise, Upstream                                                                     []string
	Token, Cache, Initial, Replicas, WS, Keep, Hours, RelayConns, RelayMbps, EdgeConns, EdgePerAddr, DNSConns, DNSPerAddr int
	QueryLog, NoTCP, RelayOff, PortMapOff                                                                                 bool
	ACL                                                                                                                   []netip.Prefix
}

// parsePrefixes reads an ACL as the DNS server does ("none" is empty,
// "" is nil) for these tests.
func parsePrefixes(s string) ([]netip.Prefix, error) {
	if strings.EqualFold(strings.TrimSpace(s), "none") {
		return []netip.Prefix{}, nil
	}
	var out []netip.Prefix
	for _, f := range Split(s) {
		p, err := netip.ParsePrefix(f)
		if err != nil {
			a, aerr := netip.ParseAddr(f)
			if aerr != nil {
				return nil, fmt.Errorf("%q is not a network", f)
			}
			p = netip.PrefixFrom(a, a.BitLen())
		}
		out = append(out, p.Masked())
	}
	return out, nil
}

func (c *config) fields() Fields {
	return Fields{
		LogLevel: &c.LogLevel, AdminDomain: &c.AdminDomain, ProfileDomain: &c.ProfileDomain,
		AdminAddr: &c.AdminAddr, DNSAddr: &c.DNSAddr, HTTPAddr: &c.HTTPAddr, HTTPSAddr: &c.HTTPSAddr,
		P2PAddr: &c.P2PAddr, DoTAddr: &c.DoTAddr, SubnetBase: &c.SubnetBase,
		AdminAllowedHosts: &c.AdminAllowedHosts, Bootstrap: &c.Bootstrap, Advertise: &c.Advertise, Upstream: &c.Upstream,
		TokenLifetimeSeconds: &c.Token, DNSCacheSize: &c.Cache, InitialIPIndex: &c.Initial, ReplicaSetSize: &c.Replicas,
		WSMaxClients: &c.WS, BackupRetention: &c.Keep, BackupIntervalHours: &c.Hours,
		RelayMaxConns: &c.RelayConns, RelayMaxMbps: &c.RelayMbps,
		EdgeMaxConns: &c.EdgeConns, EdgeConnsPerAddr: &c.EdgePerAddr,
		DNSTCPMaxConns: &c.DNSConns, DNSTCPConnsPerAddr: &c.DNSPerAddr,
		DNSQueryLog: &c.QueryLog, P2PNoTCP: &c.NoTCP, RelayOff: &c.RelayOff, PortMapOff: &c.PortMapOff,
		DNSRecursionAllow: &c.ACL, ParsePrefixes: parsePrefixes,
	}
}

// Every pointer of Fields is set by the node; a Fields with one missing
// would panic at the first Set or InForce. The test's config sets them
// all, which this checks so the round trip below covers every field.
func TestFieldsComplete(t *testing.T) {
	var c config
	v := reflect.ValueOf(c.fields())
	for i := 0; i < v.NumField(); i++ {
		if v.Field(i).IsNil() {
			t.Fatalf("Fields.%s not set by the test's config", v.Type().Field(i).Name)
		}
	}
}

// A value set by name is listed back as the same text, for every setting
// that has a field.
func TestFieldsRoundTrip(t *testing.T) {
	values := map[string]string{
		LogLevel: "debug", AdminDomain: "adm.p2p", ProfileDomain: "me.p2p", TokenLifetime: "120",
		AdminAllowedHosts: "panel.lan,panel.lan:8080", AdminAddr: "127.0.0.1:1", DNSAddr: "127.0.0.1:2",
		HTTPAddr: "127.0.0.1:3", HTTPSAddr: "127.0.0.1:4", P2PAddr: "0.0.0.0:5", BootstrapPeers: "192.0.2.1:7740,192.0.2.2:7740",
		AdvertiseAddr: "203.0.113.9:7740", UpstreamDNS: "192.0.2.53,192.0.2.54:5353", DNSCacheSize: "500",
		DNSRecursionAllow: "10.0.0.0/8,192.0.2.7/32", DNSQueryLog: "true", DoTAddr: "127.0.0.1:853",
		SubnetBase: "127.88.0.0", InitialIPIndex: "5", ReplicaSetSize: "7", WSMaxClients: "9",
		BackupRetention: "3", BackupInterval: "12", P2PTCP: "false", Relay: "false", PortMap: "false",
		RelayMaxConns: "11", RelayMaxMbps: "13", EdgeMaxConns: "2048", EdgeConnsPerAddr: "1000",
		DNSTCPMaxConns: "4096", DNSTCPConnsPerAddr: "2000",
	}
	var c config
	f := c.fields()
	for name, v := range values {
		if err := f.Set(name, v); err != nil {
			t.Fatalf("Set(%s, %q) = %v", name, v, err)
		}
	}
	got := f.InForce()
	for name, want := range values {
		if got[name] != want {
			t.Errorf("InForce()[%s] = %q after Set %q", name, got[name], want)
		}
	}
	for _, d := range Catalog {
		if _, ok := values[d.Name]; !ok && d.Name != Subnets && d.Name != InternalDomains {
			t.Errorf("%s has no case in this test: give it a value", d.Name)
		}
	}
	if !c.NoTCP || !c.RelayOff || !c.PortMapOff || c.Token != 120 || len(c.ACL) != 2 {
		t.Fatalf("typed fields after Set: %+v", c)
	}
}

// Zero fields list the node's defaults; the settings' special values
// (RELAY_MAX_MBPS 0 is no cap, DNS_RECURSION_ALLOW none) read both ways.
func TestFieldsDefaultsAndSpecialValues(t *testing.T) {
	var c config
	f := c.fields()
	got := f.InForce()
	for name, want := range map[string]string{
		TokenLifetime: "3600", BackupRetention: "10", WSMaxClients: "256", ReplicaSetSize: "24",
		RelayMaxConns: "64", RelayMaxMbps: "400", P2PTCP: "true", Relay: "true", PortMap: "true", DNSQueryLog: "false",
	} {
		if got[name] != want {
			t.Errorf("InForce()[%s] of a zero config = %q, want %q", name, got[name], want)
		}
	}
	for _, name := range []string{DNSCacheSize, EdgeMaxConns, EdgeConnsPerAddr, DNSTCPMaxConns, DNSTCPConnsPerAddr} {
		if _, ok := got[name]; ok {
			t.Errorf("InForce lists %s %q for a zero config, want it left to its server's default", name, got[name])
		}
	}
	if err := f.Set(RelayMaxMbps, "0"); err != nil || c.RelayMbps != -1 || f.InForce()[RelayMaxMbps] != "0" {
		t.Fatalf("RELAY_MAX_MBPS 0: err %v, field %d, listed %q; want -1 and 0", err, c.RelayMbps, f.InForce()[RelayMaxMbps])
	}
	if err := f.Set(DNSRecursionAllow, "none"); err != nil || c.ACL == nil || len(c.ACL) != 0 || f.InForce()[DNSRecursionAllow] != "none" {
		t.Fatalf("DNS_RECURSION_ALLOW none: err %v, field %v, listed %q", err, c.ACL, f.InForce()[DNSRecursionAllow])
	}
	for _, tt := range []struct{ name, v string }{
		{"NOPE", "1"}, {DNSCacheSize, "-3"}, {InternalDomains, "x.p2p"}, {LogLevel, "loud"},
	} {
		if err := f.Set(tt.name, tt.v); err == nil {
			t.Errorf("Set(%s, %q) = nil, want an error", tt.name, tt.v)
		}
	}
}

// Saved values apply unless a flag or the environment gave the setting;
// one that no longer validates is skipped with a warning.
func TestApplySaved(t *testing.T) {
	db, err := store.Open(filepath.Join(t.TempDir(), "node.db"), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	for k, v := range map[string]string{LogLevel: "warn", P2PAddr: "127.0.0.1:9", DNSCacheSize: "-5", UpstreamDNS: "192.0.2.53"} {
		if err := db.Set(Prefix+k, v); err != nil {
			t.Fatal(err)
		}
	}
	c := config{P2PAddr: "127.0.0.1:7", LogLevel: "info"}
	var warned []string
	inForce, src, err := ApplySaved(c.fields(), map[string]string{P2PAddr: "flag"}, db, func(msg string, args ...any) {
		warned = append(warned, fmt.Sprint(append([]any{msg}, args...)...))
	})
	if err != nil {
		t.Fatal(err)
	}
	if c.LogLevel != "warn" || c.P2PAddr != "127.0.0.1:7" || c.Cache != 0 || c.ProfileDomain != "profile.p2p" || len(c.Upstream) != 1 {
		t.Fatalf("config after ApplySaved: %+v", c)
	}
	if src[LogLevel] != "saved" || src[P2PAddr] != "flag" || src[DNSCacheSize] != "" || src[UpstreamDNS] != "saved" {
		t.Fatalf("sources %v", src)
	}
	if inForce[LogLevel] != "warn" || inForce[P2PAddr] != "127.0.0.1:7" || inForce[ProfileDomain] != "profile.p2p" {
		t.Fatalf("in force %v", inForce)
	}
	if len(warned) != 1 || !strings.Contains(warned[0], DNSCacheSize) {
		t.Fatalf("warnings %q, want one naming %s", warned, DNSCacheSize)
	}
}
