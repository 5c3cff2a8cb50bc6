package settings

import (
	"strings"
	"testing"
)

// Every setting has what the API lists, and its validator takes the
// default and refuses nonsense.
func TestCatalog(t *testing.T) {
	seen := map[string]bool{}
	for _, d := range Catalog {
		if seen[d.Name] {
			t.Fatalf("%s listed twice", d.Name)
		}
		seen[d.Name] = true
		if d.Type == "" || d.Category == "" || d.Label == "" || d.Description == "" {
			t.Fatalf("%s: metadata incomplete: %+v", d.Name, d)
		}
		if d.Default != "" && !d.ReadOnly {
			if err := d.Validate(d.Default); err != nil {
				t.Fatalf("%s refuses its own default %q: %v", d.Name, d.Default, err)
			}
		}
	}
	for name, bad := range map[string][]string{
		LogLevel:          {"loud", ""},
		AdminDomain:       {"", "not a domain!", "a b"},
		AdminAddr:         {"127.0.0.1", "127.0.0.1:99999", "host:port"},
		BootstrapPeers:    {"1.2.3.4:5,oops"},
		UpstreamDNS:       {"dns.google", "1.2.3.4:x"},
		DNSCacheSize:      {"0", "-1", "ten"},
		DNSRecursionAllow: {"10.0.0.0/33", "everyone"},
		SubnetBase:        {"300.1.1.1", "fd00::/8", "10.9.9.0/31"},
		InitialIPIndex:    {"-1", "255"},
		Subnets:           {"{}", `[{"base":"10.0.0.0","cidr":40,"startIndex":2}]`},
		InternalDomains:   {"x.p2p"},
		TokenLifetime:     {"59", "1y"},
		BackupRetention:   {"0"},
		BackupInterval:    {"-1"},
		DNSQueryLog:       {"yes", "1"},
		DoTAddr:           {"853", "host:port"},
	} {
		d, ok := Lookup(name)
		if !ok {
			t.Fatalf("%s not in the catalog", name)
		}
		for _, v := range bad {
			if err := d.Validate(v); err == nil || !strings.Contains(err.Error(), name) {
				t.Errorf("%s accepted %q (%v)", name, v, err)
			}
		}
	}
	for name, good := range map[string]string{
		LogLevel: "DEBUG", AdminAllowedHosts: "panel.lan, 10.0.0.5:7710", BootstrapPeers: "10.0.0.2:7740,[::1]:7740",
		UpstreamDNS: "1.1.1.1, 9.9.9.9:53, [2606:4700::1111]:53", DNSRecursionAllow: "none", DoTAddr: "", DNSQueryLog: "TRUE", Subnets: `[{"base":"10.9.0.0","cidr":24,"startIndex":2}]`,
	} {
		d, _ := Lookup(name)
		if err := d.Validate(good); err != nil {
			t.Errorf("%s refused %q: %v", name, good, err)
		}
	}
}

// BOOTSTRAP_PEERS takes what the peer actor dials (actors/peer,
// parseTarget): host:port, or <peer id>@host:port.
func TestBootstrapPeersTakesPeerID(t *testing.T) {
	d, _ := Lookup(BootstrapPeers)
	id := strings.Repeat("ab", 32)
	if err := d.Validate(id + "@10.0.0.2:7740, 10.0.0.3:7740," + id + "@peer.lan:7740"); err != nil {
		t.Errorf("refused peer id@host:port: %v", err)
	}
	for _, bad := range []string{"xyz@10.0.0.2:7740", id + "@", id + "@oops", "@10.0.0.2:7740", strings.ToUpper(id) + "@10.0.0.2:7740"} {
		if err := d.Validate(bad); err == nil || !strings.Contains(err.Error(), BootstrapPeers) {
			t.Errorf("accepted %q (%v)", bad, err)
		}
	}
}
