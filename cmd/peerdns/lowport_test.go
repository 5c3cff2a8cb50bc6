package main

import (
	"os"
	"os/exec"
	"strings"
	"testing"

	"peerdns/internal/testutil"
)

// A tunnel client on a port below 1024, in a node without the privilege
// to bind it, is refused with a 500 that says how to grant it, and
// nothing is created. As root the node process runs with
// CAP_NET_BIND_SERVICE dropped from its bounding set (setpriv, from
// util-linux); otherwise it runs as the user running the test.
func TestLowPortWithoutPrivilege(t *testing.T) {
	if b, err := os.ReadFile("/proc/sys/net/ipv4/ip_unprivileged_port_start"); err == nil && strings.TrimSpace(string(b)) == "0" {
		t.Skip("net.ipv4.ip_unprivileged_port_start is 0: every user may bind low ports here, so there is no refusal to test")
	}
	var wrap []string
	if os.Geteuid() == 0 {
		sp, err := exec.LookPath("setpriv")
		if err != nil {
			t.Skip("setpriv not found (apt-get install util-linux): needed to drop CAP_NET_BIND_SERVICE when the test runs as root")
		}
		wrap = []string{sp, "--bounding-set", "-net_bind_service", "--inh-caps", "-all"}
	}
	_, admin := startProcessWrapped(t, wrap, t.TempDir())
	base := "http://" + admin
	testutil.AddDomain(t, base, "low.p2p", testutil.Hash('c'))
	code, body := testutil.Call(t, "POST", base+"/api/tunnel-client-create",
		`{"domain":"low.p2p","key":"`+testutil.Hash('c')+`","port":81}`)
	if code != 500 || !strings.Contains(body, "setcap cap_net_bind_service=+ep") || !strings.Contains(body, "below 1024") {
		t.Fatalf("tunnel-client-create on port 81: %d %s", code, body)
	}
	var clients []map[string]any
	testutil.MustJSON(t, "GET", base+"/api/tunnel-clients", "", 200, &clients)
	if len(clients) != 0 {
		t.Fatalf("a refused client was created: %v", clients)
	}
}
