package pluginweb

import (
	"context"
	"strings"
	"testing"
	"time"

	"peerdns/actors/plugin"
	"peerdns/internal/token"
	"peerdns/transport/identity"
)

// Only GET, HEAD and OPTIONS reach a handler without a token. Any other
// method may write (a lower-case "post" that a handler's framework takes
// for POST, WebDAV's MKCOL or PROPPATCH, a method of the plugin's own),
// so it needs this node's token as POST does, and the handler gets the
// verified peer header with it.
func TestOtherMethodsNeedToken(t *testing.T) {
	self, _ := identity.Generate()
	rt := plugin.NewRuntime("app.p2p", "", func(ctx context.Context, req *plugin.HandleRequest) (*plugin.HandleResponse, error) {
		return &plugin.HandleResponse{Status: 200, Body: []byte(req.Method + " peer=" + req.Headers[PeerHeader])}, nil
	})
	base := serve(t, &Server{Self: self.ID()}, rt)
	mine, _ := token.Issue(self, time.Now(), time.Hour)
	for _, m := range []string{"post", "Put", "MKCOL", "PROPPATCH", "COPY", "MOVE", "LOCK", "PURGE", "X-WRITE"} {
		if code, body, _ := do(t, m, base+"/x", nil); code != 401 {
			t.Errorf("%s without a token: %d %s, want 401", m, code, body)
		}
		if code, body, _ := do(t, m, base+"/x", map[string]string{"Authorization": "Bearer " + mine}); code != 200 || body != m+" peer="+self.ID() {
			t.Errorf("%s with this node's token: %d %s", m, code, body)
		}
	}
	for _, m := range []string{"GET", "OPTIONS"} {
		if code, body, _ := do(t, m, base+"/x", nil); code != 200 || !strings.HasPrefix(body, m+" peer=") {
			t.Errorf("%s without a token: %d %s, want 200", m, code, body)
		}
	}
	if code, _, _ := do(t, "HEAD", base+"/x", nil); code != 200 {
		t.Errorf("HEAD without a token: %d, want 200", code)
	}
}
