package admin

import (
	"testing"

	"peerdns/internal/testutil"
)

// update-hash-preference has one 400 in the spec, an invalid preference;
// a missing or invalid domain is one of its other failures, a 500, as
// for update-version-preference.
func TestHashPreferenceStatuses(t *testing.T) {
	addr := newGuardedNode(t)
	for _, tt := range []struct {
		name, body string
		want       int
	}{
		{"set", `{"domain":"x.p2p","preference":"local"}`, 200},
		{"invalid preference", `{"domain":"x.p2p","preference":"bogus"}`, 400},
		{"no preference", `{"domain":"x.p2p"}`, 400},
		{"no domain", `{"preference":"local"}`, 500},
		{"invalid domain", `{"domain":"a/b.p2p","preference":"resolved"}`, 500},
		{"neither", `{}`, 400},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if code, body := testutil.Call(t, "POST", "http://"+addr+"/api/update-hash-preference", tt.body); code != tt.want {
				t.Fatalf("update-hash-preference %s = %d %s, want %d", tt.body, code, body, tt.want)
			}
		})
	}
}
