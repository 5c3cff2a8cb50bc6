package node

import (
	"io"
	"net/http"
	"strings"
	"testing"

	"peerdns/internal/testutil"
)

// The node's admin API answers its own names and refuses the rest: the
// admin domain and the configured extra hosts come from the node config.
func TestAdminHostsFromConfig(t *testing.T) {
	cfg := testConfig(t.TempDir())
	cfg.AdminDomain = "panel.p2p"
	cfg.AdminAllowedHosts = []string{"nas.lan"}
	n, err := Start(cfg, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(n.Stop)
	url := "http://" + n.AdminAddr() + "/api/resolved-domains"
	for host, want := range map[string]int{
		"panel.p2p":    200,
		"nas.lan":      200,
		"localhost":    200,
		"admin.p2p":    421, // not the admin domain of this node
		"evil.example": 421,
	} {
		req, _ := http.NewRequest("GET", url, nil)
		req.Host = host
		resp, err := testutil.Client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("Host %s: %d %s, want %d", host, resp.StatusCode, body, want)
		}
	}
	// A page on another site cannot add a domain with a form post.
	req, _ := http.NewRequest("POST", "http://"+n.AdminAddr()+"/api/add-domain",
		strings.NewReader(`{"domain":"evil.p2p","hash":"`+hashA+`"}`))
	req.Header.Set("Content-Type", "text/plain")
	req.Header.Set("Origin", "https://evil.example")
	resp, err := testutil.Client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 403 && resp.StatusCode != 415 {
		t.Fatalf("cross-site form post = %d", resp.StatusCode)
	}
	if _, body := call(t, "GET", url, ""); strings.Contains(body, "evil.p2p") {
		t.Fatalf("cross-site post added the domain: %s", body)
	}
}

func TestBadAllowedHostStopsAtStart(t *testing.T) {
	cfg := testConfig(t.TempDir())
	cfg.AdminAllowedHosts = []string{"bad host!"}
	if _, err := Start(cfg, io.Discard); err == nil || !strings.Contains(err.Error(), "ADMIN_ALLOWED_HOSTS") {
		t.Fatalf("Start = %v", err)
	}
}
