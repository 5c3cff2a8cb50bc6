package node

import (
	"strings"
	"testing"
)

// ADMIN_DOMAIN and PROFILE_DOMAIN name two different sites: the same
// name for both was saved, and after the restart the admin panel held
// the name, so GET /api/token on the profile domain was a 404 and no
// plugin write could get a token. A request that would make them equal
// is refused whole; swapping them is fine.
func TestAdminAndProfileDomainsDiffer(t *testing.T) {
	n := newTestNode(t, t.TempDir())
	base := "http://" + n.AdminAddr()
	for _, body := range []string{
		`{"settings":{"PROFILE_DOMAIN":"Admin.P2P."}}`,
		`{"settings":{"ADMIN_DOMAIN":"profile.p2p","LOG_LEVEL":"debug"}}`,
		`{"settings":{"ADMIN_DOMAIN":"same.p2p","PROFILE_DOMAIN":"same.p2p"}}`,
	} {
		code, resp := call(t, "POST", base+"/api/update-settings", body)
		if code != 400 || !strings.Contains(resp, "ADMIN_DOMAIN and PROFILE_DOMAIN") {
			t.Errorf("update-settings %s = %d %s, want 400 naming both settings", body, code, resp)
		}
	}
	s := getSettings(t, base)
	if s.Settings["ADMIN_DOMAIN"] != "admin.p2p" || s.Settings["PROFILE_DOMAIN"] != "profile.p2p" || s.Settings["LOG_LEVEL"] != "info" {
		t.Fatalf("after refused requests: ADMIN_DOMAIN %q, PROFILE_DOMAIN %q, LOG_LEVEL %q; want them unchanged",
			s.Settings["ADMIN_DOMAIN"], s.Settings["PROFILE_DOMAIN"], s.Settings["LOG_LEVEL"])
	}
	if code, resp := call(t, "POST", base+"/api/update-settings", `{"settings":{"ADMIN_DOMAIN":"profile.p2p","PROFILE_DOMAIN":"admin.p2p"}}`); code != 200 {
		t.Fatalf("swapping the two = %d %s, want 200", code, resp)
	}
}
