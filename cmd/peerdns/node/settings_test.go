package node

import (
	"encoding/json"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"

	"peerdns/actors/settings"
	"peerdns/dns/dnstest"
)

type settingsBody struct {
	Settings map[string]string `json:"settings"`
	Metadata map[string]struct {
		Type            string `json:"type"`
		Category        string `json:"category"`
		Label           string `json:"label"`
		Description     string `json:"description"`
		RestartRequired bool   `json:"restartRequired"`
		RestartPending  bool   `json:"restartPending"`
		Source          string `json:"source"`
	} `json:"metadata"`
}

func getSettings(t *testing.T, base string) settingsBody {
	t.Helper()
	var s settingsBody
	mustJSON(t, "GET", base+"/api/settings", "", 200, &s)
	return s
}

// Settings: listed with metadata, validated as a whole (nothing changes
// on any error), applied live (log level, upstreams, cache size), the
// others flagged for a restart, all saved across a restart, and settings
// given by a flag refused.
func TestSettings(t *testing.T) {
	dir := t.TempDir()
	cfg := testConfig(dir)
	cfg.Sources = map[string]string{settings.P2PAddr: "flag"}
	n, err := Start(cfg, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	base := "http://" + n.AdminAddr()

	s := getSettings(t, base)
	for _, d := range settings.Catalog {
		m, ok := s.Metadata[d.Name]
		if !ok || m.Type == "" || m.Category == "" || m.Label == "" || m.Description == "" {
			t.Fatalf("%s: metadata %+v", d.Name, m)
		}
		if _, ok := s.Settings[d.Name]; !ok {
			t.Fatalf("%s not listed", d.Name)
		}
	}
	if s.Settings["LOG_LEVEL"] != "info" || s.Metadata["P2P_ADDR"].Source != "flag" || s.Settings["INTERNAL_DOMAINS"] != "admin.p2p,profile.p2p" || s.Settings["PROFILE_DOMAIN"] != "profile.p2p" {
		t.Fatalf("settings %v", s.Settings)
	}
	if !strings.HasPrefix(s.Settings["SUBNETS"], "[{") {
		t.Fatalf("SUBNETS = %q", s.Settings["SUBNETS"])
	}

	// Every problem is named, and nothing changes.
	code, body := call(t, "POST", base+"/api/update-settings",
		`{"settings":{"LOG_LEVEL":"debug","NOPE":"1","DNS_CACHE_SIZE":"-3","P2P_ADDR":"127.0.0.1:9","INTERNAL_DOMAINS":"x.p2p","SUBNETS":"[{\"base\":\"300.1.1.0\",\"cidr\":24,\"startIndex\":2}]"}}`)
	var bad struct{ Errors []string }
	if code != 400 || json.Unmarshal([]byte(body), &bad) != nil || len(bad.Errors) != 5 {
		t.Fatalf("bad update: %d %s", code, body)
	}
	for _, want := range []string{"NOPE", "DNS_CACHE_SIZE", "P2P_ADDR", "INTERNAL_DOMAINS", "SUBNETS"} {
		if !strings.Contains(body, want) {
			t.Fatalf("errors do not name %s: %s", want, body)
		}
	}
	if got := getSettings(t, base).Settings["LOG_LEVEL"]; got != "info" {
		t.Fatalf("LOG_LEVEL changed by a refused update: %q", got)
	}
	for _, b := range []string{`{}`, `{"settings":[1]}`, `{"settings":{"LOG_LEVEL":{"a":1}}}`, `not json`} {
		if code, body := call(t, "POST", base+"/api/update-settings", b); code != 400 || !strings.Contains(body, "errors") {
			t.Fatalf("%s: %d %s", b, code, body)
		}
	}

	// Live: upstreams, log level, cache size.
	up := dnstest.Start(t, map[string]string{"upstream.example.": "192.0.2.7"})
	var rep struct {
		Message                 string   `json:"message"`
		RestartRequired         bool     `json:"restartRequired"`
		RestartRequiredSettings []string `json:"restartRequiredSettings"`
	}
	mustJSON(t, "POST", base+"/api/update-settings",
		`{"settings":{"LOG_LEVEL":"debug","UPSTREAM_DNS":"`+up.Addr+`","DNS_CACHE_SIZE":500}}`, 200, &rep)
	if rep.RestartRequired || len(rep.RestartRequiredSettings) != 0 {
		t.Fatalf("live update: %+v", rep)
	}
	if n.level.Level() != slog.LevelDebug || n.dns.CacheSize() != 500 {
		t.Fatalf("level %v, cache %d", n.level.Level(), n.dns.CacheSize())
	}
	c := &dns.Client{Timeout: 3 * time.Second}
	q := new(dns.Msg)
	q.SetQuestion("upstream.example.", dns.TypeA)
	m, _, err := c.Exchange(q, n.dns.Addr())
	if err != nil || len(m.Answer) != 1 || !strings.Contains(m.Answer[0].String(), "192.0.2.7") {
		t.Fatalf("lookup through the new upstream: %v %v", m, err)
	}

	// Restart-required settings say so and apply at the next start.
	mustJSON(t, "POST", base+"/api/update-settings",
		`{"settings":{"ADMIN_DOMAIN":"panel.p2p","SUBNETS":"[{\"base\":\"127.78.0.0\",\"cidr\":16,\"startIndex\":5,\"name\":\"lab\"}]"}}`, 200, &rep)
	if !rep.RestartRequired || strings.Join(rep.RestartRequiredSettings, ",") != "ADMIN_DOMAIN,SUBNETS" || !strings.Contains(rep.Message, "restart") {
		t.Fatalf("restart update: %+v", rep)
	}
	s = getSettings(t, base)
	if s.Settings["ADMIN_DOMAIN"] != "panel.p2p" || !s.Metadata["ADMIN_DOMAIN"].RestartPending || !strings.Contains(s.Settings["SUBNETS"], "127.78.0.0") {
		t.Fatalf("after the update: %v", s.Settings)
	}
	n.Stop()

	n, err = Start(cfg, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(n.Stop)
	base = "http://" + n.AdminAddr()
	s = getSettings(t, base)
	if s.Settings["LOG_LEVEL"] != "debug" || s.Metadata["LOG_LEVEL"].Source != "saved" || s.Settings["UPSTREAM_DNS"] != up.Addr ||
		s.Settings["ADMIN_DOMAIN"] != "panel.p2p" || s.Metadata["ADMIN_DOMAIN"].RestartPending || s.Settings["INTERNAL_DOMAINS"] != "panel.p2p,profile.p2p" {
		t.Fatalf("after restart: %v %+v", s.Settings, s.Metadata["ADMIN_DOMAIN"])
	}
	if n.cfg.AdminDomain != "panel.p2p" || n.dns.CacheSize() != 500 || n.level.Level() != slog.LevelDebug {
		t.Fatalf("restarted node runs with %q, cache %d, level %v", n.cfg.AdminDomain, n.dns.CacheSize(), n.level.Level())
	}
}

// SUBNET_BASE and INITIAL_IP_INDEX are the default subnet together: a
// request that leaves it with no address to hand out (a /31, or a first
// index past the subnet's end) is refused, since no domain could get a
// local IP after the restart they need.
func TestSettingsDefaultSubnetHasAddresses(t *testing.T) {
	n := newTestNode(t, t.TempDir())
	base := "http://" + n.AdminAddr()
	for _, req := range []string{
		`{"settings":{"SUBNET_BASE":"10.9.9.0/31"}}`,
		`{"settings":{"SUBNET_BASE":"10.9.9.0/29","INITIAL_IP_INDEX":"200"}}`,
	} {
		code, body := call(t, "POST", base+"/api/update-settings", req)
		if code != 400 || !strings.Contains(body, "errors") {
			t.Fatalf("update-settings %s = %d %s, want 400 with errors", req, code, body)
		}
	}
	// Each alone is fine; the second request is judged with the first.
	mustJSON(t, "POST", base+"/api/update-settings", `{"settings":{"SUBNET_BASE":"10.9.9.0/29"}}`, 200, nil)
	if code, body := call(t, "POST", base+"/api/update-settings", `{"settings":{"INITIAL_IP_INDEX":"200"}}`); code != 400 || !strings.Contains(body, "INITIAL_IP_INDEX") {
		t.Fatalf("INITIAL_IP_INDEX past a saved /29 = %d %s, want 400", code, body)
	}
	if got := getSettings(t, base).Settings["INITIAL_IP_INDEX"]; got != "0" && got != "2" {
		t.Fatalf("INITIAL_IP_INDEX after a refused update = %q", got)
	}
}

// ADMIN_DOMAIN and PROFILE_DOMAIN are DNS names the node answers and
// serves: a value with a port or an empty label could never be asked
// for, so update-settings refuses it.
func TestSettingsSiteDomainsAreNames(t *testing.T) {
	n := newTestNode(t, t.TempDir())
	base := "http://" + n.AdminAddr()
	for _, name := range []string{"ADMIN_DOMAIN", "PROFILE_DOMAIN"} {
		for _, v := range []string{"panel.p2p:8080", "[::1]:80", "panel..p2p"} {
			code, body := call(t, "POST", base+"/api/update-settings", `{"settings":{"`+name+`":"`+v+`"}}`)
			if code != 400 || !strings.Contains(body, name) {
				t.Errorf("update-settings %s=%q = %d %s, want 400 naming it", name, v, code, body)
			}
		}
	}
}
