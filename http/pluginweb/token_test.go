package pluginweb

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"peerdns/actors/plugin"
	"peerdns/internal/token"
	"peerdns/transport/identity"
)

// The token never reaches the handler: not on the write it authorised,
// not on a read, not another peer's; X-Auth-Token never does. An
// Authorization of the plugin's own scheme passes.
func TestTokenNotPassedToHandler(t *testing.T) {
	self, _ := identity.Generate()
	other, _ := identity.Generate()
	rt := plugin.NewRuntime("app.p2p", "", func(ctx context.Context, req *plugin.HandleRequest) (*plugin.HandleResponse, error) {
		b, _ := json.Marshal(req.Headers)
		return &plugin.HandleResponse{Status: 200, Body: b}, nil
	})
	base := serve(t, &Server{Self: self.ID()}, rt)
	mine, _ := token.Issue(self, time.Now(), time.Hour)
	theirs, _ := token.Issue(other, time.Now(), time.Hour)
	for _, c := range []struct {
		method string
		hdr    map[string]string
		pass   string // a header value the handler must see; "" none
	}{
		{"POST", map[string]string{"Authorization": "Bearer " + mine}, ""},
		{"PUT", map[string]string{"X-Auth-Token": mine}, ""},
		{"GET", map[string]string{"Authorization": "Bearer " + mine}, ""},
		{"GET", map[string]string{"Authorization": "bearer " + theirs}, ""},
		{"GET", map[string]string{"X-Auth-Token": theirs}, ""},
		{"POST", map[string]string{"X-Auth-Token": mine, "Authorization": "Basic dTpw"}, "Basic dTpw"},
		{"GET", map[string]string{"Authorization": "Bearer plugin-own-token"}, "Bearer plugin-own-token"},
	} {
		code, body, _ := do(t, c.method, base+"/x", c.hdr)
		if code != 200 {
			t.Fatalf("%s %v: %d %s", c.method, c.hdr, code, body)
		}
		if strings.Contains(body, mine) || strings.Contains(body, theirs) || strings.Contains(body, "X-Auth-Token") {
			t.Errorf("%s %v: the handler got the token: %s", c.method, c.hdr, body)
		}
		if c.pass != "" && !strings.Contains(body, c.pass) {
			t.Errorf("%s %v: the handler did not get %q: %s", c.method, c.hdr, c.pass, body)
		}
	}
}
